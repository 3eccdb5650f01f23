/*
 * virtio-rng (virtio 1.2 §5.4): fills the guest's buffers from the host
 * kernel's CSPRNG. The guest kernel feeds it to its own pool (hw_random).
 */
#include "vmm/devices/virtio_devices.h"
#include "vmm/devices/virtio_mmio.h"
#include "vmm/vmm.h"

#include <sys/random.h>

#define VIRTIO_ID_RNG 4
#define MAX_REQUEST (64 * 1024)

static void rng_notify(struct virtio_dev *d, int qi)
{
	struct virtq *q = &d->q[qi];
	struct virtq_chain c;
	bool any = false;
	while (virtq_pop(d, q, &c) == 1) {
		uint32_t written = 0;
		for (int i = c.n_out; i < c.n_out + c.n_in && written < MAX_REQUEST; i++) {
			size_t want = c.iov[i].iov_len;
			if (want > MAX_REQUEST - written)
				want = MAX_REQUEST - written;
			ssize_t n = getrandom(c.iov[i].iov_base, want, 0);
			if (n <= 0)
				break;
			written += (uint32_t)n;
			if ((size_t)n < want)
				break;
		}
		virtq_push(d, q, c.head, written);
		any = true;
	}
	if (any)
		virtio_notify_queue(d, q);
}

static const struct virtio_dev_ops rng_ops = {
	.name = "virtio-rng",
	.device_id = VIRTIO_ID_RNG,
	.num_queues = 1,
	.queue_max = 64,
	.features = VIRTIO_F_VERSION_1 | VIRTIO_RING_F_EVENT_IDX,
	.queue_notify = rng_notify,
};

int virtio_rng_add(struct vm *vm)
{
	struct virtio_dev *d;
	return virtio_mmio_add(vm, &rng_ops, NULL, &d);
}
