/*
 * ws_caps: a workspace's caps on what it starts (host.h struct ws_caps),
 * counted exactly. The count and the reservation happen under h->lock,
 * which host_link also holds when a reserved sandbox joins the list, so
 * every sandbox is counted once at every moment: as pending in its
 * workspace's tally from admission until it is linked, then by its state
 * in the list. Creates per window are the creation times of the last
 * window, loaded from the store when a workspace is first seen (a
 * restarted kilnd keeps counting) and kept here after.
 */
#include "host/host_int.h"
#include "common/err.h"
#include "common/retry.h"
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TALLY_TIMES WS_WINDOW_MAX

struct ws_tally {
	char ws[ID_MAX];
	int pending;			/* admitted, not yet linked; or waking */
	int running_cap;		/* as of the last admission (0: none) */
	int64_t times[TALLY_TIMES];	/* creation times (wall ms), a ring */
	int first, n;
	struct ws_tally *next;
};

/* The workspace's tally, made (and loaded from the store) on first use;
 * NULL when out of memory. Under h->lock. */
static struct ws_tally *tally_of(struct host *h, const char *ws, int64_t window_ms)
{
	struct ws_tally *t;
	for (t = h->tallies; t; t = t->next)
		if (!strcmp(t->ws, ws))
			return t;
	if (!(t = calloc(1, sizeof *t)))
		return NULL;
	snprintf(t->ws, sizeof t->ws, "%s", ws);
	int64_t since = wall_ms() - (window_ms > 0 ? window_ms : 0);
	if (store_creates_since(h->store, ws, since, t->times, TALLY_TIMES, &t->n) < 0)
		t->n = 0;	/* counted from now on */
	t->next = h->tallies;
	h->tallies = t;
	return t;
}

/* Forget the creates that left the window. */
static void tally_expire(struct ws_tally *t, int64_t now, int64_t window_ms)
{
	while (t->n && t->times[t->first] <= now - window_ms) {
		t->first = (t->first + 1) % TALLY_TIMES;
		t->n--;
	}
}

static void tally_push(struct ws_tally *t, int64_t now)
{
	if (t->n == TALLY_TIMES) {	/* the oldest goes */
		t->first = (t->first + 1) % TALLY_TIMES;
		t->n--;
	}
	t->times[(t->first + t->n++) % TALLY_TIMES] = now;
}

/* The workspace's sandboxes creating or running in the list; *starting
 * (may be NULL) those of them still creating. */
static int running_of(struct host *h, const char *ws, int *starting)
{
	int n = 0, s = 0;
	for (struct sandbox *sb = h->list; sb; sb = sb->next) {
		pthread_mutex_lock(&sb->lock);
		if (!strcmp(sb->row.workspace, ws) &&
		    (sb->row.state == SBX_CREATING || sb->row.state == SBX_RUNNING ||
		     sb->row.state == SBX_PAUSED))
			n++, s += sb->row.state == SBX_CREATING;
		pthread_mutex_unlock(&sb->lock);
	}
	if (starting)
		*starting = s;
	return n;
}

static int refuse(struct ws_caps_report *rep, const char *limit, int64_t value, int64_t retry_ms,
		  const char *fmt, long long have)
{
	snprintf(rep->limit, sizeof rep->limit, "%s", limit);
	rep->value = value;
	rep->retry_after_ms = retry_ms;
	return errf(EDQUOT, fmt, have, (long long)value);
}

