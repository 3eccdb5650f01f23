#include "api/hcommon.h"
#include "host/guest_conn.h"
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/http.h"
#include "api/render.h"
#include "api/reply_buf.h"
#include "api/window.h"
#include "ops/ops.h"
#include "ops/billing.h"
#include "ops/plan.h"
#include "store/store.h"
#include "ops/validate.h"
#include "common/err.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int reply_sandbox_missing(struct req *r, const char *id)
{
	struct sbx_row row;
	int rc = v_is_id(id, "sbx_") ? store_sandbox_load(r->api->store, id, &row) : -ENOENT;
	if (rc < 0 && rc != -ENOENT)
		return reply_errno(r, rc);	/* the store's trouble (503), not a missing sandbox */
	if (rc < 0)
		return reply_error(r, 404, "not_found", "sandbox %.40s not found", id);
	/* Another workspace's sandbox does not exist for this caller. */
	bool ended = strcmp(row.workspace, r->workspace) == 0 && row.state == SBX_DELETED &&
		     row.deleted_ms > 0 && wall_ms() - row.deleted_ms < ENDED_RETENTION_S * 1000;
	const char *why = row.ended[0] ? row.ended : "deleted";
	json_t *e = NULL;
	if (ended) {
		char msg[400];
		snprintf(msg, sizeof msg, "sandbox %s ended (%s)%s%s", row.id, why, row.error[0] ? ": " : "",
			 row.error);
		e = json_pack("{s:{s:s,s:s,s:s,s:o}}", "error", "code", "sandbox_ended", "message", msg,
			      "ended", why, "ended_at", render_time(row.deleted_ms));
	}
	sbx_row_clear(&row);
	if (!ended)
		return reply_error(r, 404, "not_found", "sandbox %.40s not found", id);
	if (!e)
		return reply_error(r, 404, "sandbox_ended", "sandbox %.40s ended", id);
	return reply_json(r, 404, e);
}

void req_caller(struct req *r, struct ops_caller *out)
{
	*out = (struct ops_caller){ .hostif = r->api->hostif, .store = r->api->store,
				    .plans = r->api->plans, .workspace = r->workspace,
				    .arrival_ns = r->arrival_ns, .max_ttl = r->api->cfg->max_ttl,
				    /* Reading a sandbox (GET: itself, its ports, logs) is
				     * not activity, or a dashboard polling it would keep it
				     * alive forever; a request that changes it is. Guest
				     * work (exec, files, pty) counts by itself in
				     * hostif_enter. */
				    .touch = strcmp(r->method, "GET") != 0 };
}

void req_caller_quota(struct req *r, struct ops_caller *c, struct ops_quota *q)
{
	req_caller(r, c);
	memset(q, 0, sizeof *q);
	c->quota = q;
}

const char *const (*quota_headers(struct req *r, const struct ops_quota *q, bool refused,
				   struct quota_headers *qh))[2]
{
	int n = 0;
	const struct ws_caps_report *rep = &q->report;
	/* Only a create's or fork's report counts the window: a refusal of
	 * what the workspace keeps (hibernated, snapshots, volumes,
	 * storage_mib) has none, and its zeros would show the window empty. */
	if (q->window) {
		/* Exact here; the workspace's other answers show it next. */
		windows_note(r->api->windows, r->workspace,
			     &(struct window_count){ q->limits.creates_per_hour, rep->creates_used, rep->reset_ms });
		int64_t now = wall_ms(), left = q->limits.creates_per_hour - rep->creates_used;
		snprintf(qh->limit, sizeof qh->limit, "%lld", (long long)q->limits.creates_per_hour);
		snprintf(qh->remaining, sizeof qh->remaining, "%lld", (long long)(left > 0 ? left : 0));
		snprintf(qh->reset, sizeof qh->reset, "%lld",
			 (long long)(rep->reset_ms > now ? (rep->reset_ms - now + 999) / 1000 : 0));
		qh->h[n][0] = "X-RateLimit-Limit", qh->h[n++][1] = qh->limit;
		qh->h[n][0] = "X-RateLimit-Remaining", qh->h[n++][1] = qh->remaining;
		qh->h[n][0] = "X-RateLimit-Reset", qh->h[n++][1] = qh->reset;
	}
	if (refused && rep->retry_after_ms > 0) {
		snprintf(qh->retry, sizeof qh->retry, "%lld", (long long)(rep->retry_after_ms + 999) / 1000);
		qh->h[n][0] = "Retry-After", qh->h[n++][1] = qh->retry;
	}
	qh->h[n][0] = qh->h[n][1] = NULL;
	return (const char *const (*)[2])qh->h;
}

