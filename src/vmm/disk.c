#include "vmm/disk.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int disk_open(struct disk *d, const char *path, bool read_only)
{
	memset(d, 0, sizeof *d);
	d->fd = -1;
	snprintf(d->path, sizeof d->path, "%s", path);
	int fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("disk %s", path);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return errf_sys("disk %s", path);
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		close(fd);
		return errf(EINVAL, "disk %s is not a regular file or block device", path);
	}
	uint64_t size = (uint64_t)st.st_size;
	if (S_ISBLK(st.st_mode)) {
		off_t end = lseek(fd, 0, SEEK_END);
		size = end > 0 ? (uint64_t)end : 0;
	}
	if (size < 512) {
		close(fd);
		return errf(EINVAL, "disk %s is smaller than one 512-byte sector", path);
	}
	d->fd = fd;
	d->size = size & ~511ULL;
	d->read_only = read_only;
	return 0;
}

void disk_close(struct disk *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

static int64_t transfer(struct disk *d, const struct iovec *iov, int n, uint64_t off, bool write)
{
	uint64_t len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	if (off > d->size || len > d->size - off)
		return -ERANGE;
	if (write && d->read_only)
		return -EROFS;
	uint64_t done = 0;
	struct iovec local[256];
	if (n > 256)
		return -EINVAL;
	memcpy(local, iov, (size_t)n * sizeof *iov);
	struct iovec *v = local;
	while (done < len) {
		ssize_t r = write ? pwritev(d->fd, v, n, (off_t)(off + done))
				  : preadv(d->fd, v, n, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0) {
			if (write)
				return -EIO;
			/* reading past the end of a sparse short file: zeros */
			for (int i = 0; i < n; i++)
				memset(v[i].iov_base, 0, v[i].iov_len);
			break;
		}
		done += (uint64_t)r;
		/* Advance the iovec past what was transferred. */
		size_t k = (size_t)r;
		while (n && k >= v->iov_len) {
			k -= v->iov_len;
			v++;
			n--;
		}
		if (n) {
			v->iov_base = (uint8_t *)v->iov_base + k;
			v->iov_len -= k;
		}
	}
	return (int64_t)len;
}

int64_t disk_readv(struct disk *d, const struct iovec *iov, int n, uint64_t off)
{
	return transfer(d, iov, n, off, false);
}

int64_t disk_writev(struct disk *d, const struct iovec *iov, int n, uint64_t off)
{
	return transfer(d, iov, n, off, true);
}

int disk_flush(struct disk *d)
{
	if (d->read_only)
		return 0;
	return fdatasync(d->fd) < 0 ? -errno : 0;
}
