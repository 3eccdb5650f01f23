/*
 * virtio-blk (virtio 1.2 §5.2): one request queue over a disk. Requests
 * are served synchronously on the main thread; each is a header (type,
 * sector), data buffers, and a status byte the device writes last.
 *
 * A device is backed by a disk (disk.h), or is a volume slot (volume.h):
 * no backing until a volume is attached, then that file. A slot's
 * capacity changes at run time; the guest learns it through a
 * configuration change interrupt (virtio 1.2 §4.2.2: InterruptStatus bit
 * 1), after which Linux's virtio_blk re-reads the capacity.
 *
 * A disk's capacity changes the same way when it grows (virtio_blk_resized,
 * after disk_fork_sized: kiln-vmm's "layer" with "size").
 *
 * A slot never offers VIRTIO_BLK_F_RO: features are settled once, when
 * the driver binds, and a slot is read-only or not per attach. A
 * read-only volume is enforced here instead: every write answers IOERR.
 */
#include "vmm/devices/virtio_devices.h"
#include "vmm/devices/virtio_mmio.h"
#include "vmm/disk.h"
#include "vmm/volume.h"
#include "vmm/vmm.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VIRTIO_ID_BLOCK 2
#define VIRTIO_BLK_F_SEG_MAX  (1ULL << 2)
#define VIRTIO_BLK_F_RO       (1ULL << 5)
#define VIRTIO_BLK_F_BLK_SIZE (1ULL << 6)
#define VIRTIO_BLK_F_FLUSH    (1ULL << 9)

#define VIRTIO_BLK_T_IN     0
#define VIRTIO_BLK_T_OUT    1
#define VIRTIO_BLK_T_FLUSH  4
#define VIRTIO_BLK_T_GET_ID 8

#define VIRTIO_BLK_S_OK     0
#define VIRTIO_BLK_S_IOERR  1
#define VIRTIO_BLK_S_UNSUPP 2

#define QUEUE_SIZE 256
#define SEG_MAX    (VIRTQ_MAX_SEGS - 2)

struct blk_req_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};

struct blk {
	struct disk disk;       /* a disk's backing (unused by a slot) */
	int index;
	int slot;               /* a volume slot's number, or -1 for a disk */
	struct volume vol;      /* a slot's volume (fd -1: none attached) */
	struct virtio_dev_ops ops;
	uint8_t config[24];
};

static uint8_t serve(struct blk *b, struct virtq_chain *c, uint32_t *written)
{
	struct blk_req_hdr h;
	*written = 0;
	if (c->in_len < 1 || iov_to_buf(c->iov, c->n_out, 0, &h, sizeof h) != sizeof h)
		return VIRTIO_BLK_S_IOERR;
	struct iovec data[VIRTQ_MAX_SEGS];
	const struct iovec *in = c->iov + c->n_out;
	uint64_t data_in = c->in_len - 1;              /* the last byte is status */
	int64_t r;
	int n;

	switch (h.type) {
	case VIRTIO_BLK_T_IN:
		n = iov_slice(in, c->n_in, 0, data_in, data, VIRTQ_MAX_SEGS);
		if (n < 0 || h.sector > UINT64_MAX / 512)
			return VIRTIO_BLK_S_IOERR;
		r = b->slot >= 0 ? volume_readv(&b->vol, data, n, h.sector * 512)
				 : disk_readv(&b->disk, data, n, h.sector * 512);
		if (r < 0)
			return VIRTIO_BLK_S_IOERR;
		*written = (uint32_t)r;
		return VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_OUT:
		n = iov_slice(c->iov, c->n_out, sizeof h, c->out_len - sizeof h, data, VIRTQ_MAX_SEGS);
		if (n < 0 || h.sector > UINT64_MAX / 512)
			return VIRTIO_BLK_S_IOERR;
		r = b->slot >= 0 ? volume_writev(&b->vol, data, n, h.sector * 512)
				 : disk_writev(&b->disk, data, n, h.sector * 512);
		return r < 0 ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_FLUSH:
		/* For a volume, the guest's fsync becomes the file's fdatasync. */
		r = b->slot >= 0 ? volume_flush(&b->vol) : disk_flush(&b->disk);
		return r < 0 ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_GET_ID: {
		char id[20] = { 0 };
		if (b->slot >= 0)
			snprintf(id, sizeof id, "kiln-vol-%d", b->slot);
		else
			snprintf(id, sizeof id, "kiln-disk-%d", b->index);
		*written = (uint32_t)buf_to_iov(in, c->n_in, 0, id, data_in < 20 ? data_in : 20);
		return VIRTIO_BLK_S_OK;
	}
	default:
		return VIRTIO_BLK_S_UNSUPP;
	}
}

static void blk_notify(struct virtio_dev *d, int qi)
{
	struct blk *b = d->priv;
	struct virtq *q = &d->q[qi];
	struct virtq_chain c;
	bool any = false;
	while (virtq_pop(d, q, &c) == 1) {
		uint32_t written;
		uint8_t status = serve(b, &c, &written);
		/* The status byte is the last writable byte of the chain. */
		if (c.in_len)
			buf_to_iov(c.iov + c.n_out, c.n_in, c.in_len - 1, &status, 1);
		virtq_push(d, q, c.head, written + (c.in_len ? 1 : 0));
		any = true;
	}
	if (any)
		virtio_notify_queue(d, q);
}

