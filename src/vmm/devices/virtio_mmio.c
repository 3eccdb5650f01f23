/*
 * virtio-mmio version 2 transport (virtio 1.2 §4.2.2) and split virtqueues
 * (§2.7). See virtio_mmio.h for the threading and trust model.
 */
#include "vmm/devices/virtio_mmio.h"
#include "vmm/vmm.h"
#include "vmm/snapshot.h"
#include "common/strbuf.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define REG_MAGIC            0x000
#define REG_VERSION          0x004
#define REG_DEVICE_ID        0x008
#define REG_VENDOR_ID        0x00c
#define REG_DEVICE_FEATURES  0x010
#define REG_DEVICE_FEATURES_SEL 0x014
#define REG_DRIVER_FEATURES  0x020
#define REG_DRIVER_FEATURES_SEL 0x024
#define REG_QUEUE_SEL        0x030
#define REG_QUEUE_NUM_MAX    0x034
#define REG_QUEUE_NUM        0x038
#define REG_QUEUE_READY      0x044
#define REG_QUEUE_NOTIFY     0x050
#define REG_INTERRUPT_STATUS 0x060
#define REG_INTERRUPT_ACK    0x064
#define REG_STATUS           0x070
#define REG_QUEUE_DESC_LOW   0x080
#define REG_QUEUE_DESC_HIGH  0x084
#define REG_QUEUE_AVAIL_LOW  0x090
#define REG_QUEUE_AVAIL_HIGH 0x094
#define REG_QUEUE_USED_LOW   0x0a0
#define REG_QUEUE_USED_HIGH  0x0a4
#define REG_CONFIG_GENERATION 0x0fc
#define REG_CONFIG           0x100

#define MMIO_MAGIC  0x74726976   /* "virt" */
#define VENDOR_KILN 0x4e4c494b   /* "KILN" */

#define INT_USED_BUFFER 1
#define INT_CONFIG      2

static void queue_reset(struct virtq *q)
{
	struct virtq keep = *q;
	memset(q, 0, sizeof *q);
	q->kick_fd = keep.kick_fd;
	q->index = keep.index;
	q->dev = keep.dev;
}

/* How a device's interrupt reaches KVM. IRQFD (the default): an edge
 * through the eventfd KVM watches. LINE: the same edge, raised and
 * lowered by this process with KVM_IRQ_LINE. LEVEL: the line stays high
 * while the interrupt status has a bit set and drops when the driver
 * acknowledges the last one (what QEMU's microvm does). KILN_VMM_IRQ
 * (irqfd, line, level) picks one; issue 21 compares them. */
enum { IRQ_MODE_IRQFD, IRQ_MODE_LINE, IRQ_MODE_LEVEL };

static int irq_mode_from_env(void)
{
	const char *m = getenv("KILN_VMM_IRQ");
	if (m && strcmp(m, "line") == 0)
		return IRQ_MODE_LINE;
	if (m && strcmp(m, "level") == 0)
		return IRQ_MODE_LEVEL;
	return IRQ_MODE_IRQFD;
}

bool virtio_irq_level(const struct virtio_dev *d)
{
	return d->irq_mode == IRQ_MODE_LEVEL;
}

/* A line the VMM could not set is an interrupt the guest never sees (a
 * queue that stalls for no visible reason): say so, once per device. */
static void set_line(struct virtio_dev *d, int level)
{
	if (kvm_irq_line(d->vm, d->gsi, level) < 0 && !d->irq_line_failed) {
		d->irq_line_failed = true;
		fprintf(stderr, "kiln-vmm: %s: %s (its interrupts may be lost)\n", d->ops->name, errmsg());
	}
}

static void raise_irq(struct virtio_dev *d)
{
	switch (d->irq_mode) {
	case IRQ_MODE_LINE:
		set_line(d, 1);
		set_line(d, 0);
		return;
	case IRQ_MODE_LEVEL:
		set_line(d, 1);
		return;
	default: {
		uint64_t one = 1;
		if (write(d->irq_fd, &one, sizeof one) < 0) {
			/* the eventfd counter cannot overflow in practice */
		}
	}
	}
}

/* The driver's acknowledgment (REG_INTERRUPT_ACK); a level line drops
 * with the last bit. A device thread may set a bit at the same time, so
 * both sides change isr atomically and the line is raised again when a
 * bit came back after the drop. */
