/*
 * h_admin_plans: the operator's plans (docs/billing.md "Plans"), with an
 * operator credential (routes.h ROUTE_ADMIN).
 *
 *   GET /v1/admin/plans          every plan: the server's (shipped, plans
 *                                file) and the operator's, with the limits
 *                                in force
 *   GET /v1/admin/plans/{name}
 *   PUT /v1/admin/plans/{name}   {"limits": {...}} -> 200, or 201 for a plan
 *                                that did not exist
 *   DELETE /v1/admin/plans/{name} the operator's own plan -> 204; 409 while
 *                                a workspace is on it (naming how many) and
 *                                for the server's plans (shipped, plans
 *                                file, the default), 404 for no such plan
 *
 * A PUT's limits are stored (ops/plan.h plans_resolve) over the server's
 * plan of that name, each named limit replacing the plan's; what it does
 * not name keeps the server's value ({} gives the server's plan back);
 * a plan the server does not have is made, its unnamed limits 0 (none).
 * The store holds it, so it holds for every workspace on the plan at
 * their next request, on every API replica, and across restarts. Each
 * PUT is written to the operator's audit log (GET /v1/admin/audit).
 */
#include "api/api.h"
#include "api/audit.h"
#include "api/handlers.h"
#include "api/http.h"
#include "api/render.h"
#include "ops/plan.h"
#include "ops/validate.h"
#include "store/store.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct plans *server_plans(struct req *r)
{
	static struct plans none;	/* zeroed: no plans, "" the default */
	return r->api->plans ? r->api->plans : &none;
}

/* The plan called name as in force, with what the operator set over it
 * (NULL when nothing); -ENOENT when there is no such plan. */
static int plan_json(struct req *r, const char *name, const char *set, int64_t updated_ms, json_t **out)
{
	const struct plans *ps = server_plans(r);
	struct plan p;
	int rc = plans_resolve(ps, r->api->store, name, &p, NULL);
	if (rc < 0)
		return rc;
	json_t *own = set ? json_loads(set, 0, NULL) : NULL;
	*out = json_pack("{s:s,s:o,s:o,s:b,s:b,s:o}", "name", p.name, "limits", plan_limits_json(&p.limits),
			 "operator_limits", own ? own : json_null(), "server_plan", plans_find(ps, name) != NULL,
			 "default", strcmp(ps->default_plan, name) == 0, "updated_at",
			 set ? render_time(updated_ms) : json_null());
	return *out ? 0 : errf(ENOMEM, "out of memory");
}

/* ---- GET /v1/admin/plans ------------------------------------------------------ */

/* The operator's plans, read whole before any is resolved (the store may
 * not be called from inside its walk). */
struct set {
	char name[PLAN_NAME_MAX];
	char *limits;
	int64_t updated_ms;
};

struct sets {
	struct set *v;
	size_t n, cap;
};

static int collect(void *ctx, const char *name, const char *limits, int64_t updated_ms)
{
	struct sets *s = ctx;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct set *v = realloc(s->v, cap * sizeof *v);
		if (!v)
			return errf(ENOMEM, "out of memory");
		s->v = v, s->cap = cap;
	}
	struct set *one = &s->v[s->n];
	snprintf(one->name, sizeof one->name, "%s", name);
	if (!(one->limits = strdup(limits)))
		return errf(ENOMEM, "out of memory");
	one->updated_ms = updated_ms;
	s->n++;
	return 0;
}

static const struct set *set_of(const struct sets *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i].name, name))
			return &s->v[i];
	return NULL;
}

static int add(struct req *r, json_t *arr, const char *name, const struct set *set)
{
	json_t *j;
	int rc = plan_json(r, name, set ? set->limits : NULL, set ? set->updated_ms : 0, &j);
	if (rc < 0)
		return rc;
	return json_array_append_new(arr, j) < 0 ? errf(ENOMEM, "out of memory") : 0;
}

int h_admin_plans(struct req *r)
{
	const struct plans *ps = server_plans(r);
	struct sets s = { 0 };
	json_t *arr = json_array();
	int rc = arr ? store_plandef_each(r->api->store, collect, &s) : errf(ENOMEM, "out of memory");
	/* The server's first, in their order; then the operator's own. */
	for (int i = 0; rc == 0 && i < ps->n; i++)
		rc = add(r, arr, ps->plan[i].name, set_of(&s, ps->plan[i].name));
	for (size_t i = 0; rc == 0 && i < s.n; i++)
		if (!plans_find(ps, s.v[i].name))
			rc = add(r, arr, s.v[i].name, &s.v[i]);
	for (size_t i = 0; i < s.n; i++)
		free(s.v[i].limits);
	free(s.v);
	if (rc < 0) {
		json_decref(arr);
		return reply_errno(r, rc);
	}
	return reply_json(r, 200, json_pack("{s:o,s:s}", "plans", arr, "default_plan", ps->default_plan));
}

