/*
 * h_events: GET /v1/events, a Server-Sent Events stream of what happens
 * to the caller's workspace's sandboxes (docs/api.md "Events"), from the
 * API's event log (event_log.h), so that a dashboard or an SDK needs no
 * polling:
 *
 *   id: EPOCH-SEQ
 *   event: sandbox
 *   data: {"id":"sbx_...","type":"hibernated","state":"hibernated","at":"..."}
 *
 * Lifecycle events (event: sandbox, with type created, ready, paused,
 * resumed, hibernated, woken, forked, failed, deleting, deleted), exec
 * started and ended (event: exec), TTL warnings (event: ttl) carry an id;
 * a client that reconnects with Last-Event-ID (EventSource does) gets
 * every such event it missed while that id is in the log's window, or
 * `event: resync` (list again) when it is not. Accounting samples of a
 * running sandbox are told live, without an id:
 *
 *   event: usage
 *   data: {"id":"sbx_...","cpu_seconds":1.25,"memory_bytes":52428800}
 *
 * A comment line (`: keepalive`) is sent after 15 s of silence. The
 * stream is not activity for any sandbox's TTL.
 */
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/event_log.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "ops/ops.h"
#include "api/http.h"
#include "store/store.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEEPALIVE_S 15

struct stream {
	struct event_log *log;
	char workspace[ID_MAX];
	char sandbox[ID_MAX];		/* ?sandbox=ID: only its events; "": all */
	struct event_cursor cur;
	bool hello_sent, resync;	/* resync: its Last-Event-ID was outside the window */
};

static long events_read(void *ctx, char *buf, size_t max)
{
	struct stream *s = ctx;	/* max is MHD's block, 64 KiB: room for any event */
	if (!s->hello_sent) {
		s->hello_sent = true;
		int n = snprintf(buf, max, "retry: 3000\n: connected\n\n");
		if (s->resync)
			n += snprintf(buf + n, max - n, "event: resync\ndata: {}\n\n");
		return n;
	}
	struct event_rec e;
	int rc = event_log_next(s->log, &s->cur, s->workspace, s->sandbox, KEEPALIVE_S * 1000, &e);
	if (rc < 0)	/* fell behind the window */
		return snprintf(buf, max, "event: resync\ndata: {}\n\n");
	if (rc == 0)
		return snprintf(buf, max, ": keepalive\n\n");
	if (!strcmp(e.kind, "usage"))
		return snprintf(buf, max, "event: usage\ndata: {\"id\":\"%s\"%s}\n\n", e.sandbox, e.data);
	char id[48];
	event_log_id(s->log, e.seq, id, sizeof id);
	time_t t = (time_t)(e.at_ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	return snprintf(buf, max, "id: %s\nevent: %s\ndata: {\"id\":\"%s\",\"type\":\"%s\","
			"\"at\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\"%s}\n\n", id, e.kind, e.sandbox, e.type,
			tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			(int)(e.at_ms % 1000), e.data);
}

static void events_done(void *ctx)
{
	free(ctx);
}

int h_events(struct req *r)
{
	/* One sandbox's lifecycle: it must be the caller's (404 otherwise). */
	const char *only = req_query(r, "sandbox");
	if (only) {
		struct ops_caller c;
		req_caller(r, &c);
		c.touch = false;
		if (ops_sandbox(&c, only, NULL) < 0)
			return reply_sandbox_missing(r, only);
	}
	if (!r->api->events)
		return reply_error(r, 501, "not_implemented", "this kilnd keeps no event log");
	struct stream *s = calloc(1, sizeof *s);
	if (!s)
		return reply_error(r, 503, "no_capacity", "out of memory");
	s->log = r->api->events;
	snprintf(s->workspace, sizeof s->workspace, "%s", r->workspace);
	snprintf(s->sandbox, sizeof s->sandbox, "%s", only ? only : "");
	event_log_cursor(s->log, &s->cur);
	/* Reconnected: what it missed, if still kept (?last_event_id= for
	 * clients that cannot set the header). */
	const char *last = req_header(r, "Last-Event-ID");
	if (!last)
		last = req_query(r, "last_event_id");
	if (last && event_log_resume(s->log, last, &s->cur.life) < 0)
		s->resync = true;
	static const char *const h[][2] = {
		{ "Content-Type", "text/event-stream" },
		{ "Cache-Control", "no-store" },
		{ "X-Accel-Buffering", "no" },
		{ NULL, NULL },
	};
	return reply_response(r, 200, h, HTTP_SIZE_UNKNOWN, events_read, events_done, s);
}
