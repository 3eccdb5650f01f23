/*
 * h_audit: the caller's workspace's audit log (api/audit.h).
 *
 *   GET /v1/audit?limit=N&cursor=C&key=K
 *       the newest N entries (default 100, at most 1000), newest first;
 *       after cursor C (a page's next_cursor); only key K's (its id or
 *       shown prefix)
 */
#include "api/api.h"
#include "api/audit.h"
#include "api/handlers.h"
#include "api/http.h"
#include "api/render.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define AUDIT_LIMIT_DEFAULT 100
#define AUDIT_LIMIT_MAX     1000

struct page {
	json_t *arr;
	char last[24 + ID_MAX];		/* the cursor after the last entry */
};

static int one_entry(void *ctx, const struct audit_row *a)
{
	struct page *pg = ctx;
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:o}", "id", a->id, "key_id", a->key_id,
			      "key_prefix", a->key_prefix, "method", a->method, "route", a->route,
			      "status", a->status, "time", render_time(a->created_ms));
	if (!j)
		return errf(ENOMEM, "out of memory");
	json_object_set_new(j, "target", a->target[0] ? json_string(a->target) : json_null());
	json_array_append_new(pg->arr, j);
	snprintf(pg->last, sizeof pg->last, "%lld.%s", (long long)a->created_ms, a->id);
	return 0;
}

/* cursor: "MS.ID" of the last entry of the page before (next_cursor). */
static int parse_cursor(const char *c, struct audit_query *q, char id[ID_MAX])
{
	char *end;
	errno = 0;
	long long ms = strtoll(c, &end, 10);
	if (errno || ms <= 0 || *end != '.' || strlen(end + 1) >= ID_MAX || strncmp(end + 1, "aud_", 4))
		return errf(EINVAL, "cursor: not one this API gave (next_cursor)");
	q->before_ms = ms;
	snprintf(id, ID_MAX, "%s", end + 1);
	q->before_id = id;
	return 0;
}

static int list(struct req *r, const char *workspace)
{
	struct audit_query q = { .limit = AUDIT_LIMIT_DEFAULT };
	const char *v = req_query(r, "limit");
	if (v) {
		char *end;
		errno = 0;
		long limit = strtol(v, &end, 10);
		if (!*v || *end || errno || limit < 1 || limit > AUDIT_LIMIT_MAX)
			return reply_error(r, 400, "invalid_request", "limit must be a whole number from 1 to %d",
					   AUDIT_LIMIT_MAX);
		q.limit = (int)limit;
	}
	char id[ID_MAX];
	if ((v = req_query(r, "cursor")) && parse_cursor(v, &q, id) < 0)
		return reply_errno(r, -EINVAL);
	if ((v = req_query(r, "key"))) {
		if (!*v || strlen(v) >= ID_MAX)
			return reply_error(r, 400, "invalid_request", "key: a key's id (key_...) or prefix");
		q.key = v;
	}
	struct page pg = { json_array(), "" };
	int rc = pg.arr ? store_audit_each(r->api->store, workspace, &q, one_entry, &pg)
			: errf(ENOMEM, "out of memory");
	if (rc < 0) {
		json_decref(pg.arr);
		return reply_errno(r, rc);
	}
	bool full = (int)json_array_size(pg.arr) == q.limit;
	return reply_json(r, 200, json_pack("{s:o,s:o}", "entries", pg.arr, "next_cursor",
					    full ? json_string(pg.last) : json_null()));
}

int h_audit_list(struct req *r)
{
	return list(r, r->workspace);
}

int h_admin_audit(struct req *r)
{
	return list(r, AUDIT_OPERATOR_LOG);
}
