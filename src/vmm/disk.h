/*
 * disk: the storage behind a virtio-blk device. Today a raw image file;
 * the copy-on-write overlay format plugs in behind the same calls.
 */
#ifndef KILN_VMM_DISK_H
#define KILN_VMM_DISK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

struct disk {
	int fd;
	uint64_t size;          /* bytes, a multiple of 512 */
	bool read_only;
	char path[256];
};

int disk_open(struct disk *d, const char *path, bool read_only);
void disk_close(struct disk *d);
/* Both return bytes transferred or -errno; the range is checked. */
int64_t disk_readv(struct disk *d, const struct iovec *iov, int n, uint64_t off);
int64_t disk_writev(struct disk *d, const struct iovec *iov, int n, uint64_t off);
int disk_flush(struct disk *d);

#endif
