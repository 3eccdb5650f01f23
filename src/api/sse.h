/*
 * sse: the buffer of a Server-Sent Events answer (exec/stream, code/stream,
 * files/watch, logs?follow): events are formatted into it, and handed to
 * the HTTP server as it asks for more (http.h's http_read_fn); and the
 * loop of a followed log.
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

/* ---- following a log (logs?follow of a sandbox, of a template build) ---- */

/* A stream that hands out what a source has and waits for more: while
 * the source has nothing new it waits SSE_FOLLOW_POLL_MS at a time for
 * the client to hang up (the stream then ends) or wait_fd to become
 * readable, and after 15 s of quiet sends a keepalive comment, so that
 * proxies keep the stream. */
#define SSE_FOLLOW_POLL_MS 250

struct sse_follow {
	struct sse_out out;
	int sock;		/* the client's */
	int wait_fd;		/* -1, or where the source's next bytes come */
	bool done;		/* the source's last event is formatted */
	int quiet_ms;
};

/* The source: format what it has new into f->out (setting f->done with
 * its last event) and return true, or return false when it has nothing
 * new yet. */
typedef bool sse_more_fn(void *ctx, struct sse_follow *f);

/* sock: the client's socket. */
void sse_follow_init(struct sse_follow *f, int sock);
/* The body of the stream's http_read_fn. */
long sse_follow_read(struct sse_follow *f, sse_more_fn *more, void *ctx, char *buf, size_t max);

#endif
