/* The virtio devices kiln-vmm can attach, one file each. */
#ifndef KILN_VMM_VIRTIO_DEVICES_H
#define KILN_VMM_VIRTIO_DEVICES_H

#include <stdbool.h>
#include <stdint.h>

struct vm;

/* reserve: bytes its file system keeps free (disk growth fails below it). */
int virtio_blk_add(struct vm *vm, const char *path, bool read_only, int index, uint64_t reserve);
/* virtio_blk_disk: the disk behind a virtio-blk device, or NULL. */
struct virtio_dev;
struct disk *virtio_blk_disk(struct virtio_dev *d);
int virtio_rng_add(struct vm *vm);
int virtio_net_add(struct vm *vm, const char *tap, const char *mac);
/* virtio_net_tap_open: open (creating if needed) the TAP called name; for
 * jails, which open it before they lose /dev/net/tun. */
int virtio_net_tap_open(const char *name);
int virtio_vsock_add(struct vm *vm, uint32_t guest_cid, const char *uds_path);

#endif
