/*
 * serial: an 8250/16550A UART as COM1, enough for Linux's 8250 driver and
 * its console. Output leaves through a line buffer (one write per line,
 * not per byte: every byte the guest writes is already one VM exit).
 * Loopback mode mirrors the modem-control bits, because the driver's
 * probe checks for it.
 */
#include "vmm/devices/serial.h"
#include "vmm/vmm.h"
#include "common/err.h"
#include "vmm/snapshot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COM1_BASE 0x3f8

#define IER_RDI  0x01
#define IER_THRI 0x02
#define IIR_NONE 0x01
#define IIR_THRI 0x02
#define IIR_RDI  0x04
#define IIR_FIFO 0xc0
#define LCR_DLAB 0x80
#define LSR_DR   0x01
#define LSR_THRE 0x20
#define LSR_TEMT 0x40
#define MCR_LOOP 0x10
#define MSR_DCD  0x80
#define MSR_DSR  0x20
#define MSR_CTS  0x10

struct serial {
	struct vm *vm;
	int out_fd;
	uint8_t ier, lcr, mcr, msr, scr, fcr, dll, dlm;
	bool thri_pending;
	int level;
	char line[512];
	size_t line_len;
	/* The console's last bytes, for the post-mortem of a guest that died
	 * (exitlog.c): a ring, tail_pos the next byte to write. */
	char tail[2048];
	size_t tail_pos, tail_len;
};

static void keep_tail(struct serial *s, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		s->tail[s->tail_pos] = p[i];
		s->tail_pos = (s->tail_pos + 1) % sizeof s->tail;
	}
	s->tail_len = s->tail_len + n > sizeof s->tail ? sizeof s->tail : s->tail_len + n;
}

static void flush_line(struct serial *s)
{
	size_t off = 0;
	keep_tail(s, s->line, s->line_len);
	while (s->out_fd >= 0 && off < s->line_len) {
		ssize_t n = write(s->out_fd, s->line + off, s->line_len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;                /* console gone: drop output, keep running */
		off += (size_t)n;
	}
	s->line_len = 0;
}

static uint8_t iir(struct serial *s)
{
	if (s->thri_pending && (s->ier & IER_THRI))
		return IIR_THRI | IIR_FIFO;
	return IIR_NONE | IIR_FIFO;
}

static void update_irq(struct serial *s)
{
	int level = !(iir(s) & IIR_NONE);
	if (level != s->level) {
		s->level = level;
		kvm_irq_line(s->vm, GSI_SERIAL, level);
	}
}

static void serial_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	struct serial *s = opaque;
	if (len != 1) {
		if (!is_write)
			memset(data, 0, len);
		return;
	}
	bool dlab = s->lcr & LCR_DLAB;
	if (is_write) {
		uint8_t v = *data;
		switch (off) {
		case 0:
			if (dlab) {
				s->dll = v;
				break;
			}
			if (!(s->mcr & MCR_LOOP)) {
				s->line[s->line_len++] = (char)v;
				if (v == '\n' || s->line_len == sizeof s->line)
					flush_line(s);
			}
			s->thri_pending = true;   /* sent at once: THR is empty again */
			break;
		case 1:
			if (dlab) {
				s->dlm = v;
				break;
			}
			if ((v & IER_THRI) && !(s->ier & IER_THRI))
				s->thri_pending = true;
			s->ier = v & 0x0f;
			break;
		case 2: s->fcr = v; break;
		case 3: s->lcr = v; break;
		case 4: s->mcr = v & 0x1f; break;
		case 7: s->scr = v; break;
		}
	} else {
		switch (off) {
		case 0: *data = dlab ? s->dll : 0; break;
		case 1: *data = dlab ? s->dlm : s->ier; break;
		case 2:
			*data = iir(s);
			if ((*data & 0x0f) == IIR_THRI)
				s->thri_pending = false;   /* reading IIR acknowledges THRE */
			break;
		case 3: *data = s->lcr; break;
		case 4: *data = s->mcr; break;
		case 5: *data = LSR_THRE | LSR_TEMT; break;
		case 6:
			if (s->mcr & MCR_LOOP)   /* RTS->CTS, DTR->DSR, OUT1->RI, OUT2->DCD */
				*data = (uint8_t)(((s->mcr & 0x02) << 3) | ((s->mcr & 0x01) << 5) |
						  ((s->mcr & 0x04) << 4) | ((s->mcr & 0x08) << 4));
			else
				*data = MSR_DCD | MSR_DSR | MSR_CTS;
			break;
		case 7: *data = s->scr; break;
		default: *data = 0;
		}
	}
	update_irq(s);
}

/* The guest-visible registers, as saved in a snapshot. */
struct serial_state {
	uint8_t ier, lcr, mcr, msr, scr, fcr, dll, dlm;
	uint8_t thri_pending, level, pad[6];
};

void serial_save(struct vm *vm, struct strbuf *out)
{
	struct serial *s = vm->serial;
	flush_line(s);
	struct serial_state st = { s->ier, s->lcr, s->mcr, s->msr, s->scr, s->fcr, s->dll, s->dlm,
				   s->thri_pending, (uint8_t)s->level, { 0 } };
	strbuf_append(out, &st, sizeof st);
}

int serial_load(struct vm *vm, struct snap_reader *r)
{
	struct serial *s = vm->serial;
	struct serial_state st;
	if (!snap_read(r, &st, sizeof st))
		return errf(EINVAL, "snapshot state is damaged: serial record");
	s->ier = st.ier & 0x0f;
	s->lcr = st.lcr;
	s->mcr = st.mcr & 0x1f;
	s->msr = st.msr;
	s->scr = st.scr;
	s->fcr = st.fcr;
	s->dll = st.dll;
	s->dlm = st.dlm;
	s->thri_pending = st.thri_pending != 0;
	s->level = -1;                    /* force the line to be driven again */
	update_irq(s);
	return 0;
}

int serial_add(struct vm *vm, int out_fd)
{
	struct serial *s = calloc(1, sizeof *s);
	if (!s)
		return errf(ENOMEM, "out of memory");
	s->vm = vm;
	s->out_fd = out_fd;
	vm->serial = s;
	return bus_add(&vm->pio, COM1_BASE, 8, serial_io, s);
}

void serial_flush(struct vm *vm)
{
	if (vm->serial)
		flush_line(vm->serial);
}

size_t serial_tail(struct vm *vm, char *buf, size_t size)
{
	struct serial *s = vm->serial;
	if (!s || !size)
		return 0;
	/* The line not yet flushed is the newest output: count it in. */
	size_t n = s->tail_len < size ? s->tail_len : size;
	size_t start = (s->tail_pos + sizeof s->tail - n) % sizeof s->tail;
	for (size_t i = 0; i < n; i++)
		buf[i] = s->tail[(start + i) % sizeof s->tail];
	size_t extra = s->line_len < size - n ? s->line_len : size - n;
	memcpy(buf + n, s->line, extra);
	return n + extra;
}

void serial_destroy(struct vm *vm)
{
	if (!vm->serial)
		return;
	flush_line(vm->serial);
	if (vm->serial->out_fd > 2)
		close(vm->serial->out_fd);
	free(vm->serial);
	vm->serial = NULL;
}
