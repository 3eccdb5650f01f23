/*
 * h_audit: the caller's workspace's audit log (api/audit.h).
 *
 *   GET /v1/audit?limit=N   the newest N entries (default 100, at most
 *                           1000), newest first
 */
#include "api/api.h"
#include "api/handlers.h"
#include "api/http.h"
#include "api/render.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define AUDIT_LIMIT_DEFAULT 100
#define AUDIT_LIMIT_MAX     1000

static int one_entry(void *ctx, const struct audit_row *a)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:o}", "id", a->id, "key_id", a->key_id,
			      "key_prefix", a->key_prefix, "method", a->method, "route", a->route,
			      "status", a->status, "time", render_time(a->created_ms));
	if (!j)
		return errf(ENOMEM, "out of memory");
	json_object_set_new(j, "target", a->target[0] ? json_string(a->target) : json_null());
	json_array_append_new(ctx, j);
	return 0;
}

int h_audit_list(struct req *r)
{
	long limit = AUDIT_LIMIT_DEFAULT;
	const char *q = req_query(r, "limit");
	if (q) {
		char *end;
		errno = 0;
		limit = strtol(q, &end, 10);
		if (!*q || *end || errno || limit < 1 || limit > AUDIT_LIMIT_MAX)
			return reply_error(r, 400, "invalid_request", "limit must be a whole number from 1 to %d",
					   AUDIT_LIMIT_MAX);
	}
	json_t *arr = json_array();
	int rc = arr ? store_audit_each(r->api->store, r->workspace, (int)limit, one_entry, arr)
		     : errf(ENOMEM, "out of memory");
	if (rc < 0) {
		json_decref(arr);
		return reply_errno(r, rc);
	}
	return reply_json(r, 200, json_pack("{s:o}", "entries", arr));
}