static void ack_irq(struct virtio_dev *d, uint32_t v)
{
	uint32_t left = __atomic_and_fetch(&d->isr, ~v, __ATOMIC_SEQ_CST);
	if (d->irq_mode != IRQ_MODE_LEVEL || left)
		return;
	set_line(d, 0);
	if (__atomic_load_n(&d->isr, __ATOMIC_SEQ_CST))
		set_line(d, 1);
}

static void device_reset(struct virtio_dev *d)
{
	d->status = 0;
	d->dev_features_sel = d->drv_features_sel = d->queue_sel = 0;
	d->driver_features = 0;
	d->isr = 0;
	for (int i = 0; i < VIRTIO_MAX_QUEUES; i++)
		queue_reset(&d->q[i]);
	if (d->ops->reset)
		d->ops->reset(d);
}

static void needs_reset(struct virtio_dev *d, struct virtq *q, const char *why)
{
	if (q)
		q->broken = true;
	if (!(d->status & VIRTIO_STATUS_NEEDS_RESET))
		fprintf(stderr, "kiln-vmm: %s: %s; device needs reset\n", d->ops->name, why);
	d->status |= VIRTIO_STATUS_NEEDS_RESET;
	__atomic_fetch_or(&d->isr, INT_CONFIG, __ATOMIC_SEQ_CST);
	raise_irq(d);
}

/* queue_enable: validate the ring addresses the driver gave us and keep
 * host pointers to them. */
static bool queue_enable(struct virtio_dev *d, struct virtq *q)
{
	const struct guest_mem *m = &d->vm->mem;
	uint64_t n = q->num;
	if (n == 0 || n > d->ops->queue_max || (q->desc_gpa & 15) || (q->avail_gpa & 1) || (q->used_gpa & 3))
		return false;
	q->desc = gpa_ptr(m, q->desc_gpa, 16 * n);
	q->avail = gpa_ptr(m, q->avail_gpa, 6 + 2 * n);
	q->used = gpa_ptr(m, q->used_gpa, 6 + 8 * n);
	if (!q->desc || !q->avail || !q->used)
		return false;
	q->last_avail = 0;
	q->used_idx = 0;
	q->signalled_used = 0;
	q->broken = false;
	return true;
}

static uint32_t read_reg(struct virtio_dev *d, uint64_t off)
{
	struct virtq *q = d->queue_sel < VIRTIO_MAX_QUEUES ? &d->q[d->queue_sel] : NULL;
	bool valid_q = q && (int)d->queue_sel < d->ops->num_queues;
	switch (off) {
	case REG_MAGIC: return MMIO_MAGIC;
	case REG_VERSION: return 2;
	case REG_DEVICE_ID: return d->ops->device_id;
	case REG_VENDOR_ID: return VENDOR_KILN;
	case REG_DEVICE_FEATURES:
		if (d->dev_features_sel == 0)
			return (uint32_t)d->ops->features;
		if (d->dev_features_sel == 1)
			return (uint32_t)(d->ops->features >> 32);
		return 0;
	case REG_QUEUE_NUM_MAX: return valid_q ? d->ops->queue_max : 0;
	case REG_QUEUE_READY: return valid_q ? q->ready : 0;
	case REG_INTERRUPT_STATUS: return __atomic_load_n(&d->isr, __ATOMIC_SEQ_CST);
	case REG_STATUS: return d->status;
	case REG_CONFIG_GENERATION: return d->config_generation;
	default: return 0;
	}
}

static void write_status(struct virtio_dev *d, uint32_t v)
{
	if (v == 0) {
		device_reset(d);
		return;
	}
	if ((v & VIRTIO_STATUS_FEATURES_OK) && !(d->status & VIRTIO_STATUS_FEATURES_OK)) {
		/* Refuse features we did not offer, and legacy drivers. */
		if ((d->driver_features & ~d->ops->features) ||
		    !(d->driver_features & VIRTIO_F_VERSION_1))
			v &= ~(uint32_t)VIRTIO_STATUS_FEATURES_OK;
	}
	bool activate = (v & VIRTIO_STATUS_DRIVER_OK) && !(d->status & VIRTIO_STATUS_DRIVER_OK);
	d->status = v | (d->status & VIRTIO_STATUS_NEEDS_RESET);
	if (activate && d->ops->activate)
		d->ops->activate(d);
}

