#include "ops/credit.h"
#include "ops/billing.h"
#include "hostif/hostif.h"
#include "common/err.h"
#include "common/log.h"
#include "common/periodic.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int add_hour(void *ctx, const struct usage_hour *u)
{
	struct usage_hour *t = ctx;
	t->cpu_us += u->cpu_us, t->mem_mib_s += u->mem_mib_s, t->run_ms += u->run_ms;
	return 0;
}

int ops_month_usage(struct store *st, const char *workspace, int64_t now_ms, struct usage_hour *sum)
{
	int64_t start, end;
	month_bounds(now_ms, &start, &end);
	memset(sum, 0, sizeof *sum);
	return store_usage_hours(st, workspace, NULL, start, end, false, add_hour, sum);
}

int64_t ops_usage_cost(const struct prices *p, const struct usage_hour *u)
{
	return cost_cpu(p, u->cpu_us) + cost_mem(p, u->mem_mib_s);
}

/* 0 or -E_CREDIT_SPENT for the workspace of plan p. */
static int check(struct store *st, const struct plans *plans, const char *ws, const struct plan *p)
{
	int64_t credit = p->limits.credit_microdollars;
	if (!credit || !plans)
		return 0;
	struct usage_hour u;
	int rc = ops_month_usage(st, ws, wall_ms(), &u);
	if (rc < 0)
		return rc;
	int64_t cost = ops_usage_cost(&plans->prices, &u);
	if (cost < credit)
		return 0;
	return errf(E_CREDIT_SPENT, "this month's usage costs $%lld.%06lld, plan %s's credit of $%lld.%06lld: "
		    "nothing runs again until next month or a larger credit",
		    (long long)(cost / 1000000), (long long)(cost % 1000000), p->name,
		    (long long)(credit / 1000000), (long long)(credit % 1000000));
}

int ops_credit_check(const struct ops_caller *c)
{
	if (!c->plans || !c->store)
		return 0;
	struct plan p;
	int rc = ops_workspace_plan(c, &p);
	return rc < 0 ? rc : check(c->store, c->plans, c->workspace, &p);
}

/* ---- the watch ---------------------------------------------------------------- */

#define WATCH_WORKSPACES 256	/* looked at per pass (the rest at the next) */

static struct {
	struct periodic thread;
	struct store *store;
	struct hostif *hostif;
	const struct plans *plans;
} w;

struct running {
	char ws[WATCH_WORKSPACES][ID_MAX];
	int n;
};

/* The workspaces with a running sandbox, each once. */
static int note_running(void *ctx, const struct sbx_row *r)
{
	struct running *a = ctx;
	if (r->state != SBX_RUNNING && r->state != SBX_PAUSED)	/* paused: memory billed */
		return 0;
	for (int i = 0; i < a->n; i++)
		if (!strcmp(a->ws[i], r->workspace))
			return 0;
	if (a->n < WATCH_WORKSPACES)
		snprintf(a->ws[a->n++], ID_MAX, "%s", r->workspace);
	return 0;
}

struct to_hibernate {
	char id[64][ID_MAX];
	int n;
};

static int note_sandbox(void *ctx, const struct sbx_row *r)
{
	struct to_hibernate *h = ctx;
	if ((r->state == SBX_RUNNING || r->state == SBX_PAUSED) && h->n < 64)
		snprintf(h->id[h->n++], ID_MAX, "%s", r->id);
	return 0;
}

/* must_stop: whether workspace ws may run nothing now, and why: the
 * operator suspended it, or its plan's credit is spent. */
static bool must_stop(const char *ws, char *why, size_t cap)
{
	bool suspended = false;
	if (store_workspace_suspended(w.store, ws, &suspended) == 0 && suspended) {
		snprintf(why, cap, "the operator suspended the workspace");
		return true;
	}
	struct ops_caller c = { .hostif = w.hostif, .store = w.store, .plans = w.plans, .workspace = ws };
	struct plan p;
	if (ops_workspace_plan(&c, &p) < 0 || check(w.store, w.plans, ws, &p) != -E_CREDIT_SPENT)
		return false;
	snprintf(why, cap, "%s", errmsg());
	return true;
}

/* One look at every workspace with a running sandbox. */
static void pass(void)
{
	static struct running a;	/* one watch thread: no need for 5 KiB of stack */
	a.n = 0;
	if (hostif_each(w.hostif, NULL, note_running, &a) < 0)
		return;
	for (int i = 0; i < a.n; i++) {
		char why[256];
		if (!must_stop(a.ws[i], why, sizeof why))
			continue;
		struct to_hibernate h = { .n = 0 };
		if (hostif_each(w.hostif, a.ws[i], note_sandbox, &h) < 0)
			continue;
		for (int k = 0; k < h.n; k++) {
			/* now: a command running on must not run on past it. */
			if (hostif_hibernate(w.hostif, a.ws[i], h.id[k], true, NULL) == 0)
				log_info("watch: workspace %s: sandbox %s hibernated (%s)", a.ws[i], h.id[k], why);
			else
				log_warn("watch: workspace %s: hibernating sandbox %s: %s", a.ws[i], h.id[k], errmsg());
		}
	}
}

static void watch(void *ctx)
{
	(void)ctx;
	pass();
}

int credit_watch_start(struct store *st, struct hostif *hi, const struct plans *plans, int period_ms)
{
	w.store = st, w.hostif = hi, w.plans = plans;
	return periodic_start(&w.thread, "credit watch", period_ms > 0 ? period_ms : 10000, watch, NULL);
}

void credit_watch_kick(void)
{
	periodic_kick(&w.thread);
}

void credit_watch_stop(void)
{
	periodic_stop(&w.thread);
}
