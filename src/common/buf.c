/*
 * Byte buffer: see buf.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/buf.h"

int buf_reserve(struct buf *b, size_t n, size_t limit)
{
	size_t used = buf_used(b);

	if (n > limit || used > limit - n)
		return -ENOBUFS;
	if (b->cap - b->len >= n)
		return 0;
	/* Moving the data to the front is cheaper than growing when most of
	 * the buffer has been consumed already. */
	if (b->off && b->cap - used >= n) {
		memmove(b->p, b->p + b->off, used);
		b->off = 0;
		b->len = used;
		return 0;
	}
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < used + n)
		cap *= 2;
	if (cap > limit && used + n <= limit)
		cap = limit;
	uint8_t *p = malloc(cap);
	if (!p)
		return -ENOMEM;
	if (used)
		memcpy(p, b->p + b->off, used);
	free(b->p);
	b->p = p;
	b->off = 0;
	b->len = used;
	b->cap = cap;
	return 0;
}

int buf_append(struct buf *b, const void *p, size_t n, size_t limit)
{
	int rc = buf_reserve(b, n, limit);
	if (rc < 0)
		return rc;
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= buf_used(b)) {
		b->off = b->len = 0;
		return;
	}
	b->off += n;
}

void buf_truncate(struct buf *b, size_t used)
{
	if (used < buf_used(b))
		b->len = b->off + used;
}

void buf_shrink(struct buf *b, size_t keep)
{
	if (buf_used(b) == 0 && b->cap > keep) {
		free(b->p);
		b->p = NULL;
		b->off = b->len = b->cap = 0;
	}
}

void buf_free(struct buf *b)
{
	free(b->p);
	b->p = NULL;
	b->off = b->len = b->cap = 0;
}

int buf_send(struct buf *b, int fd)
{
	while (buf_used(b)) {
		ssize_t n = send(fd, buf_data(b), buf_used(b), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -errno;
		}
		buf_consume(b, (size_t)n);
	}
	return 0;
}