static void write_reg(struct virtio_dev *d, uint64_t off, uint32_t v)
{
	struct virtq *q = d->queue_sel < (uint32_t)d->ops->num_queues ? &d->q[d->queue_sel] : NULL;
	bool setup = !(d->status & VIRTIO_STATUS_DRIVER_OK);
	switch (off) {
	case REG_DEVICE_FEATURES_SEL: d->dev_features_sel = v; break;
	case REG_DRIVER_FEATURES_SEL: d->drv_features_sel = v; break;
	case REG_DRIVER_FEATURES:
		if (d->status & VIRTIO_STATUS_FEATURES_OK)
			break;
		if (d->drv_features_sel == 0)
			d->driver_features = (d->driver_features & ~0xffffffffULL) | v;
		else if (d->drv_features_sel == 1)
			d->driver_features = (d->driver_features & 0xffffffffULL) | ((uint64_t)v << 32);
		break;
	case REG_QUEUE_SEL: d->queue_sel = v; break;
	case REG_QUEUE_NUM:
		if (q && !q->ready)
			q->num = (uint16_t)(v <= d->ops->queue_max ? v : 0);
		break;
	case REG_QUEUE_READY:
		if (!q)
			break;
		if (v == 1 && !q->ready)
			q->ready = queue_enable(d, q);
		else if (v == 0)
			queue_reset(q);
		if (v == 1 && !q->ready)
			needs_reset(d, q, "queue set up with bad ring addresses or size");
		break;
	case REG_QUEUE_NOTIFY:
		/* Normally caught by the ioeventfd; this is the slow path. */
		if (v < (uint32_t)d->ops->num_queues && d->q[v].ready && d->ops->queue_notify)
			d->ops->queue_notify(d, (int)v);
		break;
	case REG_INTERRUPT_ACK: ack_irq(d, v); break;
	case REG_STATUS: write_status(d, v); break;
	case REG_QUEUE_DESC_LOW: if (q && !q->ready && setup) q->desc_gpa = (q->desc_gpa & ~0xffffffffULL) | v; break;
	case REG_QUEUE_DESC_HIGH: if (q && !q->ready && setup) q->desc_gpa = (q->desc_gpa & 0xffffffffULL) | ((uint64_t)v << 32); break;
	case REG_QUEUE_AVAIL_LOW: if (q && !q->ready && setup) q->avail_gpa = (q->avail_gpa & ~0xffffffffULL) | v; break;
	case REG_QUEUE_AVAIL_HIGH: if (q && !q->ready && setup) q->avail_gpa = (q->avail_gpa & 0xffffffffULL) | ((uint64_t)v << 32); break;
	case REG_QUEUE_USED_LOW: if (q && !q->ready && setup) q->used_gpa = (q->used_gpa & ~0xffffffffULL) | v; break;
	case REG_QUEUE_USED_HIGH: if (q && !q->ready && setup) q->used_gpa = (q->used_gpa & 0xffffffffULL) | ((uint64_t)v << 32); break;
	default: break;
	}
}

static void mmio_access(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	struct virtio_dev *d = opaque;
	if (off >= REG_CONFIG) {
		uint32_t coff = (uint32_t)(off - REG_CONFIG);
		if (is_write) {
			if (d->ops->config_write)
				d->ops->config_write(d, coff, data, len);
		} else {
			memset(data, 0, len);
			if (d->ops->config_read)
				d->ops->config_read(d, coff, data, len);
		}
		return;
	}
	if (len != 4 || (off & 3)) {          /* registers are 32-bit only */
		if (!is_write)
			memset(data, 0, len);
		return;
	}
	uint32_t v;
	if (is_write) {
		memcpy(&v, data, 4);
		write_reg(d, off, v);
	} else {
		v = read_reg(d, off);
		memcpy(data, &v, 4);
	}
}

static void kick(void *opaque, uint32_t events)
{
	(void)events;
	struct virtq *q = opaque;
	uint64_t n;
	if (read(q->kick_fd, &n, sizeof n) < 0)
		return;
	struct virtio_dev *d = q->dev;
	pthread_mutex_lock(&d->vm->dev_lock);
	if (q->ready && !q->broken && virtio_active(d) && d->ops->queue_notify)
		d->ops->queue_notify(d, q->index);
	pthread_mutex_unlock(&d->vm->dev_lock);
}