/* ---- GET /v1/admin/plans/{name} ------------------------------------------------- */

/* The plan's answer (status), what the operator set read from the store. */
static int reply_plan(struct req *r, int status, const char *name)
{
	char *set = NULL;
	int64_t updated_ms = 0;
	int rc = plan_name_ok(name) ? store_plandef_get(r->api->store, name, &set, &updated_ms) : -ENOENT;
	json_t *j = NULL;
	if (rc == 0 || rc == -ENOENT)
		rc = plan_json(r, name, set, updated_ms, &j);
	free(set);
	if (rc == -ENOENT)
		return reply_error(r, 404, "not_found", "no plan '%.32s' on this server (GET /v1/admin/plans "
				   "lists them; PUT makes one)", name);
	return rc < 0 ? reply_errno(r, rc) : reply_json(r, status, j);
}

int h_admin_plan_get(struct req *r)
{
	return reply_plan(r, 200, r->params[0]);
}

/* ---- PUT /v1/admin/plans/{name} --------------------------------------------------- */

int h_admin_plan_put(struct req *r)
{
	static const char *const allowed[] = { "limits", NULL };
	const char *name = r->params[0];
	if (!plan_name_ok(name))
		return reply_error(r, 400, "invalid_request", "plan name '%.64s': 1 to %d of a-z, 0-9, - and _",
				   name, PLAN_NAME_MAX - 1);
	int rc = v_known_keys(r->json, allowed);
	if (rc < 0)
		return reply_errno(r, rc);
	json_t *l = r->json ? json_object_get(r->json, "limits") : NULL;
	if (!l || json_is_null(l))
		return reply_error(r, 400, "invalid_request", "field 'limits' is required: a JSON object of "
				   "limits, e.g. {\"running\": 5} ({} gives a server plan its own limits back)");
	struct plan_limits scratch = { 0 };
	if ((rc = plan_limits_apply(&scratch, l, "field 'limits'")) < 0)
		return reply_errno(r, rc);
	struct plan was;
	rc = plans_resolve(server_plans(r), r->api->store, name, &was, NULL);
	if (rc < 0 && rc != -ENOENT)
		return reply_errno(r, rc);
	bool made = rc == -ENOENT;
	char *text = json_dumps(l, JSON_COMPACT | JSON_SORT_KEYS);
	rc = text ? store_plandef_set(r->api->store, name, text) : errf(ENOMEM, "out of memory");
	free(text);
	if (rc < 0)
		return reply_errno(r, rc);
	audit_operator(r, AUDIT_OPERATOR_LOG, made ? 201 : 200, NULL);
	return reply_plan(r, made ? 201 : 200, name);
}

/* ---- DELETE /v1/admin/plans/{name} ------------------------------------------------ */

/* Only a plan the operator made through the API goes: the server's plans
 * (shipped or from its plans file) are its configuration, and a workspace
 * with no plan of its own is on the default. A plan in use stays until
 * its workspaces are moved (PATCH /v1/admin/workspaces/NAME {"plan"}) or
 * deleted; the store checks that and deletes under one lock, so no
 * workspace is put on the plan as it goes (store_plandef_delete). */
int h_admin_plan_delete(struct req *r)
{
	const struct plans *ps = server_plans(r);
	const char *name = r->params[0];
	if (!plan_name_ok(name))
		return reply_error(r, 404, "not_found", "no plan '%.32s' on this server (GET /v1/admin/plans "
				   "lists them)", name);
	if (!strcmp(ps->default_plan, name))
		return reply_error(r, 409, "conflict", "plan '%s' is the server's default plan (workspaces "
				   "with no plan of their own are on it): it cannot be deleted", name);
	if (plans_find(ps, name))
		return reply_error(r, 409, "conflict", "plan '%s' is one of the server's plans (shipped or "
				   "kilnd --plans): it cannot be deleted; PUT {\"limits\": {}} gives it its "
				   "own limits back", name);
	int64_t in_use = 0;
	int rc = store_plandef_delete(r->api->store, name, &in_use);
	if (rc == -EBUSY)
		return reply_error(r, 409, "conflict", "plan '%s' is in use by %lld workspace%s: move %s to "
				   "another plan (PATCH /v1/admin/workspaces/NAME {\"plan\": ...}) or delete "
				   "%s first", name, (long long)in_use, in_use == 1 ? "" : "s",
				   in_use == 1 ? "it" : "them", in_use == 1 ? "it" : "them");
	if (rc == -ENOENT)
		return reply_error(r, 404, "not_found", "no plan '%.32s' on this server (GET /v1/admin/plans "
				   "lists them)", name);
	if (rc < 0)
		return reply_errno(r, rc);
	audit_operator(r, AUDIT_OPERATOR_LOG, 204, NULL);
	return reply_empty(r, 204);
}