int reply_limit(struct req *r, const struct ops_quota *q)
{
	struct quota_headers qh;
	const struct ws_caps_report *rep = &q->report;
	json_t *j = json_pack("{s:{s:s,s:s,s:s,s:I,s:s}}", "error", "code", "limit_exceeded",
			      "message", errmsg(), "limit",
			      !strcmp(rep->limit, "creates") ? "creates_per_hour"
			      : rep->limit[0] ? rep->limit : "unknown",
			      "value", (json_int_t)rep->value, "plan", q->plan);
	return reply_json_headers(r, 429, quota_headers(r, q, true, &qh), j);
}

const char *req_sandbox_id(struct req *r)
{
	return r->nparams > 0 ? r->params[0] : "";
}

int req_sandbox(struct req *r, struct sbx_row *out, int *answered)
{
	struct ops_caller c;
	req_caller(r, &c);
	const char *id = req_sandbox_id(r);
	int rc = ops_sandbox(&c, id, out);
	if (rc < 0) {
		/* Not there is a 404 that may say how it ended; anything else
		 * (a copy that failed) is the error it is. */
		*answered = rc == -ENOENT ? reply_sandbox_missing(r, id) : reply_errno(r, rc);
		return -1;
	}
	return 0;
}

int req_guest_enter(struct req *r, struct hostif_guest *hg, int *answered)
{
	if (req_sandbox(r, NULL, answered) < 0)
		return -1;
	int rc = hostif_enter(r->api->hostif, r->workspace, req_sandbox_id(r), hg);
	if (rc < 0) {
		*answered = reply_errno(r, rc);
		return -1;
	}
	return 0;
}

void req_guest_leave(struct req *r, struct hostif_guest *hg)
{
	hostif_leave(r->api->hostif, hg);
}

int req_query_user(struct req *r, const char **user)
{
	*user = NULL;
	int rc = req_query_exact(r, "user", user);
	if (rc == 0 && *user && (!(*user)[0] || strlen(*user) > 64 || strpbrk(*user, " \t\n/")))
		rc = errf(EINVAL, "query parameter 'user' must be a user name, a uid or uid:gid");
	return rc;
}

