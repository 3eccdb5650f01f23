/*
 * strbuf: a growable byte buffer with printf-style appends, for building
 * messages (JSON replies, ACPI tables) whose size is not known up front.
 * On allocation failure the buffer is marked failed and further appends are
 * ignored, so callers check once at the end with strbuf_failed().
 */
#ifndef KILN_STRBUF_H
#define KILN_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

struct strbuf {
	char *data;
	size_t len, cap;
	bool failed;
};

void strbuf_init(struct strbuf *b);
void strbuf_free(struct strbuf *b);
void strbuf_reset(struct strbuf *b);
bool strbuf_reserve(struct strbuf *b, size_t extra);
void strbuf_append(struct strbuf *b, const void *p, size_t n);
void strbuf_putc(struct strbuf *b, char c);
void strbuf_printf(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* strbuf_json_str: append s as a quoted, escaped JSON string. */
void strbuf_json_str(struct strbuf *b, const char *s);
static inline bool strbuf_failed(const struct strbuf *b) { return b->failed; }

#endif