int virtio_mmio_add(struct vm *vm, const struct virtio_dev_ops *ops, void *priv,
		    struct virtio_dev **out)
{
	struct virtio_dev *d = NULL;
	bool full = vm->nvirtio == MAX_VIRTIO || GSI_VIRTIO_FIRST + vm->nvirtio > GSI_VIRTIO_LAST;
	if (full || !(d = calloc(1, sizeof *d))) {
		/* We own priv from here on, also when we fail. */
		if (ops->destroy)
			ops->destroy(&(struct virtio_dev){ .ops = ops, .priv = priv, .vm = vm });
		return full ? errf(ENOSPC, "too many virtio devices (at most %d)", MAX_VIRTIO)
			 : errf(ENOMEM, "out of memory");
	}
	d->ops = ops;
	d->priv = priv;
	d->vm = vm;
	d->base = VIRTIO_MMIO_BASE + (uint64_t)vm->nvirtio * VIRTIO_MMIO_SIZE;
	d->gsi = GSI_VIRTIO_FIRST + vm->nvirtio;
	d->irq_fd = -1;
	for (int i = 0; i < VIRTIO_MAX_QUEUES; i++) {
		d->q[i].kick_fd = -1;
		d->q[i].index = i;
		d->q[i].dev = d;
	}
	vm->virtio[vm->nvirtio++] = d;

	d->irq_mode = irq_mode_from_env();
	if (d->irq_mode == IRQ_MODE_IRQFD) {	/* the line modes need no eventfd */
		d->irq_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (d->irq_fd < 0)
			return errf_sys("eventfd");
		struct kvm_irqfd irqfd = { .fd = (uint32_t)d->irq_fd, .gsi = (uint32_t)d->gsi };
		if (ioctl(vm->vm_fd, KVM_IRQFD, &irqfd) < 0)
			return errf_sys("KVM_IRQFD for %s", ops->name);
	}

	for (int i = 0; i < ops->num_queues; i++) {
		struct virtq *q = &d->q[i];
		q->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (q->kick_fd < 0)
			return errf_sys("eventfd");
		struct kvm_ioeventfd io = {
			.datamatch = (uint64_t)i,
			.addr = d->base + REG_QUEUE_NOTIFY,
			.len = 4,
			.fd = q->kick_fd,
			.flags = KVM_IOEVENTFD_FLAG_DATAMATCH,
		};
		if (ioctl(vm->vm_fd, KVM_IOEVENTFD, &io) < 0)
			return errf_sys("KVM_IOEVENTFD for %s", ops->name);
		if (!ev_add(&vm->loop, EV_DEVICE, q->kick_fd, EPOLLIN, kick, q))
			return -1;
	}
	int rc = bus_add(&vm->mmio, d->base, VIRTIO_MMIO_SIZE, mmio_access, d);
	if (rc < 0)
		return rc;
	*out = d;
	return 0;
}

void virtio_mmio_destroy_all(struct vm *vm)
{
	for (int i = 0; i < vm->nvirtio; i++) {
		struct virtio_dev *d = vm->virtio[i];
		if (d->ops->destroy)
			d->ops->destroy(d);
		for (int k = 0; k < VIRTIO_MAX_QUEUES; k++)
			if (d->q[k].kick_fd >= 0)
				close(d->q[k].kick_fd);
		if (d->irq_fd >= 0)
			close(d->irq_fd);
		free(d);
	}
	vm->nvirtio = 0;
}

/* ---- snapshots ----------------------------------------------------------- */

struct transport_state {
	uint32_t device_id, status, dev_features_sel, drv_features_sel;
	uint32_t queue_sel, isr, config_generation, pad;
	uint64_t driver_features;
	struct {
		uint16_t num;
		uint8_t ready, broken;
		uint16_t last_avail, used_idx, signalled_used, pad;
		uint64_t desc, avail, used;
	} q[VIRTIO_MAX_QUEUES];
};

void virtio_mmio_save(struct virtio_dev *d, struct strbuf *out)
{
	struct transport_state st;
	memset(&st, 0, sizeof st);
	st.device_id = d->ops->device_id;
	st.status = d->status;
	st.dev_features_sel = d->dev_features_sel;
	st.drv_features_sel = d->drv_features_sel;
	st.queue_sel = d->queue_sel;
	st.isr = d->isr;
	st.config_generation = d->config_generation;
	st.driver_features = d->driver_features;
	for (int i = 0; i < VIRTIO_MAX_QUEUES; i++) {
		struct virtq *q = &d->q[i];
		st.q[i].num = q->num;
		st.q[i].ready = q->ready;
		st.q[i].broken = q->broken;
		st.q[i].last_avail = q->last_avail;
		st.q[i].used_idx = q->used_idx;
		st.q[i].signalled_used = q->signalled_used;
		st.q[i].desc = q->desc_gpa;
		st.q[i].avail = q->avail_gpa;
		st.q[i].used = q->used_gpa;
	}
	strbuf_append(out, &st, sizeof st);
}

