/*
 * virtio_mmio: the virtio-mmio (version 2) transport and split virtqueues.
 *
 * Each device owns one 4 KiB MMIO slot and one GSI. The guest's queue
 * notifications arrive as ioeventfds (KVM signals an eventfd instead of
 * exiting to a vCPU thread), so queue work runs in the main event loop;
 * interrupts go out through an irqfd. Only register accesses (feature
 * negotiation, queue setup, config space) are handled on vCPU threads.
 *
 * Everything in a virtqueue comes from the guest and is checked: ring
 * addresses against guest memory at QueueReady, descriptor indices against
 * the queue size, chain lengths against a hard limit, and each buffer
 * against guest memory before it is touched.
 */
#ifndef KILN_VMM_VIRTIO_MMIO_H
#define KILN_VMM_VIRTIO_MMIO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

struct vm;
struct virtio_dev;

#define VIRTIO_MAX_QUEUES 4
#define VIRTQ_MAX_SEGS    256

#define VIRTIO_F_VERSION_1        (1ULL << 32)
#define VIRTIO_RING_F_EVENT_IDX   (1ULL << 29)

#define VIRTIO_STATUS_ACKNOWLEDGE 1
#define VIRTIO_STATUS_DRIVER      2
#define VIRTIO_STATUS_DRIVER_OK   4
#define VIRTIO_STATUS_FEATURES_OK 8
#define VIRTIO_STATUS_NEEDS_RESET 64
#define VIRTIO_STATUS_FAILED      128

struct virtq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};
#define VIRTQ_DESC_F_NEXT  1
#define VIRTQ_DESC_F_WRITE 2
#define VIRTQ_DESC_F_INDIRECT 4

struct virtq {
	uint16_t num;              /* size the driver chose */
	bool ready;
	uint64_t desc_gpa, avail_gpa, used_gpa;
	/* Host views of the rings, validated when the queue became ready. */
	struct virtq_desc *desc;
	volatile uint16_t *avail;  /* flags, idx, ring[num], used_event */
	volatile uint8_t *used;    /* flags, idx, ring[num] {id, len}, avail_event */
	uint16_t last_avail;       /* next avail entry we will take */
	uint16_t used_idx;         /* next used entry we will fill */
	uint16_t signalled_used;   /* used_idx when we last considered an interrupt */
	int kick_fd;               /* ioeventfd */
	int index;
	struct virtio_dev *dev;
	bool broken;               /* the driver handed us a bad chain */
};

/* A descriptor chain: device-readable buffers first (out), then
 * device-writable ones (in), each already translated to host memory. */
struct virtq_chain {
	uint16_t head;
	int n_out, n_in;
	uint64_t out_len, in_len;
	struct iovec iov[VIRTQ_MAX_SEGS];
};

struct virtio_dev_ops {
	const char *name;
	uint32_t device_id;
	int num_queues;
	uint16_t queue_max;
	uint64_t features;
	/* Device config space (offset from 0x100), under dev_lock. */
	void (*config_read)(struct virtio_dev *d, uint32_t off, uint8_t *data, uint32_t len);
	void (*config_write)(struct virtio_dev *d, uint32_t off, const uint8_t *data, uint32_t len);
	/* A queue was kicked (main thread, under dev_lock). */
	void (*queue_notify)(struct virtio_dev *d, int q);
	/* The driver finished setting up (DRIVER_OK). */
	void (*activate)(struct virtio_dev *d);
	/* The driver reset the device. */
	void (*reset)(struct virtio_dev *d);
	/* The VMM is exiting. */
	void (*destroy)(struct virtio_dev *d);
	/* State was just restored from a snapshot (main thread, before the
	 * vCPUs run): resume I/O, tell the guest what changed. */
	void (*restored)(struct virtio_dev *d);
	/* Make completed writes durable (snapshots, forks). 0 or -errno. */
	int (*flush)(struct virtio_dev *d);
};

struct virtio_dev {
	const struct virtio_dev_ops *ops;
	void *priv;
	struct vm *vm;
	uint64_t base;
	int gsi;
	int irq_fd;
	int irq_mode;	/* see virtio_mmio.c */
	bool irq_line_failed;	/* KVM_IRQ_LINE failed once (logged) */
	uint32_t status;
	uint32_t dev_features_sel, drv_features_sel, queue_sel;
	uint64_t driver_features;
	uint32_t isr;
	uint32_t config_generation;
	struct virtq q[VIRTIO_MAX_QUEUES];
};

/* virtio_mmio_add: give a device its MMIO slot, GSI, ioeventfds and irqfd.
 * The device list owns priv from then on, also on failure: ops->destroy
 * frees it. */
int virtio_mmio_add(struct vm *vm, const struct virtio_dev_ops *ops, void *priv,
		    struct virtio_dev **out);
void virtio_mmio_destroy_all(struct vm *vm);
/* Whether the device's interrupt is level-triggered (the ACPI tables say so). */
bool virtio_irq_level(const struct virtio_dev *d);

/* Snapshot support: the transport and queue state (device specifics are
 * rebuilt from the new configuration). */
struct strbuf;
struct snap_reader;
void virtio_mmio_save(struct virtio_dev *d, struct strbuf *out);
int virtio_mmio_load(struct virtio_dev *d, struct snap_reader *r);
void virtio_mmio_restored(struct virtio_dev *d);

/* virtq_pop: take the next available chain. Returns 1 with *c filled, 0 if
 * the queue is empty, or -1 if the chain is malformed (the device is then
 * marked NEEDS_RESET and the queue stops). */
int virtq_pop(struct virtio_dev *d, struct virtq *q, struct virtq_chain *c);
/* virtq_push: return a chain with `written` bytes written into it. */
void virtq_push(struct virtio_dev *d, struct virtq *q, uint16_t head, uint32_t written);
/* virtq_has_avail: whether the driver has made buffers available. */
bool virtq_has_avail(struct virtq *q);

/* virtq_kick_on_next: ask the driver (with EVENT_IDX) to notify us when
 * it adds a buffer beyond those already available. Returns the driver's
 * avail index now: a later one says it has added a buffer since. */
uint16_t virtq_kick_on_next(struct virtio_dev *d, struct virtq *q);
uint16_t virtq_avail_idx(struct virtq *q);
/* virtio_notify_queue: interrupt the guest for used buffers, unless the
 * driver suppressed it. */
void virtio_notify_queue(struct virtio_dev *d, struct virtq *q);
void virtio_notify_config(struct virtio_dev *d);
static inline bool virtio_active(const struct virtio_dev *d)
{
	return (d->status & VIRTIO_STATUS_DRIVER_OK) && !(d->status & VIRTIO_STATUS_NEEDS_RESET);
}

/* Copy helpers over a chain's iovecs. */
size_t iov_to_buf(const struct iovec *iov, int n, size_t skip, void *buf, size_t len);
size_t buf_to_iov(const struct iovec *iov, int n, size_t skip, const void *buf, size_t len);
/* iov_slice: the part [skip, skip+len) of an iovec array into dst (at most
 * max entries); returns the count, or -1 if dst is too small. */
int iov_slice(const struct iovec *src, int n, size_t skip, size_t len, struct iovec *dst, int max);

#endif
