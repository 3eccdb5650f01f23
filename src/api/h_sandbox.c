/*
 * h_sandbox: create, get, delete, and the lifecycle routes
 * (hibernate, wake, fork, fork_tree, lifecycle, snapshot).
 */
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "api/reply_buf.h"
#include "ops/credit.h"
#include "ops/ops.h"
#include "ops/validate.h"
#include "common/err.h"
#include "store/store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The sandbox's record as the answer (the row is cleared). */
static int reply_sandbox_h(struct req *r, int status, struct sbx_row *row, const char *const (*h)[2])
{
	json_t *j = render_sandbox(row);
	sbx_row_clear(row);
	return reply_json_headers(r, status, h, j);
}

static int reply_sandbox(struct req *r, int status, struct sbx_row *row)
{
	static const char *const none[][2] = { { NULL, NULL } };
	return reply_sandbox_h(r, status, row, none);
}

/* The answer of an operation that gives the sandbox after it: its
 * record, or the operation's error. */
static int reply_changed(struct req *r, int rc, struct sbx_row *row)
{
	return rc < 0 ? reply_errno(r, rc) : reply_sandbox(r, 200, row);
}

int h_sandbox_create(struct req *r)
{
	struct ops_caller c;
	struct ops_quota q;
	struct sbx_row row;
	req_caller_quota(r, &c, &q);
	int rc = ops_create(&c, r->json, &row);
	const char *tmpl = json_string_value(json_object_get(r->json, "template"));
	json_t *names = NULL;
	/* An unknown template's 404 lists the templates that exist; another
	 * 404 (a snapshot, a volume) keeps its own message. */
	if (rc == -ENOENT && tmpl) {
		char why[300];
		snprintf(why, sizeof why, "%s", errmsg());
		if (ops_template_known(c.hostif, c.workspace, tmpl, &names) < 0 && names)
			return reply_template_missing(r, names);
		json_decref(names);
		errf(ENOENT, "%s", why);
	}
	if (rc == -EDQUOT)
		return reply_limit(r, &q);
	/* A cluster's hosts with room still being copied the template's
	 * new version: 503 and when to try again. */
	if (rc == -EAGAIN && q.report.retry_after_ms > 0) {
		char secs[24];
		snprintf(secs, sizeof secs, "%lld", (long long)(q.report.retry_after_ms + 999) / 1000);
		const char *const h[][2] = { { "Retry-After", secs }, { NULL, NULL } };
		return reply_json_headers(r, 503, h, json_pack("{s:{s:s,s:s}}", "error", "code", "no_capacity",
							       "message", errmsg()));
	}
	if (rc < 0)
		return reply_errno(r, rc);
	struct quota_headers qh;
	return reply_sandbox_h(r, 201, &row, quota_headers(r, &q, false, &qh));
}

int h_sandbox_get(struct req *r)
{
	struct sbx_row row;
	int answered;
	if (req_sandbox(r, &row, &answered) < 0)
		return answered;
	return reply_sandbox(r, 200, &row);
}

int h_sandbox_delete(struct req *r)
{
	int answered;
	if (req_sandbox(r, NULL, &answered) < 0)
		return answered;
	int rc = hostif_delete(r->api->hostif, r->workspace, req_sandbox_id(r));
	return rc < 0 ? reply_errno(r, rc) : reply_empty(r, 204);
}

