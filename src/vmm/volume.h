/*
 * volume: the file behind a volume slot, a virtio-blk device that exists
 * from boot with no backing (capacity 0) and takes a volume at run time.
 *
 * Sandboxes are restored from snapshots, so a guest cannot be given a new
 * device after it booted; it gets empty slots instead, and root attaches a
 * named volume to one (ctl "volume_attach", or --volume SLOT:FD at start).
 *
 * Trust: the VMM may be hostile, so it never opens a volume by path: root
 * opens the file and hands over the descriptor (SCM_RIGHTS, or inherited).
 * What the guest sends is bounded against the attached size here; a slot
 * with nothing attached answers every read and write with an error.
 *
 * A volume is a raw image written in place with pwrite (no overlay): a
 * guest's flush is an fdatasync of the file, so what the guest fsync'ed
 * survives the VMM being killed.
 */
#ifndef KILN_VMM_VOLUME_H
#define KILN_VMM_VOLUME_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#define VOLUME_SLOTS_MAX  4
/* The largest volume: far above any real one, and small enough that no
 * sector arithmetic on it can overflow. */
#define VOLUME_MAX_BYTES  (1ULL << 44)     /* 16 TiB */

struct volume {
	int fd;                 /* -1: the slot is empty */
	uint64_t size;          /* bytes, a multiple of 512; 0 when empty */
	bool read_only;
};

/* volume_check: whether fd can back a volume in slot: a regular file whose
 * size is a non-zero multiple of 512 up to VOLUME_MAX_BYTES, open for
 * writing unless read_only. *size gets its size. 0, or -errno with a
 * message naming the slot. */
int volume_check(int fd, bool read_only, int slot, uint64_t *size);

/* Both return the bytes transferred, or -errno: -EIO for an empty slot or
 * a range outside the volume, -EROFS for a write to a read-only one. */
int64_t volume_readv(const struct volume *v, const struct iovec *iov, int n, uint64_t off);
int64_t volume_writev(const struct volume *v, const struct iovec *iov, int n, uint64_t off);
/* volume_flush: fdatasync (nothing to do for an empty or read-only slot). */
int volume_flush(const struct volume *v);
/* volume_close: flush, close, and leave the slot empty. Returns the
 * flush's result (the descriptor is closed either way). */
int volume_close(struct volume *v);

/* The control commands (ctl.c's table): volume_attach, volume_detach. */
struct vm;
struct json;
struct strbuf;
int cmd_volume_attach(struct vm *vm, const struct json *req, struct strbuf *r);
int cmd_volume_detach(struct vm *vm, const struct json *req, struct strbuf *r);
/* volume_status: the slots as JSON members for "status"
 * (,"volume_slots":[{"slot":0,"attached":true,"size":N,"read_only":false}...]). */
void volume_status(struct vm *vm, struct strbuf *r);

#endif
