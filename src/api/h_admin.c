/*
 * h_admin: the operator's API (docs/security.md "Operators"), called with
 * an operator credential (`kilnd admin create`; routes.h ROUTE_ADMIN),
 * never a workspace's key. Workspaces are named by their name.
 *
 *   GET    /v1/admin/workspaces              each live workspace: plan, own
 *                                            limits, suspended, live sandboxes,
 *                                            this month's cost
 *   POST   /v1/admin/workspaces              {"name", "plan"?, "limits"?} -> 201
 *   GET    /v1/admin/workspaces/{name}
 *   PATCH  /v1/admin/workspaces/{name}       {"plan"?, "limits"?, "suspended"?}
 *   DELETE /v1/admin/workspaces/{name}       409 while it has live sandboxes;
 *                                            else its keys revoked, it deleted
 *   GET    /v1/admin/workspaces/{name}/keys  as GET /v1/keys, of that workspace
 *   POST   /v1/admin/workspaces/{name}/keys  as POST /v1/keys, for that workspace
 *   DELETE /v1/admin/workspaces/{name}/keys/{id}  as DELETE /v1/keys/{id}
 *   GET    /v1/admin/usage?from=&to=         metered usage per workspace, priced
 *   (plans: h_admin_plans.c; the operator's audit log: h_audit.c)
 *
 * Each change is written to the target workspace's audit log, the actor
 * the operator credential (its id and prefix).
 */
#include "api/api.h"
#include "api/audit.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "ops/billing.h"
#include "ops/credit.h"
#include "ops/ops.h"
#include "ops/plan.h"
#include "ops/validate.h"
#include "store/store.h"
#include "common/err.h"
#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The workspace as the operator sees it. */
static int workspace_json(struct req *r, const struct workspace_row *w, json_t **out)
{
	struct store *st = r->api->store;
	char plan[NAME_MAX_LEN];
	char *limits_text = NULL;
	int rc = store_plan_get(st, w->id, plan, &limits_text);
	if (rc == -ENOENT) {
		snprintf(plan, sizeof plan, "%s", r->api->plans ? r->api->plans->default_plan : "");
		rc = 0;
	}
	if (rc < 0)
		return rc;
	json_t *limits = limits_text ? json_loads(limits_text, 0, NULL) : NULL;
	free(limits_text);
	int64_t live = 0;
	struct usage_hour month;
	if ((rc = store_workspace_live(st, w->id, &live)) < 0 ||
	    (rc = ops_month_usage(st, w->id, wall_ms(), &month)) < 0) {
		json_decref(limits);
		return rc;
	}
	*out = json_pack("{s:s,s:s,s:s,s:o,s:b,s:o,s:I,s:I}", "id", w->id, "name", w->name, "plan", plan,
			 "limits", limits ? limits : json_object(), "suspended", w->suspended, "created_at",
			 render_time(w->created_ms), "live_sandboxes", (json_int_t)live,
			 "month_cost_microdollars", (json_int_t)ops_usage_cost(req_prices(r), &month));
	return *out ? 0 : errf(ENOMEM, "out of memory");
}

static int reply_workspace(struct req *r, int status, const struct workspace_row *w)
{
	json_t *j;
	int rc = workspace_json(r, w, &j);
	return rc < 0 ? reply_errno(r, rc) : reply_json(r, status, j);
}

/* The live workspace the path names, or an answer already sent (404). */
static int find(struct req *r, struct workspace_row *w, int *answered)
{
	int rc = store_workspace_find(r->api->store, r->params[0], w);
	if (rc < 0)
		*answered = reply_errno(r, rc);
	return rc;
}

/* Every live workspace, read whole before any is looked into: the store
 * may not be called again from inside its walk (SQLite's one connection). */
struct rows {
	struct workspace_row *v;
	size_t n, cap;
};

static int collect(void *ctx, const struct workspace_row *w)
{
	struct rows *rs = ctx;
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 16;
		struct workspace_row *v = realloc(rs->v, cap * sizeof *v);
		if (!v)
			return errf(ENOMEM, "out of memory");
		rs->v = v, rs->cap = cap;
	}
	rs->v[rs->n++] = *w;
	return 0;
}

typedef int workspace_fn(void *ctx, const struct workspace_row *w);

static int each_workspace(struct req *r, workspace_fn *fn, void *ctx)
{
	struct rows rs = { 0 };
	int rc = store_workspace_each(r->api->store, collect, &rs);
	for (size_t i = 0; rc == 0 && i < rs.n; i++)
		rc = fn(ctx, &rs.v[i]);
	free(rs.v);
	return rc;
}

/* ---- GET /v1/admin/workspaces -------------------------------------------- */

struct list {
	struct req *r;
	json_t *arr;
};

static int one_workspace(void *ctx, const struct workspace_row *w)
{
	struct list *l = ctx;
	json_t *j;
	int rc = workspace_json(l->r, w, &j);
	if (rc < 0)
		return rc;
	return json_array_append_new(l->arr, j) < 0 ? errf(ENOMEM, "out of memory") : 0;
}

