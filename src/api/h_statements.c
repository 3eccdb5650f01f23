/*
 * h_statements: the caller's monthly statements (docs/billing.md,
 * ops/statement.h).
 *
 *   GET /v1/statements            the open months (so far) and the closed
 *                                 ones, newest first
 *   GET /v1/statements/{month}    one month, "2026-11": 400 malformed, 404
 *                                 not begun or without usage
 *
 * A closed month's answer is made from its stored row alone, so it stays
 * the same, byte for byte, whatever happens to usage or prices later.
 */
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "ops/ops.h"
#include "ops/statement.h"
#include "store/store.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>

static json_t *statement_json(const struct statement_row *s, bool open)
{
	int64_t from = 0, to = 0;
	month_parse(s->month, &from, &to);
	return json_pack("{s:s,s:s,s:s,s:{s:o,s:o},s:s,s:{s:I,s:I},s:{s:f,s:f,s:f},s:I,s:I,s:I,s:I,s:I,s:I,s:o}",
		"workspace_id", s->workspace, "month", s->month, "status", open ? "open" : "closed",
		"period", "from", render_time(from), "to", render_time(to), "plan", s->plan,
		"prices", "vcpu_hour_microdollars", (json_int_t)s->vcpu_hour,
		"gib_hour_microdollars", (json_int_t)s->gib_hour,
		"usage", "active_vcpu_seconds", (double)s->cpu_us / 1e6,
		"memory_gib_hours", (double)s->mem_mib_s / 1024 / 3600, "running_seconds", (double)s->run_ms / 1e3,
		"cpu_microdollars", (json_int_t)s->cpu, "memory_microdollars", (json_int_t)s->mem,
		"cost_microdollars", (json_int_t)s->cost, "credit_microdollars", (json_int_t)s->credit,
		"credit_applied_microdollars", (json_int_t)s->credit_applied,
		"amount_due_microdollars", (json_int_t)s->amount_due,
		"closed_at", open ? json_null() : render_time(s->closed_ms));
}

static int add_one(void *ctx, const struct statement_row *s, bool open)
{
	json_t *one = statement_json(s, open);
	if (!one || json_array_append_new(ctx, one) < 0)
		return errf(ENOMEM, "out of memory");
	return 0;
}

int h_statement_list(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	json_t *arr = json_array();
	if (!arr)
		return reply_error(r, 500, "internal", "out of memory");
	int rc = ops_statement_each(&c, req_prices(r), wall_ms(), add_one, arr);
	if (rc < 0) {
		json_decref(arr);
		return reply_errno(r, rc);
	}
	return reply_json(r, 200, json_pack("{s:s,s:o}", "workspace_id", r->workspace, "statements", arr));
}

int h_statement_get(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	struct statement_row s;
	bool open = false;
	int rc = ops_statement(&c, req_prices(r), r->params[0], wall_ms(), &s, &open);
	if (rc == -EINVAL)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	if (rc == -ENOENT)
		return reply_error(r, 404, "not_found", "%s", errmsg());
	if (rc < 0)
		return reply_errno(r, rc);
	return reply_json(r, 200, statement_json(&s, open));
}