int virtio_mmio_load(struct virtio_dev *d, struct snap_reader *r)
{
	struct transport_state st;
	if (!snap_read(r, &st, sizeof st))
		return errf(EINVAL, "snapshot state is damaged: virtio record");
	if (st.device_id != d->ops->device_id)
		return errf(EINVAL, "snapshot has virtio device type %u where this VM has %s",
			    st.device_id, d->ops->name);
	d->status = st.status;
	d->dev_features_sel = st.dev_features_sel;
	d->drv_features_sel = st.drv_features_sel;
	d->queue_sel = st.queue_sel;
	d->isr = st.isr;
	d->config_generation = st.config_generation;
	d->driver_features = st.driver_features & d->ops->features;
	for (int i = 0; i < VIRTIO_MAX_QUEUES; i++) {
		struct virtq *q = &d->q[i];
		queue_reset(q);
		q->num = st.q[i].num;
		q->desc_gpa = st.q[i].desc;
		q->avail_gpa = st.q[i].avail;
		q->used_gpa = st.q[i].used;
		if (!st.q[i].ready)
			continue;
		/* The same checks as when the driver first enabled the queue. */
		if (i >= d->ops->num_queues || !queue_enable(d, q))
			return errf(EINVAL, "snapshot has a bad %s queue %d", d->ops->name, i);
		q->ready = true;
		q->broken = st.q[i].broken;
		q->last_avail = st.q[i].last_avail;
		q->used_idx = st.q[i].used_idx;
		q->signalled_used = st.q[i].signalled_used;
	}
	return 0;
}

/* A kick or an interrupt in flight when the state was captured is lost
 * with the old VM: the kick sat in the old ioeventfd, the interrupt in
 * KVM's irqfd work queue. So every ready queue is looked at once as if
 * kicked, and an interrupt the guest has not acknowledged is raised again
 * (a spurious one costs the driver a look at its used rings). */
void virtio_mmio_restored(struct virtio_dev *d)
{
	if (!virtio_active(d))
		return;
	if (d->ops->restored)
		d->ops->restored(d);
	for (int i = 0; i < d->ops->num_queues; i++)
		if (d->q[i].ready && !d->q[i].broken && d->ops->queue_notify)
			d->ops->queue_notify(d, i);
	if (d->isr)
		raise_irq(d);
}

/* ---- split virtqueues ---------------------------------------------------- */

static inline uint16_t avail_idx(struct virtq *q)
{
	return __atomic_load_n(&q->avail[1], __ATOMIC_ACQUIRE);
}

