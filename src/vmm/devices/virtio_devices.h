/* The virtio devices kiln-vmm can attach, one file each. */
#ifndef KILN_VMM_VIRTIO_DEVICES_H
#define KILN_VMM_VIRTIO_DEVICES_H

#include <stdbool.h>
#include <stdint.h>

struct vm;

/* reserve: bytes its file system keeps free (disk growth fails below it). */
struct disk_config;
int virtio_blk_add(struct vm *vm, const struct disk_config *dc, int index, uint64_t reserve);
/* virtio_blk_disk: the disk behind a virtio-blk device, or NULL. */
struct virtio_dev;
struct disk *virtio_blk_disk(struct virtio_dev *d);
/* virtio_blk_resized: the device's capacity becomes its disk's size now
 * (a disk that grew: disk_fork_sized), and the driver is told with a
 * configuration change interrupt (Linux's virtio_blk re-reads it). */
int virtio_blk_resized(struct virtio_dev *d);
/* Volume slots (volume.h): a virtio-blk device with no backing and
 * capacity 0 until a volume is attached. index is its place among the
 * virtio-blk devices, *out the device. */
int virtio_blk_add_slot(struct vm *vm, int slot, int index, struct virtio_dev **out);
/* virtio_blk_attach: back an empty slot with fd (volume_check'ed, size
 * bytes) and tell the guest its new capacity; the slot owns fd then. */
int virtio_blk_attach(struct virtio_dev *d, int fd, uint64_t size, bool read_only);
/* virtio_blk_detach: capacity 0, flush and close the volume, tell the
 * guest. Returns the flush's result; the slot is empty either way. */
int virtio_blk_detach(struct virtio_dev *d);
/* virtio_blk_volume: a slot's volume (fd -1 when empty), NULL for a disk
 * or another device. */
struct volume;
const struct volume *virtio_blk_volume(struct virtio_dev *d);
int virtio_rng_add(struct vm *vm);
int virtio_net_add(struct vm *vm, const char *tap, const char *mac);
/* virtio_net_tap_open: open (creating if needed) the TAP called name; for
 * jails, which open it before they lose /dev/net/tun. */
int virtio_net_tap_open(const char *name);
int virtio_vsock_add(struct vm *vm, uint32_t guest_cid, const char *uds_path);

#endif
