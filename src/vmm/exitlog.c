/*
 * exitlog: the ring of each vCPU's last exits and the post-mortem printed
 * when a guest dies. See exitlog.h.
 */
#include "vmm/exitlog.h"
#include "vmm/vmm.h"
#include "vmm/devices/serial.h"

#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

int exitlog_enable(struct vcpu *v)
{
	int caps = ioctl(v->vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_SYNC_REGS);
	if (caps <= 0 || !(caps & KVM_SYNC_X86_REGS))
		return 0;
	/* KVM copies the registers out on every exit; kvm_dirty_regs stays 0,
	 * so nothing is ever copied back in. */
	v->run->kvm_valid_regs = KVM_SYNC_X86_REGS;
	return 1;
}

void exitlog_record(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	struct exitlog *log = &v->exits;
	struct exitlog_entry *e = &log->e[log->count % EXITLOG_N];
	e->t_ns = now_ns();
	e->reason = run->exit_reason;
	e->rip = run->kvm_valid_regs ? run->s.regs.regs.rip : 0;
	e->rsp = run->kvm_valid_regs ? run->s.regs.regs.rsp : 0;
	e->addr = e->data = 0;
	e->size = e->write = 0;
	if (run->exit_reason == KVM_EXIT_IO) {
		e->addr = run->io.port;
		e->size = run->io.size;
		e->write = run->io.direction == KVM_EXIT_IO_OUT;
		if (e->write && run->io.size <= 8)
			memcpy(&e->data, (uint8_t *)run + run->io.data_offset, run->io.size);
	} else if (run->exit_reason == KVM_EXIT_MMIO) {
		e->addr = run->mmio.phys_addr;
		e->size = (uint8_t)(run->mmio.len > 8 ? 8 : run->mmio.len);
		e->write = run->mmio.is_write;
		if (e->write)
			memcpy(&e->data, run->mmio.data, e->size);
	}
	log->count++;
}

static const char *reason_name(uint32_t r)
{
	switch (r) {
	case KVM_EXIT_IO: return "io";
	case KVM_EXIT_MMIO: return "mmio";
	case KVM_EXIT_HLT: return "hlt";
	case KVM_EXIT_INTR: return "intr";
	case KVM_EXIT_IRQ_WINDOW_OPEN: return "irq-window";
	case KVM_EXIT_SHUTDOWN: return "shutdown";
	case KVM_EXIT_FAIL_ENTRY: return "fail-entry";
	case KVM_EXIT_INTERNAL_ERROR: return "internal-error";
	case KVM_EXIT_SYSTEM_EVENT: return "system-event";
	default: return "other";
	}
}

void exitlog_dump(struct vm *vm, const char *why)
{
	uint64_t now = now_ns();
	fprintf(stderr, "kiln-vmm: post-mortem: %s, %.3f s after start\n", why,
		(double)(now - vm->start_ns) / 1e9);
	for (int i = 0; i < vm->nvcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		const struct exitlog *log = &v->exits;
		uint64_t n = log->count < EXITLOG_N ? log->count : EXITLOG_N;
		fprintf(stderr, "kiln-vmm: vCPU %d: %llu exits to userspace; the last %llu (ms before now, reason, rip, rsp, address/port, size, data):\n",
			i, (unsigned long long)log->count, (unsigned long long)n);
		for (uint64_t k = log->count - n; k < log->count; k++) {
			const struct exitlog_entry *e = &log->e[k % EXITLOG_N];
			char what[96] = "";
			if (e->reason == KVM_EXIT_IO || e->reason == KVM_EXIT_MMIO)
				snprintf(what, sizeof what, " %s 0x%llx/%u%s0x%llx", e->write ? "w" : "r",
					 (unsigned long long)e->addr, e->size, e->write ? " = " : " ",
					 (unsigned long long)e->data);
			fprintf(stderr, "kiln-vmm:   #%llu -%.3f %s rip 0x%llx rsp 0x%llx%s\n",
				(unsigned long long)k, (double)(int64_t)(now - e->t_ns) / 1e6,
				reason_name(e->reason), (unsigned long long)e->rip,
				(unsigned long long)e->rsp, what);
		}
	}
	char tail[1024];
	size_t n = serial_tail(vm, tail, sizeof tail);
	fprintf(stderr, "kiln-vmm: console tail (%zu bytes):\n", n);
	size_t start = 0;
	for (size_t i = 0; i <= n; i++)
		if (i == n || tail[i] == '\n') {
			if (i > start)
				fprintf(stderr, "kiln-vmm: | %.*s\n", (int)(i - start - (tail[i - 1] == '\r')), tail + start);
			start = i + 1;
		}
	fprintf(stderr, "kiln-vmm: end of post-mortem\n");
}
