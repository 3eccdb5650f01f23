/*
 * volume: checks and I/O on a volume slot's file (see volume.h).
 */
#include "vmm/volume.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int volume_check(int fd, bool read_only, int slot, uint64_t *size)
{
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return errf(EBADF, "slot %d: the volume's descriptor is not open", slot);
	if (!S_ISREG(st.st_mode))
		return errf(EINVAL, "slot %d: a volume must be a regular file (the descriptor is %s)", slot,
			    S_ISDIR(st.st_mode) ? "a directory" : S_ISBLK(st.st_mode) ? "a block device" :
			    "not a regular file");
	if (st.st_size <= 0 || st.st_size % 512 || (uint64_t)st.st_size > VOLUME_MAX_BYTES)
		return errf(EINVAL, "slot %d: a volume's size must be a non-zero multiple of 512 bytes up "
			    "to 16 TiB, not %lld", slot, (long long)st.st_size);
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return errf_sys("slot %d: the volume's descriptor", slot);
	if ((fl & O_PATH) == O_PATH)
		return errf(EINVAL, "slot %d: the volume's descriptor is an O_PATH one", slot);
	if (!read_only && (fl & O_ACCMODE) != O_RDWR)
		return errf(EACCES, "slot %d: a read-write volume needs a descriptor open for reading "
			    "and writing (O_RDWR)", slot);
	if (read_only && (fl & O_ACCMODE) == O_WRONLY)
		return errf(EACCES, "slot %d: the volume's descriptor is not open for reading", slot);
	*size = (uint64_t)st.st_size;
	return 0;
}

/* The most segments one request may have (Linux's UIO_MAXIOV; a
 * virtio-blk chain has at most 256). */
#define MAX_SEGS 1024

/* in_range: whether [off, off+len) lies in the volume. */
static bool in_range(const struct volume *v, uint64_t off, uint64_t len)
{
	return v->fd >= 0 && off <= v->size && len <= v->size - off;
}

static uint64_t iov_total(const struct iovec *iov, int n)
{
	uint64_t t = 0;
	for (int i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

/* transfer: preadv/pwritev until every byte is moved. A read that meets
 * the end of the file (root shrank it behind us) reads zeros. */
static int64_t transfer(const struct volume *v, const struct iovec *iov, int n, uint64_t off, bool write)
{
	uint64_t total = iov_total(iov, n);
	if (!in_range(v, off, total))
		return -EIO;
	struct iovec cur[MAX_SEGS];
	if (n > (int)(sizeof cur / sizeof cur[0]))
		return -EIO;
	memcpy(cur, iov, (size_t)n * sizeof *iov);
	struct iovec *p = cur;
	uint64_t done = 0;
	while (n > 0) {
		ssize_t k = write ? pwritev(v->fd, p, n, (off_t)(off + done))
				  : preadv(v->fd, p, n, (off_t)(off + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0) {
			if (write)
				return -EIO;
			for (int i = 0; i < n; i++)
				memset(p[i].iov_base, 0, p[i].iov_len);
			return (int64_t)total;
		}
		done += (uint64_t)k;
		/* Step past what moved: whole iovecs, then into the next. */
		size_t left = (size_t)k;
		while (n > 0 && left >= p->iov_len) {
			left -= p->iov_len;
			p++;
			n--;
		}
		if (n > 0) {
			p->iov_base = (char *)p->iov_base + left;
			p->iov_len -= left;
		}
	}
	return (int64_t)done;
}

int64_t volume_readv(const struct volume *v, const struct iovec *iov, int n, uint64_t off)
{
	return transfer(v, iov, n, off, false);
}

int64_t volume_writev(const struct volume *v, const struct iovec *iov, int n, uint64_t off)
{
	if (v->fd >= 0 && v->read_only)
		return -EROFS;
	return transfer(v, iov, n, off, true);
}

int volume_flush(const struct volume *v)
{
	if (v->fd < 0 || v->read_only)
		return 0;
	return fdatasync(v->fd) < 0 ? -errno : 0;
}

int volume_close(struct volume *v)
{
	int rc = volume_flush(v);
	if (v->fd >= 0)
		close(v->fd);
	v->fd = -1;
	v->size = 0;
	v->read_only = false;
	return rc;
}
