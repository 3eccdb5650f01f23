/*
 * h_events: GET /v1/events, a Server-Sent Events stream of the state
 * changes of the caller's workspace's sandboxes, pushed as they happen
 * (hostif_subscribe, host/host_types.h), so that a dashboard needs no polling:
 *
 *   event: sandbox
 *   data: {"id":"sbx_...","state":"running"}
 *
 * A sandbox's record is also saved at every accounting sample (kilnd
 * --sample-ms); a save of a running sandbox that does not change its
 * state is sent as
 *
 *   event: usage
 *   data: {"id":"sbx_...","cpu_seconds":1.25,"memory_bytes":52428800}
 *
 * (CPU time so far, resident memory now), for live charts. When a
 * client falls more than QUEUE_MAX events behind, it gets one
 * `event: resync` instead and should list the sandboxes again. A comment
 * line (`: keepalive`) is sent after 15 s of silence. The stream names no
 * sandbox, so it is not activity for any sandbox's TTL.
 */
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "ops/ops.h"
#include "api/http.h"
#include "store/store.h"
#include "common/err.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QUEUE_MAX 256
#define SEEN_MAX 1024
#define KEEPALIVE_S 15

struct event {
	char id[ID_MAX], state[16];
	double cpu_seconds;
	int64_t rss_bytes;
};

struct stream {
	struct hostif *hostif;		/* subscribed to */
	char workspace[ID_MAX];
	char sandbox[ID_MAX];		/* ?sandbox=ID: only its events; "": all */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct event q[QUEUE_MAX];
	int head, n;
	bool overflow, hello_sent;
	/* the last state sent per sandbox (only this stream's thread) */
	struct event seen[SEEN_MAX];
	int nseen;
};

static void on_event(void *ctx, const struct host_event *ev)
{
	struct stream *s = ctx;
	if (strcmp(ev->workspace, s->workspace) != 0 || (s->sandbox[0] && strcmp(ev->id, s->sandbox) != 0))
		return;
	pthread_mutex_lock(&s->lock);
	if (s->n == QUEUE_MAX) {
		s->overflow = true;
	} else {
		struct event *e = &s->q[(s->head + s->n++) % QUEUE_MAX];
		snprintf(e->id, sizeof e->id, "%s", ev->id);
		snprintf(e->state, sizeof e->state, "%s", ev->state);
		e->cpu_seconds = ev->cpu_seconds;
		e->rss_bytes = ev->rss_bytes;
	}
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* Whether the state is news to this stream (and remember it). */
static bool news(struct stream *s, const struct event *e)
{
	for (int i = 0; i < s->nseen; i++) {
		if (strcmp(s->seen[i].id, e->id) != 0)
			continue;
		if (strcmp(s->seen[i].state, e->state) == 0)
			return false;
		s->seen[i] = *e;
		return true;
	}
	if (s->nseen < SEEN_MAX)
		s->seen[s->nseen++] = *e;
	else
		s->seen[rand() % SEEN_MAX] = *e;	/* forgetting costs only a repeat */
	return true;
}

static long events_read(void *ctx, char *buf, size_t max)
{
	struct stream *s = ctx;	/* max is MHD's block, 64 KiB: room for any event */
	if (!s->hello_sent) {
		s->hello_sent = true;
		return snprintf(buf, max, "retry: 3000\n: connected\n\n");
	}
	pthread_mutex_lock(&s->lock);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += KEEPALIVE_S;
	for (;;) {
		if (s->overflow) {
			s->overflow = false;
			s->n = 0;
			s->nseen = 0;
			pthread_mutex_unlock(&s->lock);
			return snprintf(buf, max, "event: resync\ndata: {}\n\n");
		}
		while (s->n > 0) {
			struct event e = s->q[s->head];
			s->head = (s->head + 1) % QUEUE_MAX;
			s->n--;
			if (news(s, &e)) {
				pthread_mutex_unlock(&s->lock);
				return snprintf(buf, max, "event: sandbox\ndata: {\"id\":\"%s\",\"state\":\"%s\"}\n\n",
						e.id, e.state);
			}
			/* Figures only of a running VMM: other saves (on the way
			 * to hibernation, a fork's bookkeeping) carry no sample. */
			if (strcmp(e.state, "running") != 0 || e.rss_bytes <= 0)
				continue;
			pthread_mutex_unlock(&s->lock);
			return snprintf(buf, max, "event: usage\ndata: {\"id\":\"%s\",\"cpu_seconds\":%.3f,"
					"\"memory_bytes\":%lld}\n\n", e.id, e.cpu_seconds, (long long)e.rss_bytes);
		}
		if (pthread_cond_timedwait(&s->cond, &s->lock, &until) == ETIMEDOUT) {
			pthread_mutex_unlock(&s->lock);
			return snprintf(buf, max, ": keepalive\n\n");
		}
	}
}

static void events_done(void *ctx)
{
	struct stream *s = ctx;
	hostif_unsubscribe(s->hostif, on_event, s);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
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
	struct stream *s = calloc(1, sizeof *s);
	if (!s)
		return reply_error(r, 503, "no_capacity", "out of memory");
	s->hostif = r->api->hostif;
	snprintf(s->workspace, sizeof s->workspace, "%s", r->workspace);
	snprintf(s->sandbox, sizeof s->sandbox, "%s", only ? only : "");
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	int rc = hostif_subscribe(s->hostif, on_event, s);
	if (rc < 0) {
		pthread_cond_destroy(&s->cond);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return reply_errno(r, rc);
	}
	static const char *const h[][2] = {
		{ "Content-Type", "text/event-stream" },
		{ "Cache-Control", "no-store" },
		{ "X-Accel-Buffering", "no" },
		{ NULL, NULL },
	};
	return reply_response(r, 200, h, HTTP_SIZE_UNKNOWN, events_read, events_done, s);
}
