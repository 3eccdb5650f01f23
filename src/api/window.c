#include "api/window.h"
#include "api/api.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "host/host_types.h"	/* WS_WINDOW_MAX */
#include "ops/plan.h"
#include "store/store.h"
#include "common/err.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW_FRESH_MS 1000
/* Workspaces remembered; past it the one read longest ago goes (it is
 * only counted again). */
#define WINDOW_SLOTS 256

struct slot {
	char ws[ID_MAX];
	struct window_count c;
	bool capped;			/* the plan limits creates */
	int64_t read_ms;		/* when c was read (0: empty slot) */
};

struct windows {
	pthread_mutex_t lock;
	struct slot s[WINDOW_SLOTS];
};

struct windows *windows_new(void)
{
	struct windows *w = calloc(1, sizeof *w);
	if (w)
		pthread_mutex_init(&w->lock, NULL);
	return w;
}

void windows_free(struct windows *w)
{
	if (!w)
		return;
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* The slot of ws, or the one to reuse for it. Under w->lock. */
static struct slot *slot_of(struct windows *w, const char *ws)
{
	struct slot *old = &w->s[0];
	for (int i = 0; i < WINDOW_SLOTS; i++) {
		if (!strcmp(w->s[i].ws, ws))
			return &w->s[i];
		if (w->s[i].read_ms < old->read_ms)
			old = &w->s[i];
	}
	memset(old, 0, sizeof *old);
	snprintf(old->ws, sizeof old->ws, "%s", ws);
	return old;
}

/* Count it from the store: the plan, then the creates in its window. */
static int count(struct req *r, struct window_count *c, bool *capped)
{
	struct plan p;
	int rc = req_plan(r, &p);
	if (rc < 0)
		return rc;
	*capped = p.limits.creates_per_hour > 0;
	memset(c, 0, sizeof *c);
	if (!*capped)
		return 0;
	int64_t window_ms = r->api->plans ? r->api->plans->window_ms : 3600 * 1000;
	int64_t *times = malloc(WS_WINDOW_MAX * sizeof *times);
	int n = 0;
	rc = times ? store_creates_since(r->api->store, r->workspace, wall_ms() - window_ms + 1, times,
					 WS_WINDOW_MAX, &n)
		   : errf(ENOMEM, "out of memory");
	if (rc == 0) {
		c->limit = p.limits.creates_per_hour;
		c->used = n;
		int64_t oldest = times[0];
		for (int i = 1; i < n; i++)
			oldest = times[i] < oldest ? times[i] : oldest;
		c->reset_ms = n ? oldest + window_ms : 0;
	}
	free(times);
	return rc;
}

int windows_get(struct req *r, struct window_count *out)
{
	struct windows *w = r->api->windows;
	if (!w || !r->workspace[0])
		return 1;
	int64_t now = wall_ms();
	pthread_mutex_lock(&w->lock);
	struct slot *s = slot_of(w, r->workspace);
	bool fresh = s->read_ms && now - s->read_ms < WINDOW_FRESH_MS;
	struct window_count c = s->c;
	bool capped = s->capped;
	pthread_mutex_unlock(&w->lock);
	if (!fresh) {
		/* Counted outside the lock: a slow store holds up only this
		 * workspace's answer, not every one. */
		int rc = count(r, &c, &capped);
		if (rc < 0)
			return rc;
		pthread_mutex_lock(&w->lock);
		s = slot_of(w, r->workspace);
		s->c = c, s->capped = capped, s->read_ms = now;
		pthread_mutex_unlock(&w->lock);
	}
	if (!capped)
		return 1;
	*out = c;
	return 0;
}

void windows_note(struct windows *w, const char *ws, const struct window_count *c)
{
	if (!w || !ws || !ws[0])
		return;
	pthread_mutex_lock(&w->lock);
	struct slot *s = slot_of(w, ws);
	s->c = *c, s->capped = c->limit > 0, s->read_ms = wall_ms();
	pthread_mutex_unlock(&w->lock);
}