int h_admin_ws_list(struct req *r)
{
	struct list l = { r, json_array() };
	if (!l.arr)
		return reply_error(r, 500, "internal", "out of memory");
	int rc = each_workspace(r, one_workspace, &l);
	if (rc < 0) {
		json_decref(l.arr);
		return reply_errno(r, rc);
	}
	return reply_json(r, 200, json_pack("{s:o}", "workspaces", l.arr));
}

int h_admin_ws_get(struct req *r)
{
	struct workspace_row w;
	int answered;
	if (find(r, &w, &answered) < 0)
		return answered;
	return reply_workspace(r, 200, &w);
}

/* ---- plan and limits, as `kilnd workspace plan` checks them ---------------- */

struct plan_change {
	const char *plan;		/* NULL: keep */
	bool set_limits;		/* limits given */
	char *limits_text;		/* malloc'd compact JSON */
};

/* "plan" and "limits" of the body; -EINVAL naming the field. */
static int plan_change_parse(struct req *r, struct plan_change *pc)
{
	int rc = v_str(r->json, "plan", false, PLAN_NAME_MAX - 1, &pc->plan);
	if (rc < 0)
		return rc;
	struct plan known;
	if (pc->plan && (!r->api->plans || plans_resolve(r->api->plans, r->api->store, pc->plan, &known, NULL) < 0))
		return errf(EINVAL, "field 'plan': no plan '%s' on this server (GET /v1/admin/plans lists them)",
			    pc->plan);
	/* null is absent, as everywhere in the API; {} drops its own limits. */
	json_t *l = r->json ? json_object_get(r->json, "limits") : NULL;
	if (!l || json_is_null(l))
		return 0;
	pc->set_limits = true;
	struct plan_limits scratch = { 0 };
	if ((rc = plan_limits_apply(&scratch, l, "field 'limits'")) < 0)
		return rc;
	if (!(pc->limits_text = json_dumps(l, JSON_COMPACT | JSON_SORT_KEYS)))
		return errf(ENOMEM, "out of memory");
	return 0;
}

/* Store the change over what the workspace has (its plan kept when only
 * limits change, its limits when only the plan does). */
static int plan_change_apply(struct req *r, const char *wsid, const struct plan_change *pc)
{
	if (!pc->plan && !pc->set_limits)
		return 0;
	char plan[NAME_MAX_LEN];
	char *limits = NULL;
	int rc = store_plan_get(r->api->store, wsid, plan, &limits);
	if (rc == -ENOENT) {
		snprintf(plan, sizeof plan, "%s", r->api->plans ? r->api->plans->default_plan : "");
		rc = 0;
	}
	if (rc < 0)
		return rc;
	const char *to = pc->plan ? pc->plan : plan;
	rc = store_plan_set(r->api->store, wsid, to, pc->set_limits ? pc->limits_text : limits,
			    !r->api->plans || !plans_find(r->api->plans, to));
	free(limits);
	return rc;
}

/* ---- POST /v1/admin/workspaces ---------------------------------------------- */

int h_admin_ws_create(struct req *r)
{
	static const char *const allowed[] = { "name", "plan", "limits", NULL };
	const char *name = NULL;
	struct plan_change pc = { 0 };
	int rc = v_known_keys(r->json, allowed);
	rc = rc ?: v_str(r->json, "name", true, NAME_MAX_LEN - 1, &name);
	if (rc == 0 && !v_is_name(name))
		rc = errf(EINVAL, "field 'name' must be 1 to 16 of a-z, 0-9 and -, not '%s'", name);
	rc = rc ?: plan_change_parse(r, &pc);
	char id[ID_MAX];
	rc = rc ?: store_workspace_create(r->api->store, name, id);
	rc = rc ?: plan_change_apply(r, id, &pc);
	free(pc.limits_text);
	if (rc < 0)
		return reply_errno(r, rc);
	struct workspace_row w;
	if ((rc = store_workspace_find(r->api->store, name, &w)) < 0)
		return reply_errno(r, rc);
	audit_operator(r, w.id, 201, w.id);
	return reply_workspace(r, 201, &w);
}

/* ---- PATCH /v1/admin/workspaces/{name} -------------------------------------- */

int h_admin_ws_patch(struct req *r)
{
	static const char *const allowed[] = { "plan", "limits", "suspended", NULL };
	struct workspace_row w;
	int answered;
	if (find(r, &w, &answered) < 0)
		return answered;
	struct plan_change pc = { 0 };
	bool suspended = w.suspended;
	int rc = v_known_keys(r->json, allowed);
	rc = rc ?: v_bool(r->json, "suspended", &suspended);
	rc = rc ?: plan_change_parse(r, &pc);
	rc = rc ?: plan_change_apply(r, w.id, &pc);
	free(pc.limits_text);
	if (rc == 0 && suspended != w.suspended)
		rc = store_workspace_suspend(r->api->store, w.id, suspended);
	if (rc < 0)
		return reply_errno(r, rc);
	/* Its running sandboxes stop now: the watch hibernates them. */
	if (suspended && !w.suspended)
		credit_watch_kick();
	w.suspended = suspended;
	audit_operator(r, w.id, 200, NULL);
	return reply_workspace(r, 200, &w);
}

