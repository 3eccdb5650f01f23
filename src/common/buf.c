#include "common/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(struct buf *b)
{
	memset(b, 0, sizeof *b);
}

void buf_free(struct buf *b)
{
	free(b->data);
	buf_init(b);
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	b->failed = false;
	if (b->data)
		b->data[0] = 0;
}

bool buf_reserve(struct buf *b, size_t extra)
{
	if (b->failed)
		return false;
	if (b->len + extra + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < b->len + extra + 1) {
		if (cap > (size_t)-1 / 2) {
			b->failed = true;
			return false;
		}
		cap *= 2;
	}
	char *p = realloc(b->data, cap);
	if (!p) {
		b->failed = true;
		return false;
	}
	b->data = p;
	b->cap = cap;
	return true;
}

void buf_append(struct buf *b, const void *p, size_t n)
{
	if (!buf_reserve(b, n))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = 0;
}

void buf_putc(struct buf *b, char c)
{
	buf_append(b, &c, 1);
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !buf_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void buf_json_str(struct buf *b, const char *s)
{
	buf_putc(b, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': buf_append(b, "\\\"", 2); break;
		case '\\': buf_append(b, "\\\\", 2); break;
		case '\n': buf_append(b, "\\n", 2); break;
		case '\r': buf_append(b, "\\r", 2); break;
		case '\t': buf_append(b, "\\t", 2); break;
		default:
			if (*p < 0x20)
				buf_printf(b, "\\u%04x", *p);
			else
				buf_putc(b, (char)*p);
		}
	}
	buf_putc(b, '"');
}
