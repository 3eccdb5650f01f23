/*
 * sse: the buffer of a Server-Sent Events answer (exec/stream, code/stream,
 * files/watch, logs?follow): events are formatted into it, and handed to
 * the HTTP server as it asks for more (http.h's http_read_fn).
 */
#ifndef KILN_API_SSE_H
#define KILN_API_SSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/strbuf.h"

struct sse_out {
	struct strbuf b;
	size_t off;		/* handed out so far */
};

void sse_init(struct sse_out *o);
void sse_free(struct sse_out *o);
/* Everything handed out: start over (true), or false while some is left. */
bool sse_drained(struct sse_out *o);
/* "event: NAME\ndata: JSON\n\n"; data is stolen (NULL: out of memory,
 * sent as an internal error event's data). */
void sse_event(struct sse_out *o, const char *name, json_t *data);
/* A comment line (": text"): keeps proxies from closing a quiet stream. */
void sse_comment(struct sse_out *o, const char *text);
/* Up to max bytes of what is formatted into buf: their count, or
 * HTTP_STREAM_ERROR if formatting ran out of memory. */
long sse_take(struct sse_out *o, char *buf, size_t max);

#endif