/* The lifecycle routes without parameters take an empty body or {}. */
static int no_fields(struct req *r)
{
	static const char *const none[] = { NULL };
	if (v_known_keys(r->json, none) < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	return -1;
}

/* A lifecycle route's request: no fields, the caller's sandbox. -1 to go
 * on, or the answer sent. */
static int lifecycle_admit(struct req *r)
{
	int answered = no_fields(r);
	if (answered >= 0)
		return answered;
	if (req_sandbox(r, NULL, &answered) < 0)
		return answered;
	return -1;
}

/* hibernate and wake: no parameters, the sandbox after the change. */
static int lifecycle_action(struct req *r,
			    int (*action)(struct hostif *, const char *, const char *, struct sbx_row *))
{
	int answered = lifecycle_admit(r);
	if (answered >= 0)
		return answered;
	struct sbx_row row;
	return reply_changed(r, action(r->api->hostif, r->workspace, req_sandbox_id(r), &row), &row);
}

int h_sandbox_hibernate(struct req *r)
{
	int answered = lifecycle_admit(r);
	if (answered >= 0)
		return answered;
	struct ops_caller c;
	struct ops_quota q;
	struct sbx_row row;
	req_caller_quota(r, &c, &q);
	int rc = ops_hibernate(&c, req_sandbox_id(r), &row);
	return rc == -EDQUOT ? reply_limit(r, &q) : reply_changed(r, rc, &row);
}

int h_sandbox_wake(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	int rc = ops_credit_check(&c);
	return rc < 0 ? reply_errno(r, rc) : lifecycle_action(r, hostif_wake);
}

static int fork_route(struct req *r, bool tree)
{
	struct ops_caller c;
	struct ops_quota q;
	struct ops_forked f;
	int rc = fields_check(ops_fork_fields, r->json, NULL);
	if (rc < 0)
		return reply_errno(r, rc);
	req_caller_quota(r, &c, &q);
	rc = ops_fork(&c, req_sandbox_id(r), r->json, tree, &f);
	if (rc == -EDQUOT && f.made == 0)
		return reply_limit(r, &q);
	if (rc < 0 && f.made == 0)
		return reply_errno(r, rc);
	struct quota_headers qh;
	return reply_json_headers(r, 201, quota_headers(r, &q, false, &qh), forked_json(rc, &f));
}

json_t *forked_json(int rc, struct ops_forked *f)
{
	json_t *a = json_array();
	for (int i = 0; a && i < f->made; i++)
		if (f->kids[i].id[0])
			json_array_append_new(a, render_sandbox(&f->kids[i]));
	ops_forked_clear(f);
	json_t *j = json_pack("{s:o}", "sandboxes", a);
	if (j && rc < 0) {
		/* Some children came up, some did not: say both. */
		json_object_set_new(j, "failed", json_integer(f->count - f->made));
		json_object_set_new(j, "error", json_string(f->why));
	}
	return j;
}

int h_sandbox_fork(struct req *r)
{
	return fork_route(r, false);
}

int h_sandbox_fork_tree(struct req *r)
{
	return fork_route(r, true);
}

struct promote_report {
	json_t *deleted, *failed;
	bool parent_deleted;
};

static void promoted_one(void *ctx, const char *id, bool is_parent, int rc)
{
	struct promote_report *p = ctx;
	if (rc == 0) {
		if (is_parent)
			p->parent_deleted = true;
		else
			json_array_append_new(p->deleted, json_string(id));
	} else {
		json_array_append_new(p->failed, json_pack("{s:s,s:b,s:s}", "id", id, "parent", is_parent,
							   "error", errmsg()));
	}
}

/* POST .../promote {"delete_parent": false}: keep this child of a fork,
 * delete its siblings (and the parent if asked). */
int h_sandbox_promote(struct req *r)
{
	static const char *const keys[] = { "delete_parent", NULL };
	const json_t *dp = r->json ? json_object_get(r->json, "delete_parent") : NULL;
	if ((r->json && v_known_keys(r->json, keys) < 0) ||
	    (dp && !json_is_boolean(dp) && errf(EINVAL, "field 'delete_parent' must be true or false")))
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct ops_caller c;
	req_caller(r, &c);
	const char *id = req_sandbox_id(r);
	struct promote_report p = { json_array(), json_array(), false };
	char parent[ID_MAX] = "";
	int rc = p.deleted && p.failed ? ops_promote(&c, id, json_is_true(dp), parent, promoted_one, &p)
				       : errf(ENOMEM, "out of memory");
	if (rc < 0) {
		json_decref(p.deleted);
		json_decref(p.failed);
		return rc == -ENOENT ? reply_sandbox_missing(r, id) : reply_errno(r, rc);
	}
	return reply_json(r, 200, json_pack("{s:s,s:s,s:o,s:b,s:o}", "kept", id, "parent", parent, "deleted",
					    p.deleted, "parent_deleted", p.parent_deleted, "failed", p.failed));
}

int h_sandbox_lifecycle(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	struct sbx_row row;
	int rc = ops_set_lifecycle(&c, req_sandbox_id(r), r->json, &row), answered;
	/* The request was valid but names no live sandbox: req_sandbox's
	 * answer (an ended one's says how it ended). */
	if (rc == -ENOENT && req_sandbox(r, NULL, &answered) < 0)
		return answered;
	return reply_changed(r, rc, &row);
}

/* pause: its vCPUs stopped, memory kept; resume: running again (a
 * restart of compute, so held to the credit as a wake is). */
int h_sandbox_pause(struct req *r)
{
	return lifecycle_action(r, hostif_pause);
}

int h_sandbox_resume(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	int rc = ops_credit_check(&c);
	return rc < 0 ? reply_errno(r, rc) : lifecycle_action(r, hostif_resume);
}

int h_sandbox_snapshot(struct req *r)
{
	int answered = lifecycle_admit(r);
	if (answered >= 0)
		return answered;
	char id[ID_MAX];
	struct ops_caller c;
	struct ops_quota q;
	req_caller_quota(r, &c, &q);
	int rc = ops_snapshot(&c, req_sandbox_id(r), id);
	if (rc == -EDQUOT)
		return reply_limit(r, &q);
	json_t *j;
	rc = rc ?: snapshot_json(r, id, &j);
	return rc < 0 ? reply_errno(r, rc) : reply_json(r, 201, j);
}

/* PUT /v1/sandboxes/{id}/network: the whole egress policy, replaced
 * (ops_set_network); in force when it answers. */
int h_sandbox_network(struct req *r)
{
	struct ops_caller c;
	struct sbx_row row;
	req_caller(r, &c);
	int rc = ops_set_network(&c, req_sandbox_id(r), r->json, &row), answered;
	/* Not there: req_sandbox's 404 (an ended one's says how it ended). */
	if (rc == -ENOENT && req_sandbox(r, NULL, &answered) < 0)
		return answered;
	return reply_changed(r, rc, &row);
}
