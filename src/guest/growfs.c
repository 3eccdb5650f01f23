/*
 * grow-fs DIR: grow the ext4 filesystem mounted at DIR, online, to the
 * whole of its block device (a template build's root, whose disk the
 * host made larger than the image: docs/templates.md "Disk size"). The
 * kernel does the work (EXT4_IOC_RESIZE_FS, what resize2fs does for a
 * mounted filesystem), so no e2fsprogs is needed in the image. A device
 * no larger than the filesystem is left as it is. Prints the size in
 * blocks before and after: "grow-fs: 12800 -> 131072 blocks of 4096".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "guest/builtin.h"

#ifndef EXT4_SUPER_MAGIC
#define EXT4_SUPER_MAGIC 0xEF53
#endif
#ifndef EXT4_IOC_RESIZE_FS
#define EXT4_IOC_RESIZE_FS _IOW('f', 16, uint64_t)
#endif

int builtin_grow_fs(int argc, char *const *argv)
{
	if (argc != 2)
		return builtin_fail(EINVAL, "usage: grow-fs DIR");
	int fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return builtin_fail(errno, "%s: %s", argv[1], strerror(errno));
	struct statfs sf;
	struct stat st;
	if (fstatfs(fd, &sf) < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return builtin_fail(e, "%s: %s", argv[1], strerror(e));
	}
	if (sf.f_type != EXT4_SUPER_MAGIC) {
		close(fd);
		return builtin_fail(EINVAL, "%s: not an ext4 filesystem", argv[1]);
	}
	/* The device's size: /sys/dev/block/MAJ:MIN/size, in 512-byte sectors. */
	char path[64];
	snprintf(path, sizeof path, "/sys/dev/block/%u:%u/size", major(st.st_dev), minor(st.st_dev));
	FILE *f = fopen(path, "re");
	unsigned long long sectors = 0;
	int got = f ? fscanf(f, "%llu", &sectors) : 0;
	if (f)
		fclose(f);
	if (got != 1 || sectors == 0) {
		close(fd);
		return builtin_fail(ENODEV, "%s: the size of its device (%s) is unknown", argv[1], path);
	}
	uint64_t bsize = (uint64_t)sf.f_bsize;
	/* f_blocks leaves out the metadata; the superblock's count is what
	 * the ioctl compares with, and it refuses a shrink (EINVAL) itself. */
	uint64_t want = sectors * 512 / bsize;
	if (want <= (uint64_t)sf.f_blocks) {
		dprintf(1, "grow-fs: %" PRIu64 " blocks of %" PRIu64 ": the device is no larger\n", want, bsize);
		close(fd);
		return 0;
	}
	if (ioctl(fd, EXT4_IOC_RESIZE_FS, &want) < 0) {
		int e = errno;
		close(fd);
		return builtin_fail(e, "%s: growing to %" PRIu64 " blocks of %" PRIu64 ": %s", argv[1], want, bsize,
				    strerror(e));
	}
	struct statfs after;
	if (fstatfs(fd, &after) < 0)
		after = sf;
	close(fd);
	dprintf(1, "grow-fs: %" PRIu64 " -> %" PRIu64 " blocks of %" PRIu64 "\n", (uint64_t)sf.f_blocks,
	       (uint64_t)after.f_blocks, bsize);
	return 0;
}
