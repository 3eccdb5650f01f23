/*
 * disk: the storage behind a virtio-blk device: a raw image, or a chain of
 * copy-on-write overlays over one (overlay.h). Forking a VM forks its disks
 * here: the current top is sealed and each side gets a new overlay on it.
 */
#ifndef KILN_VMM_DISK_H
#define KILN_VMM_DISK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "vmm/overlay.h"

struct disk {
	struct chain chain;
	uint64_t size;          /* bytes, a multiple of 512 */
	bool read_only;
	char path[4096];        /* the top layer */
};

int disk_open(struct disk *d, const char *path, bool read_only);
/* disk_open_over: the same over layers from of an open chain below
 * (overlay.h chain_open_over): a forked VM's disk. */
int disk_open_over(struct disk *d, const char *path, bool read_only, const struct chain *below,
		   int from);
void disk_close(struct disk *d);
/* Both return bytes transferred or -errno; the range is checked. */
int64_t disk_readv(struct disk *d, const struct iovec *iov, int n, uint64_t off);
int64_t disk_writev(struct disk *d, const struct iovec *iov, int n, uint64_t off);
int disk_flush(struct disk *d);

/* disk_fork: give each child (child_paths[i], to be created) and the disk
 * itself (parent_new, to be created; the disk switches to it) a
 * copy-on-write view of this disk as it is now. A read-only disk is shared
 * as it is (children get its path in child_paths_out). */
int disk_fork(struct disk *d, const char *parent_new, const char *const *child_paths, int n);
/* disk_fork_next: disk_fork with the disk's new top named by
 * overlay_fork_name (pid, from n0): the name a live fork gives it. */
int disk_fork_next(struct disk *d, int pid, unsigned n0, const char *const *child_paths, int n);
/* disk_fork_sized: the same, the disk's own new top (parent_new)
 * describing a disk of size bytes (0: as it is; else a multiple of 512,
 * no smaller: -EINVAL) whose part past the old size reads as zeros. The
 * children keep the old size. How a disk grows (kiln-vmm's "layer" with
 * "size"): the old top's map cannot grow in place. */
int disk_fork_sized(struct disk *d, const char *parent_new, const char *const *child_paths, int n,
		    uint64_t size);

#endif
