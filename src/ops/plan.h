/*
 * plan: what a workspace may start (docs/billing.md). Every workspace has
 * a plan: its own (`kilnd workspace plan`, in the store) or the server's
 * default. A plan is a set of limits; the shipped plans are free, pro,
 * team and enterprise, the operator's plans file (kilnd --plans) changes
 * them or adds others, the operator's API (PUT /v1/admin/plans/NAME)
 * writes limits into the store over either or makes new plans, and a
 * workspace may carry limits of its own over its plan's. The limits become the host's ws_caps (counted exactly
 * there) and the cap on ttl_seconds.
 */
#ifndef KILN_OPS_PLAN_H
#define KILN_OPS_PLAN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops/billing.h"

#define PLAN_NAME_MAX 32
#define PLANS_MAX 32

/* 0 is no limit, for each. */
struct plan_limits {
	int64_t running;		/* sandboxes creating or running at once */
	int64_t creates_per_hour;	/* creates and fork children, a sliding hour */
	int64_t vcpus;			/* of one sandbox */
	int64_t memory_mib;		/* of one sandbox */
	int64_t max_ttl_seconds;	/* the longest ttl_seconds (0: the server's) */
	/* The TTL rule (0 or 1 each): */
	int64_t ttl_absolute;		/* the TTL counts from creation, busy or not */
	int64_t idle_hibernate;		/* idle for its TTL: hibernated, not deleted... */
	int64_t hibernated_retention_seconds;	/* ...then deleted after this (0: kept) */
	/* Usage a month may cost, micro-dollars (ops/billing.h): the free
	 * plan's included credit, which is also all it may use (0: no cap,
	 * what is used is billed). */
	int64_t credit_microdollars;
	int64_t no_workspace_mcp;	/* 1: the workspace MCP (/mcp) is not in the plan */
	/* What a workspace keeps on disk after its compute stops (ops/keep.c): */
	int64_t hibernated;		/* sandboxes hibernated at once */
	int64_t snapshots;		/* snapshots kept */
	int64_t storage_mib;		/* the disk space those take (and volumes' sizes), MiB */
	int64_t volumes;		/* named volumes kept (docs/api.md "Volumes") */
	int64_t volume_mib;		/* the size of one volume, MiB */
	/* Templates built through the API (docs/templates.md "Limits"): */
	int64_t templates;		/* the workspace's own templates, failed and building ones too */
	int64_t template_builds;	/* its builds running at once */
	int64_t build_seconds;		/* one build's longest run */
	int64_t template_mib;		/* a template's root image, allocated MiB */
	int64_t disk_mib;		/* one sandbox's root disk (a create's disk_mib), MiB */
};

struct plan {
	char name[PLAN_NAME_MAX];
	struct plan_limits limits;
};

struct plans {
	struct plan plan[PLANS_MAX];
	int n;
	char default_plan[PLAN_NAME_MAX];
	int64_t window_ms;		/* the "hour" of creates_per_hour (tests shorten it) */
	struct prices prices;		/* what usage costs (kilnd --price-*) */
};

/* The limits' names, as in JSON and on the command line, NULL-terminated. */
extern const char *const plan_limit_names[];

/* The shipped plans, default_plan the server's default ("enterprise":
 * no limits), the window an hour, the published prices. */
void plans_init(struct plans *p);
/* Read an operator's plans file: {"PLAN": {"LIMIT": N, ...}, ...}; a plan
 * named there that exists is changed, limit by limit; another is added
 * (its unnamed limits 0). -EINVAL naming the file, plan and field. */
int plans_load(struct plans *p, const char *path);
/* The plan called name, or NULL: the server's (shipped or plans file). */
const struct plan *plans_find(const struct plans *p, const char *name);
/* A plan's name: 1 to PLAN_NAME_MAX - 1 of a-z, 0-9, - and _. */
bool plan_name_ok(const char *name);

struct store;
/* The plan called name as in force now: the server's with the operator's
 * limits from the store (st; NULL: none) applied over it, or the
 * operator's alone (its unnamed limits 0). Read from the store at each
 * call, so a change made through any API replica holds at once.
 * *operators (may be NULL): whether the store had limits for it. -ENOENT
 * when neither has the plan. */
int plans_resolve(const struct plans *p, struct store *st, const char *name, struct plan *out,
		  bool *operators);
/* Apply a JSON object of limits over l; -EINVAL naming the bad field (what
 * names where it comes from, for the message). */
int plan_limits_apply(struct plan_limits *l, const json_t *o, const char *what);
json_t *plan_limits_json(const struct plan_limits *l);

#endif
