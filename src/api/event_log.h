/*
 * event_log: what GET /v1/events streams (docs/api.md "Events"), kept in
 * memory so that a client that reconnects with Last-Event-ID gets what
 * it missed. Two rings:
 *
 *   lifecycle  the sandboxes' lifecycle as typed events (created, ready,
 *              paused, resumed, hibernated, woken, forked, failed with
 *              its reason, deleting, deleted with why), exec started and
 *              ended, TTL warnings: each with an id ("EPOCH-SEQ") and
 *              kept for EVENT_LOG_KEEP events or EVENT_LOG_KEEP_MS,
 *              whichever is less: the resumable window
 *   usage      accounting samples of running sandboxes (CPU so far,
 *              memory now), live only: a reader that falls behind skips
 *              to the newest; never replayed
 *
 * The log learns the lifecycle from the host interface's record saves
 * (hostif_subscribe), which carry only the state: it keeps each live
 * sandbox's last state and names the move (hibernated -> running is
 * "woken"). Exec events come from the API's exec handlers
 * (event_log_add). EPOCH is this process's start: an id of another
 * process (a restart, another API replica) is outside the window.
 */
#ifndef KILN_API_EVENT_LOG_H
#define KILN_API_EVENT_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"	/* ID_MAX */

#define EVENT_LOG_KEEP 8192
#define EVENT_LOG_KEEP_MS (3600 * 1000)
#define EVENT_DATA_MAX 600

struct hostif;
struct event_log;

struct event_rec {
	uint64_t seq;			/* lifecycle: from 1; usage: its own count */
	int64_t at_ms;			/* wall clock */
	char workspace[ID_MAX], sandbox[ID_MAX];
	char kind[8];			/* the SSE event name: sandbox, exec, ttl, usage */
	char type[16];			/* created, ready, ..., exec_started, ttl_warning, usage */
	char data[EVENT_DATA_MAX];	/* more members of its JSON object: ,"k":v... or "" */
};

/* A log fed by hi's record saves from now on; the sandboxes that exist
 * now are its starting states (no events for them). NULL with errmsg()
 * set on failure. */
struct event_log *event_log_new(struct hostif *hi);
void event_log_free(struct event_log *l);
/* Keep lifecycle events ms instead of EVENT_LOG_KEEP_MS (tests: a window
 * that passes while they wait). */
void event_log_set_keep_ms(struct event_log *l, int64_t ms);

/* Append a lifecycle-ring event (data: members as event_rec.data, may be
 * NULL). Its seq. With number, its data starts with ,"NUMBER":SEQ (an
 * exec's number: what its exec_ended names). */
uint64_t event_log_add(struct event_log *l, const char *ws, const char *sandbox, const char *kind,
		       const char *type, const char *data);
uint64_t event_log_add_numbered(struct event_log *l, const char *ws, const char *sandbox, const char *kind,
				const char *type, const char *number, const char *data);

/* The id of lifecycle event seq ("EPOCH-SEQ") into buf. */
void event_log_id(const struct event_log *l, uint64_t seq, char *buf, size_t cap);

/* Where a Last-Event-ID leaves a reader: *after gets the seq it names.
 * 0 when it is in the window (every event after it is still kept), -1
 * when not (another process's, malformed, or older than the window):
 * the reader starts from now and should be told to list again. */
int event_log_resume(struct event_log *l, const char *last_id, uint64_t *after);

/* The cursor of a reader that starts now. */
struct event_cursor {
	uint64_t life, usage;
	bool lost;			/* fell out of the window: resync */
};
void event_log_cursor(struct event_log *l, struct event_cursor *c);

/* The next event for a reader of workspace ws (and sandbox, when not
 * ""), after its cursor: 1 and *out (the cursor moved past it), 0 when
 * none came in wait_ms, -1 when the reader fell behind the lifecycle
 * window (c->lost set; the cursor moved to now). */
int event_log_next(struct event_log *l, struct event_cursor *c, const char *ws, const char *sandbox,
		   int wait_ms, struct event_rec *out);

#endif
