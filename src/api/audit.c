#include "api/audit.h"
#include "api/api.h"
#include "api/http.h"
#include "api/routes.h"
#include "common/err.h"
#include "common/log.h"
#include "common/periodic.h"
#include "store/store.h"

#include <stdio.h>
#include <string.h>

/* What the request was about: the ids the path names ("sbx_x",
 * "sbx_x/8080"), else what it made (POST /v1/sandboxes, /v1/keys). */
static void target_of(const struct req *r, char *out, size_t cap)
{
	size_t len = 0;
	snprintf(out, cap, "%s", r->nparams ? "" : r->created_id);
	for (int i = 0; i < r->nparams && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "/" : "", r->params[i]);
}

void audit_request(struct req *r)
{
	if (!r->key.id[0] || !r->route || !r->status || (r->route->flags & (ROUTE_READ | ROUTE_PROXY)))
		return;
	struct audit_row a = { .status = r->status };
	snprintf(a.workspace, sizeof a.workspace, "%s", r->key.workspace);
	snprintf(a.key_id, sizeof a.key_id, "%s", r->key.id);
	snprintf(a.key_prefix, sizeof a.key_prefix, "%s", r->key.prefix);
	snprintf(a.method, sizeof a.method, "%s", r->method);
	snprintf(a.route, sizeof a.route, "%s", r->route->pattern);
	target_of(r, a.target, sizeof a.target);
	if (store_audit_add(r->api->store, &a) < 0)
		log_warn("audit: %s %s by key %s (%d) not recorded: %s", a.method, a.route, a.key_id,
			 a.status, errmsg());
}

void audit_operator(struct req *r, const char *wsid, int status, const char *target)
{
	struct audit_row a = { .status = status };
	snprintf(a.workspace, sizeof a.workspace, "%s", wsid);
	snprintf(a.key_id, sizeof a.key_id, "%s", r->op.id);
	snprintf(a.key_prefix, sizeof a.key_prefix, "%s", r->op.prefix);
	snprintf(a.method, sizeof a.method, "%s", r->method);
	snprintf(a.route, sizeof a.route, "%s", r->route->pattern);
	if (target)
		snprintf(a.target, sizeof a.target, "%s", target);
	else
		target_of(r, a.target, sizeof a.target);
	if (store_audit_add(r->api->store, &a) < 0)
		log_warn("audit: %s %s by operator %s not recorded: %s", a.method, a.route, a.key_id,
			 errmsg());
}

/* ---- retention ---------------------------------------------------------------- */

#define RETENTION_PERIOD_MS (3600 * 1000)

static struct {
	struct periodic thread;
	struct store *store;
	int64_t keep_ms;
} retention;

static void prune(void *ctx)
{
	(void)ctx;
	int64_t removed = 0;
	if (store_audit_prune(retention.store, wall_ms() - retention.keep_ms, &removed) < 0)
		log_warn("audit: removing entries past retention: %s", errmsg());
	else if (removed)
		log_info("audit: removed %lld entries older than %lld days", (long long)removed,
			 (long long)(retention.keep_ms / 86400000));
}

int audit_retention_start(struct store *st, int days)
{
	if (days <= 0)
		return 0;
	retention.store = st;
	retention.keep_ms = (int64_t)days * 86400000;
	return periodic_start(&retention.thread, "audit retention", RETENTION_PERIOD_MS, prune, NULL);
}

void audit_retention_stop(void)
{
	periodic_stop(&retention.thread);
}
