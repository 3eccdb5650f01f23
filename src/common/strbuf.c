#include "common/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void strbuf_init(struct strbuf *b)
{
	memset(b, 0, sizeof *b);
}

void strbuf_free(struct strbuf *b)
{
	free(b->data);
	strbuf_init(b);
}

void strbuf_reset(struct strbuf *b)
{
	b->len = 0;
	b->failed = false;
	if (b->data)
		b->data[0] = 0;
}

bool strbuf_reserve(struct strbuf *b, size_t extra)
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

void strbuf_append(struct strbuf *b, const void *p, size_t n)
{
	if (!strbuf_reserve(b, n))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = 0;
}

void strbuf_putc(struct strbuf *b, char c)
{
	strbuf_append(b, &c, 1);
}

void strbuf_printf(struct strbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !strbuf_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void strbuf_json_str(struct strbuf *b, const char *s)
{
	strbuf_putc(b, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': strbuf_append(b, "\\\"", 2); break;
		case '\\': strbuf_append(b, "\\\\", 2); break;
		case '\n': strbuf_append(b, "\\n", 2); break;
		case '\r': strbuf_append(b, "\\r", 2); break;
		case '\t': strbuf_append(b, "\\t", 2); break;
		default:
			if (*p < 0x20)
				strbuf_printf(b, "\\u%04x", *p);
			else
				strbuf_putc(b, (char)*p);
		}
	}
	strbuf_putc(b, '"');
}