/* ---- DELETE /v1/admin/workspaces/{name} ------------------------------------- */

int h_admin_ws_delete(struct req *r)
{
	struct workspace_row w;
	int answered;
	if (find(r, &w, &answered) < 0)
		return answered;
	int rc = store_workspace_delete(r->api->store, w.id);
	if (rc < 0)
		return reply_errno(r, rc);
	audit_operator(r, w.id, 204, NULL);
	return reply_empty(r, 204);
}

/* ---- POST /v1/admin/workspaces/{name}/keys ---------------------------------- */

int h_admin_ws_key(struct req *r)
{
	struct workspace_row w;
	int answered;
	if (find(r, &w, &answered) < 0)
		return answered;
	int ret = key_create_reply(r, w.id);
	if (r->status == 201)
		audit_operator(r, w.id, 201, r->created_id);
	return ret;
}

int h_admin_ws_keys(struct req *r)
{
	struct workspace_row w;
	int answered;
	if (find(r, &w, &answered) < 0)
		return answered;
	return key_list_reply(r, w.id);
}

int h_admin_ws_key_delete(struct req *r)
{
	struct workspace_row w;
	int answered;
	if (find(r, &w, &answered) < 0)
		return answered;
	int ret = key_delete_reply(r, w.id, r->params[1]);
	if (r->status == 204)
		audit_operator(r, w.id, 204, NULL);
	return ret;
}

/* ---- GET /v1/admin/usage ------------------------------------------------------ */

struct usage_walk {
	struct req *r;
	int64_t from, to;
	int64_t cpu_us, mem_mib_s, run_ms;	/* one workspace's */
	int64_t t_cpu_us, t_mem_mib_s, t_run_ms;
	json_t *arr;
};

static int add_hour(void *ctx, const struct usage_hour *u)
{
	struct usage_walk *w = ctx;
	w->cpu_us += u->cpu_us, w->mem_mib_s += u->mem_mib_s, w->run_ms += u->run_ms;
	return 0;
}

static json_t *totals_json(const struct prices *p, int64_t cpu_us, int64_t mem_mib_s, int64_t run_ms)
{
	int64_t cpu = cost_cpu(p, cpu_us), mem = cost_mem(p, mem_mib_s);
	return json_pack("{s:f,s:f,s:f,s:I}", "active_vcpu_seconds", (double)cpu_us / 1e6,
			 "memory_gib_hours", (double)mem_mib_s / 1024 / 3600, "running_seconds",
			 (double)run_ms / 1e3, "cost_microdollars", (json_int_t)(cpu + mem));
}

static int usage_of(void *ctx, const struct workspace_row *ws)
{
	struct usage_walk *w = ctx;
	w->cpu_us = w->mem_mib_s = w->run_ms = 0;
	int rc = store_usage_hours(w->r->api->store, ws->id, NULL, w->from, w->to, false, add_hour, w);
	if (rc < 0)
		return rc;
	const struct prices *p = req_prices(w->r);
	json_t *j = totals_json(p, w->cpu_us, w->mem_mib_s, w->run_ms);
	if (!j || json_object_set_new(j, "id", json_string(ws->id)) < 0 ||
	    json_object_set_new(j, "name", json_string(ws->name)) < 0 || json_array_append_new(w->arr, j) < 0)
		return errf(ENOMEM, "out of memory");
	w->t_cpu_us += w->cpu_us, w->t_mem_mib_s += w->mem_mib_s, w->t_run_ms += w->run_ms;
	return 0;
}

int h_admin_usage(struct req *r)
{
	const char *q_from, *q_to;
	if (req_query_exact(r, "from", &q_from) < 0 || req_query_exact(r, "to", &q_to) < 0)
		return reply_error(r, 400, "invalid_request", "a query parameter holds a NUL byte");
	int64_t now = wall_ms(), month_end;
	struct usage_walk w = { .r = r };
	month_bounds(now, &w.from, &month_end);
	w.to = now / 3600000 * 3600000 + 3600000;	/* through the hour under way */
	if ((q_from && query_time(q_from, "from", &w.from) < 0) || (q_to && query_time(q_to, "to", &w.to) < 0))
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	if (w.to <= w.from)
		return reply_error(r, 400, "invalid_request", "'to' must come after 'from'");
	if (!(w.arr = json_array()))
		return reply_error(r, 500, "internal", "out of memory");
	int rc = each_workspace(r, usage_of, &w);
	if (rc < 0) {
		json_decref(w.arr);
		return reply_errno(r, rc);
	}
	return reply_json(r, 200, json_pack("{s:o,s:o,s:o,s:o}", "from", render_time(w.from), "to",
		render_time(w.to), "workspaces", w.arr, "total",
		totals_json(req_prices(r), w.t_cpu_us, w.t_mem_mib_s, w.t_run_ms)));
}