static void blk_config_read(struct virtio_dev *d, uint32_t off, uint8_t *data, uint32_t len)
{
	struct blk *b = d->priv;
	if (off < sizeof b->config && len <= sizeof b->config - off)
		memcpy(data, b->config + off, len);
}

static int blk_flush(struct virtio_dev *d)
{
	struct blk *b = d->priv;
	return b->slot >= 0 ? volume_flush(&b->vol) : disk_flush(&b->disk);
}

static void blk_destroy(struct virtio_dev *d)
{
	struct blk *b = d->priv;
	if (b->slot >= 0)
		volume_close(&b->vol);
	else
		disk_close(&b->disk);
	free(b);
}

struct disk *virtio_blk_disk(struct virtio_dev *d)
{
	if (d->ops->device_id != VIRTIO_ID_BLOCK)
		return NULL;
	struct blk *b = d->priv;
	return b->slot < 0 ? &b->disk : NULL;
}

const struct volume *virtio_blk_volume(struct virtio_dev *d)
{
	if (d->ops->device_id != VIRTIO_ID_BLOCK)
		return NULL;
	struct blk *b = d->priv;
	return b->slot >= 0 ? &b->vol : NULL;
}

static void set_capacity(struct blk *b, uint64_t bytes)
{
	uint64_t sectors = bytes / 512;
	memcpy(b->config + 0, &sectors, 8);
}

/* capacity_changed: a new ConfigGeneration, and the configuration change
 * interrupt if a driver is there to take it (one that binds later reads
 * the capacity as it probes). */
static void capacity_changed(struct virtio_dev *d)
{
	if (virtio_active(d))
		virtio_notify_config(d);
	else
		d->config_generation++;
}

int virtio_blk_resized(struct virtio_dev *d)
{
	if (d->ops->device_id != VIRTIO_ID_BLOCK)
		return errf(EINVAL, "virtio_blk_resized: not a virtio-blk device");
	struct blk *b = d->priv;
	if (b->slot >= 0)
		return errf(EINVAL, "virtio_blk_resized: a volume slot (attach sets its size)");
	pthread_mutex_lock(&d->vm->dev_lock);
	set_capacity(b, b->disk.size);
	capacity_changed(d);
	pthread_mutex_unlock(&d->vm->dev_lock);
	return 0;
}

int virtio_blk_attach(struct virtio_dev *d, int fd, uint64_t size, bool read_only)
{
	struct blk *b = d->priv;
	if (b->slot < 0 || b->vol.fd >= 0 || size == 0 || size % 512 || size > VOLUME_MAX_BYTES)
		return errf(EINVAL, "virtio_blk_attach: not an empty slot or a bad size");
	pthread_mutex_lock(&d->vm->dev_lock);
	b->vol = (struct volume){ .fd = fd, .size = size, .read_only = read_only };
	set_capacity(b, size);
	capacity_changed(d);
	pthread_mutex_unlock(&d->vm->dev_lock);
	return 0;
}

int virtio_blk_detach(struct virtio_dev *d)
{
	struct blk *b = d->priv;
	pthread_mutex_lock(&d->vm->dev_lock);
	/* Capacity 0 first: requests the guest sends from now on fail. */
	set_capacity(b, 0);
	int rc = volume_close(&b->vol);
	capacity_changed(d);
	pthread_mutex_unlock(&d->vm->dev_lock);
	return rc;
}

/* blk_register: the ops and config space, then the transport, which owns
 * b from here on (also on failure). */
static int blk_register(struct vm *vm, struct blk *b, bool read_only, uint64_t size,
			struct virtio_dev **out)
{
	b->ops = (struct virtio_dev_ops){
		.name = "virtio-blk",
		.device_id = VIRTIO_ID_BLOCK,
		.num_queues = 1,
		.queue_max = QUEUE_SIZE,
		.features = VIRTIO_F_VERSION_1 | VIRTIO_RING_F_EVENT_IDX | VIRTIO_BLK_F_SEG_MAX |
			    VIRTIO_BLK_F_BLK_SIZE | VIRTIO_BLK_F_FLUSH | (read_only ? VIRTIO_BLK_F_RO : 0),
		.config_read = blk_config_read,
		.queue_notify = blk_notify,
		.destroy = blk_destroy,
		.flush = blk_flush,
	};
	uint32_t seg_max = SEG_MAX, blk_size = 512;
	set_capacity(b, size);
	memcpy(b->config + 12, &seg_max, 4);
	memcpy(b->config + 20, &blk_size, 4);
	struct virtio_dev *d;
	return virtio_mmio_add(vm, &b->ops, b, out ? out : &d);
}

int virtio_blk_add(struct vm *vm, const struct disk_config *dc, int index, uint64_t reserve)
{
	bool read_only = dc->read_only;
	struct blk *b = calloc(1, sizeof *b);
	if (!b)
		return errf(ENOMEM, "out of memory");
	int rc = disk_open_over(&b->disk, dc->path, read_only, dc->below, dc->below_from);
	if (rc < 0) {
		free(b);
		return rc;
	}
	b->index = index;
	b->slot = -1;
	b->disk.chain.reserve = reserve;
	return blk_register(vm, b, read_only, b->disk.size, NULL);
}

int virtio_blk_add_slot(struct vm *vm, int slot, int index, struct virtio_dev **out)
{
	struct blk *b = calloc(1, sizeof *b);
	if (!b)
		return errf(ENOMEM, "out of memory");
	b->index = index;
	b->slot = slot;
	b->vol.fd = -1;
	return blk_register(vm, b, false, 0, out);
}