int req_upload_admit(struct req *r, int (*check)(struct req *r))
{
	int rc = check ? check(r) : 0;
	if (rc == -EFBIG)
		return reply_error(r, 413, "payload_too_large", "%s", errmsg());
	if (rc < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	int answered;
	if (req_sandbox(r, NULL, &answered) < 0)
		return answered;
	return -1;
}

int req_files_enter(struct req *r, struct hostif_guest *hg, const char **user, int *answered)
{
	const char *u;
	if (req_query_user(r, &u) < 0) {
		*answered = reply_error(r, 400, "invalid_request", "%s", errmsg());
		return -1;
	}
	if (user)
		*user = u;
	if (req_guest_enter(r, hg, answered) < 0)
		return -1;
	int rc = u ? guest_set_user(hg->g, u) : 0;
	if (rc < 0) {
		req_guest_leave(r, hg);
		*answered = reply_errno(r, rc);
		return -1;
	}
	return 0;
}

int reply_template_missing(struct req *r, json_t *names)
{
	json_t *e = json_pack("{s:{s:s,s:s,s:o}}", "error", "code", "template_not_found", "message",
			      errmsg(), "templates", names);
	if (!e)
		return reply_error(r, 404, "template_not_found", "%s", errmsg());
	return reply_json(r, 404, e);
}

int req_query_bool(struct req *r, const char *name, bool *out)
{
	const char *v = req_query(r, name);
	if (!v)
		return 0;
	if (!strcmp(v, "1") || !strcmp(v, "true"))
		*out = true;
	else if (!strcmp(v, "0") || !strcmp(v, "false"))
		*out = false;
	else
		return errf(EINVAL, "query parameter '%s' must be true or false", name);
	return 0;
}

/* A time in a query: RFC 3339 in UTC ("2026-12-01T00:00:00Z"), a date
 * ("2026-12-01", its midnight UTC), or Unix seconds. */
int query_time(const char *s, const char *name, int64_t *ms)
{
	struct tm tm = { 0 };
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (!end || *end) {
		memset(&tm, 0, sizeof tm);
		end = strptime(s, "%Y-%m-%d", &tm);
	}
	if (end && !*end) {
		*ms = (int64_t)timegm(&tm) * 1000;
		return 0;
	}
	char *e;
	long long v = strtoll(s, &e, 10);
	if (*s && !*e && v >= 0 && v < 32503680000LL) {	/* before the year 3000 */
		*ms = v * 1000;
		return 0;
	}
	return errf(EINVAL, "'%s' must be a time: RFC 3339 in UTC (2026-12-01T00:00:00Z), a date "
		    "(2026-12-01) or Unix seconds", name);
}

int req_plan(struct req *r, struct plan *out)
{
	struct ops_caller c;
	req_caller(r, &c);
	return ops_workspace_plan(&c, out);
}

const struct prices *req_prices(struct req *r)
{
	static const struct prices published = { PRICE_VCPU_HOUR_DEFAULT, PRICE_GIB_HOUR_DEFAULT };
	return r->api->plans ? &r->api->plans->prices : &published;
}

bool sandbox_ended(struct hostif *hi, const char *ws, const char *id)
{
	struct sbx_row row;
	int rc = hostif_get(hi, ws, id, false, &row);
	if (rc == -ENOENT)
		return true;	/* deleted, and gone from the host */
	if (rc < 0)
		return false;
	/* Deleting: its VMM is being stopped and its log goes with it. A
	 * host's relay of a followed log ends here, before the API replica
	 * that asked for the delete hears it is done (and would end the
	 * follow itself: "its host's relay had not", h_logs.c). */
	bool gone = row.state == SBX_DELETED || row.state == SBX_DELETING || row.state == SBX_FAILED;
	sbx_row_clear(&row);
	return gone;
}

/* ---- ?tail=N&follow=true ---------------------------------------------------------------- */

struct log_parse {
	struct logq *q;
	char bad[200];
};

static enum MHD_Result take_log_param(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				  const char *value, size_t value_size)
{
	(void)kind;
	struct log_parse *q = cls;
	const char *v = value ? value : "";
	if (strlen(key) != key_size || strlen(v) != value_size) {
		snprintf(q->bad, sizeof q->bad, "query parameter '%.64s' holds a NUL byte", key);
	} else if (strcmp(key, "tail") == 0) {
		char *end;
		errno = 0;
		long n = strtol(v, &end, 10);
		if (errno || end == v || *end || n < 0 || n > LOG_TAIL_MAX)
			snprintf(q->bad, sizeof q->bad, "tail '%.32s' is not a number from 0 to %d", v, LOG_TAIL_MAX);
		q->q->tail = n;
	} else if (strcmp(key, "follow") == 0) {
		if (strcmp(v, "true") == 0)
			q->q->follow = true;
		else if (strcmp(v, "false") == 0)
			q->q->follow = false;
		else
			snprintf(q->bad, sizeof q->bad, "follow '%.32s' is not true or false", v);
	} else {
		snprintf(q->bad, sizeof q->bad, "unknown query parameter '%.64s' (known: tail, follow)", key);
	}
	return q->bad[0] ? MHD_NO : MHD_YES;
}

int req_log_query(struct req *r, long tail_default, struct logq *q)
{
	q->tail = tail_default, q->follow = false;
	struct log_parse p = { .q = q };
	MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, take_log_param, &p);
	return p.bad[0] ? errf(EINVAL, "%s", p.bad) : 0;
}
