/*
 * buf: a growable byte buffer with printf-style appends, for building
 * messages (JSON replies, ACPI tables) whose size is not known up front.
 * On allocation failure the buffer is marked failed and further appends are
 * ignored, so callers check once at the end with buf_failed().
 */
#ifndef KILN_BUF_H
#define KILN_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct buf {
	char *data;
	size_t len, cap;
	bool failed;
};

void buf_init(struct buf *b);
void buf_free(struct buf *b);
void buf_reset(struct buf *b);
bool buf_reserve(struct buf *b, size_t extra);
void buf_append(struct buf *b, const void *p, size_t n);
void buf_putc(struct buf *b, char c);
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* buf_json_str: append s as a quoted, escaped JSON string. */
void buf_json_str(struct buf *b, const char *s);
static inline bool buf_failed(const struct buf *b) { return b->failed; }

#endif
