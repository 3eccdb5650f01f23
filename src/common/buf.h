/*
 * A growable byte buffer with a read offset: bytes are appended at the end
 * and consumed from the front. The agent uses one per direction of every
 * connection; the client library does the same. Callers bound the size
 * themselves (buf_reserve takes an explicit limit), so no buffer grows
 * without a decision.
 */
#ifndef KILN_BUF_H
#define KILN_BUF_H

#include <stddef.h>
#include <stdint.h>

struct buf {
	uint8_t *p;
	size_t off;	/* first unconsumed byte */
	size_t len;	/* end of data */
	size_t cap;
};

static inline size_t buf_used(const struct buf *b) { return b->len - b->off; }
static inline uint8_t *buf_data(const struct buf *b) { return b->p + b->off; }
static inline uint8_t *buf_tail(const struct buf *b) { return b->p + b->len; }

/* Make room for n more bytes after the data, moving the data to the front
 * or growing the allocation. Fails with -ENOBUFS if the data plus n would
 * exceed limit, -ENOMEM if the allocation fails. */
int buf_reserve(struct buf *b, size_t n, size_t limit);

/* Append n bytes (buf_reserve + copy). */
int buf_append(struct buf *b, const void *p, size_t n, size_t limit);

/* Drop n bytes from the front. */
void buf_consume(struct buf *b, size_t n);

/* Cut the data back to `used` bytes (used <= buf_used). */
void buf_truncate(struct buf *b, size_t used);

/* Release memory that an idle buffer no longer needs. */
void buf_shrink(struct buf *b, size_t keep);

void buf_free(struct buf *b);

/* Send as much of the data to a non-blocking socket as it takes now and
 * consume it. 0 (all sent, or the socket is full), or -errno. */
int buf_send(struct buf *b, int fd);

#endif
