#include "api/event_log.h"
#include "hostif/hostif.h"
#include "common/err.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define USAGE_KEEP 256

struct event_log {
	struct hostif *hi;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char epoch[16];			/* this process's start, base 36 ms */
	struct event_rec *life;		/* EVENT_LOG_KEEP, seq % EVENT_LOG_KEEP */
	uint64_t life_next;		/* the next seq to give (from 1) */
	uint64_t life_first;		/* first_kept's last answer: older ones have expired */
	int64_t keep_ms;		/* EVENT_LOG_KEEP_MS (event_log_set_keep_ms) */
	struct event_rec *usage;	/* USAGE_KEEP */
	uint64_t usage_next;
	json_t *states;			/* sandbox id -> its last state */
	bool subscribed;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The members of object o (",\"k\":v..."), or "" when o is empty or they
 * do not fit in cap. */
static void members_of(json_t *o, char *buf, size_t cap)
{
	buf[0] = 0;
	char *s = o && json_object_size(o) ? json_dumps(o, JSON_COMPACT) : NULL;
	size_t n = s ? strlen(s) : 0;
	if (n >= 2 && n - 1 < cap) {	/* "{...}" -> ",..." */
		memcpy(buf, s, n - 1);
		buf[0] = ',';
		buf[n - 1] = 0;
	}
	free(s);
}

static struct event_rec *put(struct event_rec *ring, size_t size, uint64_t seq, const char *ws,
			     const char *sandbox, const char *kind, const char *type, const char *data)
{
	struct event_rec *e = &ring[seq % size];
	e->seq = seq;
	e->at_ms = now_ms();
	snprintf(e->workspace, sizeof e->workspace, "%s", ws);
	snprintf(e->sandbox, sizeof e->sandbox, "%s", sandbox);
	snprintf(e->kind, sizeof e->kind, "%s", kind);
	snprintf(e->type, sizeof e->type, "%s", type);
	snprintf(e->data, sizeof e->data, "%s", data ? data : "");
	return e;
}

static uint64_t add_locked(struct event_log *l, const char *ws, const char *sandbox, const char *kind,
			   const char *type, const char *data)
{
	uint64_t seq = l->life_next++;
	put(l->life, EVENT_LOG_KEEP, seq, ws, sandbox, kind, type, data);
	return seq;
}

/* The oldest lifecycle seq still kept: within EVENT_LOG_KEEP of the
 * newest and keep_ms of now. Every read asks (event_log_next), so it
 * goes on from where it stopped last time rather than from the oldest
 * in the ring: a read costs the entries that expired since, not up to
 * EVENT_LOG_KEEP of them on an idle stream. An entry once expired stays
 * so (were the clock set back). Under l->lock. */
static uint64_t first_kept(struct event_log *l)
{
	uint64_t ring = l->life_next > EVENT_LOG_KEEP ? l->life_next - EVENT_LOG_KEEP : 1;
	if (l->life_first < ring)
		l->life_first = ring;	/* overwritten by newer ones */
	int64_t since = now_ms() - l->keep_ms;
	while (l->life_first < l->life_next && l->life[l->life_first % EVENT_LOG_KEEP].at_ms < since)
		l->life_first++;
	return l->life_first;
}

/* The lifecycle move prev -> state as an event type. */
static const char *move_type(const char *prev, const char *state)
{
	if (!strcmp(state, "running"))
		return !strcmp(prev, "creating") ? "ready" : !strcmp(prev, "hibernated") ? "woken"
		       : !strcmp(prev, "paused") ? "resumed" : "running";
	return state;	/* paused, hibernated, failed, deleting, deleted, lost */
}

static void tell_state(struct event_log *l, const struct host_event *e)
{
	const char *prev = json_string_value(json_object_get(l->states, e->id));
	if (prev && !strcmp(prev, e->state)) {
		/* No move: an accounting sample, told live when it has one. */
		if (!strcmp(e->state, "running") && e->rss_bytes > 0) {
			char d[96];
			snprintf(d, sizeof d, ",\"cpu_seconds\":%.3f,\"memory_bytes\":%lld", e->cpu_seconds,
				 (long long)e->rss_bytes);
			put(l->usage, USAGE_KEEP, l->usage_next++, e->workspace, e->id, "usage", "usage", d);
		}
		return;
	}
	char d[EVENT_DATA_MAX];
	json_t *o = json_object();
	json_object_set_new(o, "state", json_string(e->state));
	if (!prev && strcmp(e->state, "creating")) {
		/* Not seen before, and not new (made before this log, on a
		 * host whose records it did not read): its state as it is. */
		prev = "";
	} else if (!prev) {
		if (e->parent && e->parent[0])
			json_object_set_new(o, "parent_id", json_string(e->parent));
		members_of(o, d, sizeof d);
		add_locked(l, e->workspace, e->id, "sandbox", "created", d);
		if (e->parent && e->parent[0]) {
			const char *ps = json_string_value(json_object_get(l->states, e->parent));
			json_t *f = json_pack("{s:s,s:s}", "state", ps ? ps : "running", "child", e->id);
			members_of(f, d, sizeof d);
			json_decref(f);
			add_locked(l, e->workspace, e->parent, "sandbox", "forked", d);
		}
		prev = "creating";
		json_object_del(o, "parent_id");
	}
	if (strcmp(prev, e->state)) {
		json_t *why = !strcmp(e->state, "failed") && e->error && e->error[0]
			      ? json_stringn(e->error, strnlen(e->error, 300)) : NULL;
		if (why)	/* NULL too when not UTF-8 (cut in a character) */
			json_object_set_new(o, "error", why);
		if (!strcmp(e->state, "deleted") && e->ended && e->ended[0])
			json_object_set_new(o, "ended", json_string(e->ended));
		members_of(o, d, sizeof d);
		add_locked(l, e->workspace, e->id, "sandbox", move_type(prev, e->state), d);
	}
	json_decref(o);
	if (!strcmp(e->state, "deleted"))
		json_object_del(l->states, e->id);
	else
		json_object_set_new(l->states, e->id, json_string(e->state));
}

static void on_event(void *ctx, const struct host_event *e)
{
	struct event_log *l = ctx;
	if (!e->workspace || !e->workspace[0] || !e->id || !e->state)
		return;	/* a pool member: no workspace's */
	pthread_mutex_lock(&l->lock);
	if (e->kind && !strcmp(e->kind, "ttl_warning")) {
		char d[160];
		time_t t = (time_t)(e->due_ms / 1000);
		struct tm tm;
		gmtime_r(&t, &tm);
		snprintf(d, sizeof d, ",\"state\":\"%s\",\"action\":\"%s\",\"due_at\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\"",
			 e->state, e->ttl_action ? e->ttl_action : "delete", tm.tm_year + 1900, tm.tm_mon + 1,
			 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(e->due_ms % 1000));
		add_locked(l, e->workspace, e->id, "ttl", "ttl_warning", d);
	} else if (!e->kind) {
		tell_state(l, e);
	}
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

static int seed_state(void *ctx, const struct sbx_row *r)
{
	json_object_set_new(ctx, r->id, json_string(sbx_state_name(r->state)));
	return 0;
}

struct event_log *event_log_new(struct hostif *hi)
{
	struct event_log *l = calloc(1, sizeof *l);
	if (!l || !(l->life = calloc(EVENT_LOG_KEEP, sizeof *l->life)) ||
	    !(l->usage = calloc(USAGE_KEEP, sizeof *l->usage)) || !(l->states = json_object())) {
		event_log_free(l);
		errf(ENOMEM, "out of memory");
		return NULL;
	}
	l->hi = hi;
	l->life_next = 1;
	l->life_first = 1;
	l->keep_ms = EVENT_LOG_KEEP_MS;
	l->usage_next = 1;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	/* base 36 of the start time in ms: ids of this process only */
	uint64_t t = (uint64_t)now_ms();
	char tmp[16];
	int n = 0;
	do
		tmp[n++] = "0123456789abcdefghijklmnopqrstuvwxyz"[t % 36];
	while ((t /= 36) && n < 15);
	for (int i = 0; i < n; i++)
		l->epoch[i] = tmp[n - 1 - i];
	/* Subscribed first, then the states read: a change in between is
	 * told (as a move from what was read or as a creation), not lost. */
	if (hostif_subscribe(hi, on_event, l) < 0) {
		event_log_free(l);
		return NULL;
	}
	l->subscribed = true;
	/* On one box the records are at hand; a cluster's API would ask
	 * every host (slow, and some may be down): it learns each sandbox
	 * at its next change instead. */
	if (!strcmp(hi->ops->name, "local")) {
		/* Read without the lock (a read may save a record, which calls
		 * on_event); what on_event learned meanwhile is newer. */
		json_t *seed = json_object();
		int rc = seed ? hostif_each(hi, NULL, seed_state, seed) : errf(ENOMEM, "out of memory");
		const char *id;
		json_t *v;
		pthread_mutex_lock(&l->lock);
		json_object_foreach(seed, id, v)
			if (!json_object_get(l->states, id))
				json_object_set(l->states, id, v);
		pthread_mutex_unlock(&l->lock);
		json_decref(seed);
		if (rc < 0) {
			event_log_free(l);
			return NULL;
		}
	}
	return l;
}

void event_log_free(struct event_log *l)
{
	if (!l)
		return;
	if (l->subscribed) {
		hostif_unsubscribe(l->hi, on_event, l);
		pthread_cond_destroy(&l->cond);
		pthread_mutex_destroy(&l->lock);
	}
	json_decref(l->states);
	free(l->life);
	free(l->usage);
	free(l);
}

void event_log_set_keep_ms(struct event_log *l, int64_t ms)
{
	pthread_mutex_lock(&l->lock);
	l->keep_ms = ms;
	pthread_mutex_unlock(&l->lock);
}

uint64_t event_log_add(struct event_log *l, const char *ws, const char *sandbox, const char *kind,
		       const char *type, const char *data)
{
	pthread_mutex_lock(&l->lock);
	uint64_t seq = add_locked(l, ws, sandbox, kind, type, data);
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	return seq;
}

uint64_t event_log_add_numbered(struct event_log *l, const char *ws, const char *sandbox, const char *kind,
				const char *type, const char *number, const char *data)
{
	pthread_mutex_lock(&l->lock);
	char d[EVENT_DATA_MAX];
	snprintf(d, sizeof d, ",\"%s\":%llu%s", number, (unsigned long long)l->life_next, data ? data : "");
	uint64_t seq = add_locked(l, ws, sandbox, kind, type, d);
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	return seq;
}

void event_log_id(const struct event_log *l, uint64_t seq, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s-%llu", l->epoch, (unsigned long long)seq);
}

int event_log_resume(struct event_log *l, const char *last_id, uint64_t *after)
{
	size_t n = strlen(l->epoch);
	char *end;
	pthread_mutex_lock(&l->lock);
	*after = l->life_next - 1;
	int rc = -1;
	if (last_id && !strncmp(last_id, l->epoch, n) && last_id[n] == '-' && last_id[n + 1] >= '0' &&
	    last_id[n + 1] <= '9') {
		errno = 0;
		unsigned long long seq = strtoull(last_id + n + 1, &end, 10);
		/* In the window: every event after it is still kept. */
		if (!errno && !*end && seq < l->life_next && seq + 1 >= first_kept(l)) {
			*after = seq;
			rc = 0;
		}
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

void event_log_cursor(struct event_log *l, struct event_cursor *c)
{
	pthread_mutex_lock(&l->lock);
	c->life = l->life_next - 1;
	c->usage = l->usage_next - 1;
	c->lost = false;
	pthread_mutex_unlock(&l->lock);
}

static bool wanted(const struct event_rec *e, const char *ws, const char *sandbox)
{
	return !strcmp(e->workspace, ws) && (!sandbox[0] || !strcmp(e->sandbox, sandbox));
}

/* The next wanted event after the cursor, with the lock held: 1, 0 none,
 * -1 lost. */
static int next_locked(struct event_log *l, struct event_cursor *c, const char *ws, const char *sandbox,
		       struct event_rec *out)
{
	if (c->life + 1 < first_kept(l)) {
		c->life = l->life_next - 1;
		c->usage = l->usage_next - 1;
		c->lost = true;
		return -1;
	}
	for (uint64_t s = c->life + 1; s < l->life_next; s++) {
		c->life = s;
		if (wanted(&l->life[s % EVENT_LOG_KEEP], ws, sandbox)) {
			*out = l->life[s % EVENT_LOG_KEEP];
			return 1;
		}
	}
	if (l->usage_next > USAGE_KEEP && c->usage + 1 < l->usage_next - USAGE_KEEP)
		c->usage = l->usage_next - USAGE_KEEP - 1;	/* behind: the newest only */
	for (uint64_t s = c->usage + 1; s < l->usage_next; s++) {
		c->usage = s;
		if (wanted(&l->usage[s % USAGE_KEEP], ws, sandbox)) {
			*out = l->usage[s % USAGE_KEEP];
			return 1;
		}
	}
	return 0;
}

int event_log_next(struct event_log *l, struct event_cursor *c, const char *ws, const char *sandbox,
		   int wait_ms, struct event_rec *out)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += wait_ms / 1000;
	until.tv_nsec += (long)(wait_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&l->lock);
	int rc;
	while ((rc = next_locked(l, c, ws, sandbox, out)) == 0)
		if (pthread_cond_timedwait(&l->cond, &l->lock, &until) == ETIMEDOUT) {
			rc = next_locked(l, c, ws, sandbox, out);
			break;
		}
	pthread_mutex_unlock(&l->lock);
	return rc;
}