static inline void set_avail_event(struct virtio_dev *d, struct virtq *q, uint16_t v)
{
	uint16_t *p = (uint16_t *)(q->used + 4 + 8 * (size_t)q->num);
	mem_mark_dirty(&d->vm->mem, p, 2);
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

bool virtq_has_avail(struct virtq *q)
{
	return q->ready && !q->broken && avail_idx(q) != q->last_avail;
}

uint16_t virtq_avail_idx(struct virtq *q)
{
	return avail_idx(q);
}

uint16_t virtq_kick_on_next(struct virtio_dev *d, struct virtq *q)
{
	uint16_t idx = avail_idx(q);
	if (d->driver_features & VIRTIO_RING_F_EVENT_IDX) {
		set_avail_event(d, q, idx);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
	return idx;
}

int virtq_pop(struct virtio_dev *d, struct virtq *q, struct virtq_chain *c)
{
	if (!q->ready || q->broken)
		return 0;
	uint16_t idx = avail_idx(q);
	if (idx == q->last_avail) {
		if (!(d->driver_features & VIRTIO_RING_F_EVENT_IDX))
			return 0;
		/* Ask to be kicked for the next buffer, then look once more:
		 * the driver may have added one before it saw our request. */
		set_avail_event(d, q, q->last_avail);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		idx = avail_idx(q);
		if (idx == q->last_avail)
			return 0;
	}
	if ((uint16_t)(idx - q->last_avail) > q->num) {
		needs_reset(d, q, "avail index ran past the queue size");
		return -1;
	}
	uint16_t head = q->avail[2 + q->last_avail % q->num];
	q->last_avail++;

	c->head = head;
	c->n_out = c->n_in = 0;
	c->out_len = c->in_len = 0;
	uint16_t i = head;
	for (int count = 0;; count++) {
		if (i >= q->num || count >= q->num || count >= VIRTQ_MAX_SEGS) {
			needs_reset(d, q, "descriptor chain is out of range, looped or too long");
			return -1;
		}
		struct virtq_desc desc;
		memcpy(&desc, &q->desc[i], sizeof desc);   /* one snapshot: no TOCTOU */
		if (desc.flags & VIRTQ_DESC_F_INDIRECT) {
			needs_reset(d, q, "indirect descriptor, which was not offered");
			return -1;
		}
		void *p = desc.len ? gpa_ptr(&d->vm->mem, desc.addr, desc.len) : d->vm->mem.host;
		if (!p) {
			needs_reset(d, q, "descriptor points outside guest memory");
			return -1;
		}
		if (desc.flags & VIRTQ_DESC_F_WRITE) {
			/* We may write all of it: count it dirty for diff snapshots. */
			mem_mark_dirty(&d->vm->mem, p, desc.len);
			c->in_len += desc.len;
			c->n_in++;
		} else {
			if (c->n_in) {
				needs_reset(d, q, "readable descriptor after a writable one");
				return -1;
			}
			c->out_len += desc.len;
			c->n_out++;
		}
		c->iov[count] = (struct iovec){ p, desc.len };
		if (!(desc.flags & VIRTQ_DESC_F_NEXT))
			break;
		i = desc.next;
	}
	return 1;
}

void virtq_push(struct virtio_dev *d, struct virtq *q, uint16_t head, uint32_t written)
{
	volatile uint8_t *elem = q->used + 4 + 8 * (size_t)(q->used_idx % q->num);
	mem_mark_dirty(&d->vm->mem, (const void *)q->used, 4);
	mem_mark_dirty(&d->vm->mem, (const void *)elem, 8);
	uint32_t id = head;
	memcpy((void *)elem, &id, 4);
	memcpy((void *)(elem + 4), &written, 4);
	q->used_idx++;
	__atomic_store_n((uint16_t *)(q->used + 2), q->used_idx, __ATOMIC_RELEASE);
}

void virtio_notify_queue(struct virtio_dev *d, struct virtq *q)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (d->driver_features & VIRTIO_RING_F_EVENT_IDX) {
		uint16_t event = q->avail[2 + q->num];
		uint16_t old = q->signalled_used, new = q->used_idx;
		q->signalled_used = new;
		/* vring_need_event(): did new pass the index the driver named? */
		if ((uint16_t)(new - event - 1) >= (uint16_t)(new - old))
			return;
	} else if (q->avail[0] & 1) {                     /* VIRTQ_AVAIL_F_NO_INTERRUPT */
		return;
	}
	__atomic_fetch_or(&d->isr, INT_USED_BUFFER, __ATOMIC_SEQ_CST);
	raise_irq(d);
}

void virtio_notify_config(struct virtio_dev *d)
{
	d->config_generation++;
	__atomic_fetch_or(&d->isr, INT_CONFIG, __ATOMIC_SEQ_CST);
	raise_irq(d);
}

/* iov_copy: copy between a flat buffer and an iovec array, starting skip
 * bytes into the iovecs. */
static size_t iov_copy(const struct iovec *iov, int n, size_t skip, void *buf, size_t len,
		       bool to_buf)
{
	size_t done = 0;
	for (int i = 0; i < n && done < len; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		size_t k = iov[i].iov_len - skip;
		if (k > len - done)
			k = len - done;
		uint8_t *v = (uint8_t *)iov[i].iov_base + skip;
		if (to_buf)
			memcpy((uint8_t *)buf + done, v, k);
		else
			memcpy(v, (const uint8_t *)buf + done, k);
		done += k;
		skip = 0;
	}
	return done;
}

size_t iov_to_buf(const struct iovec *iov, int n, size_t skip, void *buf, size_t len)
{
	return iov_copy(iov, n, skip, buf, len, true);
}

size_t buf_to_iov(const struct iovec *iov, int n, size_t skip, const void *buf, size_t len)
{
	return iov_copy(iov, n, skip, (void *)buf, len, false);
}

int iov_slice(const struct iovec *src, int n, size_t skip, size_t len, struct iovec *dst, int max)
{
	int k = 0;
	for (int i = 0; i < n && len; i++) {
		if (skip >= src[i].iov_len) {
			skip -= src[i].iov_len;
			continue;
		}
		if (k == max)
			return -1;
		size_t take = src[i].iov_len - skip;
		if (take > len)
			take = len;
		dst[k++] = (struct iovec){ (uint8_t *)src[i].iov_base + skip, take };
		len -= take;
		skip = 0;
	}
	return k;
}