/* The check and the reservation, under h->lock. */
static int admit_locked(struct host *h, const char *ws, const struct ws_caps *caps,
			struct ws_caps_report *rep, int n, int vcpus, int64_t mem_each)
{
	if (caps->vcpus && vcpus > caps->vcpus)
		return refuse(rep, "vcpus", caps->vcpus, 0,
			      "a sandbox of %lld vCPUs is over this workspace's limit of %lld", vcpus);
	if (caps->memory_mib && mem_each > caps->memory_mib)
		return refuse(rep, "memory_mib", caps->memory_mib, 0,
			      "a sandbox of %lld MiB is over this workspace's limit of %lld MiB", mem_each);
	struct ws_tally *t = tally_of(h, ws, caps->window_ms);
	if (!t)
		return errf(ENOMEM, "out of memory");
	int64_t now = wall_ms();
	if (caps->window_ms > 0)
		tally_expire(t, now, caps->window_ms);
	rep->creates_used = t->n;
	rep->reset_ms = t->n ? t->times[t->first] + caps->window_ms : 0;
	t->running_cap = caps->running;
	if (caps->running) {
		int starting;
		int have = running_of(h, ws, &starting) + t->pending;
		/* pending: admitted, not yet in the list: starting too. */
		if (have + n > caps->running)
			return refuse(rep, "running", caps->running, retry_running_ms(starting + t->pending),
				      "%lld sandboxes of this workspace are running or starting; its limit is %lld",
				      have);
	}
	if (caps->creates && t->n + n > caps->creates) {
		/* Room for n once the oldest n - (cap - count) have left. */
		int k = t->n + n - caps->creates - 1;
		int64_t at = k < t->n ? t->times[(t->first + k) % TALLY_TIMES] + caps->window_ms : now;
		return refuse(rep, "creates", caps->creates, at > now ? at - now : 1,
			      "%lld sandboxes were made in this workspace in the window; its limit is %lld",
			      t->n);
	}
	t->pending += n;
	for (int i = 0; i < n; i++)
		tally_push(t, now);
	rep->creates_used = t->n;
	rep->reset_ms = t->times[t->first] + caps->window_ms;
	return 0;
}

int host_admit_ws(struct host *h, const char *ws, const struct ws_caps *caps,
		  struct ws_caps_report *rep, int n, int vcpus, int64_t mem_each)
{
	if (caps) {
		memset(rep, 0, sizeof *rep);
		pthread_mutex_lock(&h->lock);
		int rc = admit_locked(h, ws, caps, rep, n, vcpus, mem_each);
		pthread_mutex_unlock(&h->lock);
		if (rc < 0)
			return rc;
	}
	int rc = host_admit(h, n, n * mem_each, true);
	if (rc < 0 && caps)
		host_ws_unused(h, ws, n);	/* not made: not a create either */
	return rc;
}

int host_ws_seed(struct host *h, const char *ws, const struct ws_caps *caps)
{
	pthread_mutex_lock(&h->lock);
	struct ws_tally *t = tally_of(h, ws, caps->window_ms);
	if (t && !t->running_cap)
		t->running_cap = caps->running;
	pthread_mutex_unlock(&h->lock);
	return t ? 0 : errf(ENOMEM, "out of memory");
}

int ws_wake_reserve(struct host *h, const char *ws)
{
	pthread_mutex_lock(&h->lock);
	struct ws_tally *t = h->tallies;
	while (t && strcmp(t->ws, ws))
		t = t->next;
	int rc = 0;
	if (t && t->running_cap) {
		int have = running_of(h, ws, NULL) + t->pending;
		if (have + 1 > t->running_cap)
			rc = errf(EDQUOT, "waking it would make %d sandboxes of this workspace running or "
				  "starting; its limit is %d (delete or hibernate one first)", have + 1,
				  t->running_cap);
		else
			t->pending++, rc = 1;
	}
	pthread_mutex_unlock(&h->lock);
	return rc;
}

void ws_wake_release(struct host *h, const char *ws)
{
	pthread_mutex_lock(&h->lock);
	for (struct ws_tally *t = h->tallies; t; t = t->next)
		if (!strcmp(t->ws, ws)) {
			t->pending--;
			break;
		}
	pthread_mutex_unlock(&h->lock);
}

void host_ws_unused(struct host *h, const char *ws, int n)
{
	if (!ws || n <= 0)
		return;
	pthread_mutex_lock(&h->lock);
	for (struct ws_tally *t = h->tallies; t; t = t->next) {
		if (strcmp(t->ws, ws))
			continue;
		t->pending -= n;
		/* The newest n creates go (any n of the newest: all of
		 * about now). */
		t->n = t->n > n ? t->n - n : 0;
		break;
	}
	pthread_mutex_unlock(&h->lock);
}

/* host_link's part, under h->lock: a reserved sandbox is counted by the
 * list from now on. */
void ws_linked(struct host *h, struct sandbox *sb)
{
	if (!sb->ws_pending)
		return;
	sb->ws_pending = false;
	for (struct ws_tally *t = h->tallies; t; t = t->next)
		if (!strcmp(t->ws, sb->row.workspace)) {
			t->pending--;
			return;
		}
}

void ws_tallies_free(struct host *h)
{
	while (h->tallies) {
		struct ws_tally *t = h->tallies;
		h->tallies = t->next;
		free(t);
	}
}
