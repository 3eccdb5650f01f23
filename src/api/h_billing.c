/*
 * h_billing: what the caller's workspace used and what it costs
 * (docs/billing.md).
 *
 *   GET /v1/usage                 totals over the workspace's sandboxes
 *   GET /v1/usage?from=&to=&granularity=hour|day[&sandbox=ID][&format=csv]
 *                                 the metered hours (usage_hours), by hour
 *                                 or UTC day, priced; CSV on request
 *   GET /v1/billing               this month: plan, prices, usage, cost so
 *                                 far, projected, credit left, limits
 */
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "ops/billing.h"
#include "ops/credit.h"
#include "ops/ops.h"
#include "store/store.h"
#include "common/err.h"
#include "common/strbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static json_t *prices_json(const struct prices *p)
{
	return json_pack("{s:I,s:I}", "vcpu_hour_microdollars", (json_int_t)p->vcpu_hour,
			 "gib_hour_microdollars", (json_int_t)p->gib_hour);
}

/* One period's usage, priced once (ops/billing.h). */
static json_t *period_json(const struct prices *p, int64_t cpu_us, int64_t mem_mib_s, int64_t run_ms)
{
	int64_t cpu = cost_cpu(p, cpu_us), mem = cost_mem(p, mem_mib_s);
	return json_pack("{s:f,s:f,s:f,s:I,s:I,s:I}", "active_vcpu_seconds", (double)cpu_us / 1e6,
			 "memory_gib_hours", (double)mem_mib_s / 1024 / 3600, "running_seconds",
			 (double)run_ms / 1e3, "cpu_microdollars", (json_int_t)cpu, "memory_microdollars",
			 (json_int_t)mem, "cost_microdollars", (json_int_t)(cpu + mem));
}

/* ---- GET /v1/usage --------------------------------------------------------- */

static int usage_totals(struct req *r)
{
	struct usage u;
	int rc = store_usage_sum(r->api->store, r->workspace, &u);
	if (rc < 0)
		return reply_errno(r, rc);
	double overhead = u.cpu_seconds - u.active_cpu_seconds;
	return reply_json(r, 200, json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:I}",
		"workspace_id", r->workspace, "cpu_seconds", u.cpu_seconds,
		"active_vcpu_seconds", u.active_cpu_seconds,
		"overhead_cpu_seconds", overhead > 0 ? overhead : 0,
		"memory_mib_seconds", u.mem_mib_seconds,
		"memory_gib_hours", u.mem_mib_seconds / 1024 / 3600,
		"working_set_gib_hours", u.pss_mib_seconds / 1024 / 3600,
		"running_seconds", u.running_seconds, "sandboxes", (json_int_t)u.sandboxes,
		"live_sandboxes", (json_int_t)u.live));
}

struct buckets {
	int64_t span_ms;		/* an hour or a day */
	int64_t start;			/* the open bucket's start, 0 before the first */
	int64_t cpu_us, mem_mib_s, run_ms;
	int64_t t_cpu_us, t_mem_mib_s, t_run_ms;	/* all of them */
	const struct prices *prices;
	json_t *arr;
	struct strbuf *csv;		/* or NULL */
};

static int bucket_close(struct buckets *b)
{
	if (!b->start)
		return 0;
	int64_t cpu = cost_cpu(b->prices, b->cpu_us), mem = cost_mem(b->prices, b->mem_mib_s);
	if (b->csv) {
		time_t t = (time_t)(b->start / 1000);
		struct tm tm;
		char when[32];
		gmtime_r(&t, &tm);
		strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
		strbuf_printf(b->csv, "%s,%.6f,%.6f,%.3f,%lld,%lld,%lld\r\n", when, (double)b->cpu_us / 1e6,
			      (double)b->mem_mib_s / 1024 / 3600, (double)b->run_ms / 1e3, (long long)cpu,
			      (long long)mem, (long long)(cpu + mem));
	} else {
		json_t *one = period_json(b->prices, b->cpu_us, b->mem_mib_s, b->run_ms);
		if (!one || json_object_set_new(one, "start", render_time(b->start)) < 0 ||
		    json_array_append_new(b->arr, one) < 0)
			return errf(ENOMEM, "out of memory");
	}
	b->t_cpu_us += b->cpu_us, b->t_mem_mib_s += b->mem_mib_s, b->t_run_ms += b->run_ms;
	b->cpu_us = b->mem_mib_s = b->run_ms = 0;
	return 0;
}

static int one_hour(void *ctx, const struct usage_hour *u)
{
	struct buckets *b = ctx;
	int64_t start = u->hour_ms / b->span_ms * b->span_ms;
	if (start != b->start) {
		int rc = bucket_close(b);
		if (rc < 0)
			return rc;
		b->start = start;
	}
	b->cpu_us += u->cpu_us, b->mem_mib_s += u->mem_mib_s, b->run_ms += u->run_ms;
	return 0;
}

static int usage_buckets(struct req *r)
{
	const char *q_from, *q_to, *q_gran, *q_sbx, *q_fmt;
	if (req_query_exact(r, "from", &q_from) < 0 || req_query_exact(r, "to", &q_to) < 0 ||
	    req_query_exact(r, "granularity", &q_gran) < 0 || req_query_exact(r, "sandbox", &q_sbx) < 0 ||
	    req_query_exact(r, "format", &q_fmt) < 0)
		return reply_error(r, 400, "invalid_request", "a query parameter holds a NUL byte");
	int64_t now = wall_ms(), from, to, month_end;
	month_bounds(now, &from, &month_end);
	to = now / 3600000 * 3600000 + 3600000;		/* through the hour under way */
	if ((q_from && query_time(q_from, "from", &from) < 0) || (q_to && query_time(q_to, "to", &to) < 0))
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	if (to <= from)
		return reply_error(r, 400, "invalid_request", "'to' must come after 'from'");
	struct buckets b = { .span_ms = 3600000, .prices = req_prices(r) };
	if (q_gran && !strcmp(q_gran, "day"))
		b.span_ms = 86400000;
	else if (q_gran && strcmp(q_gran, "hour"))
		return reply_error(r, 400, "invalid_request", "'granularity' is hour or day");
	bool csv = q_fmt && !strcmp(q_fmt, "csv");
	if (q_fmt && !csv && strcmp(q_fmt, "json"))
		return reply_error(r, 400, "invalid_request", "'format' is json or csv");
	/* Hours are whole: a bucket starts on its hour (or day), so a range
	 * that cuts one takes it whole or not at all, by its start. */
	struct strbuf out;
	strbuf_init(&out);
	if (csv) {
		b.csv = &out;
		strbuf_printf(&out, "start,active_vcpu_seconds,memory_gib_hours,running_seconds,"
				    "cpu_microdollars,memory_microdollars,cost_microdollars\r\n");
	} else if (!(b.arr = json_array())) {
		return reply_error(r, 500, "internal", "out of memory");
	}
	int rc = store_usage_hours(r->api->store, r->workspace, q_sbx, from, to, false, one_hour, &b);
	if (rc == 0)
		rc = bucket_close(&b);
	if (rc < 0 || strbuf_failed(&out)) {
		json_decref(b.arr);
		strbuf_free(&out);
		return reply_errno(r, rc < 0 ? rc : -ENOMEM);
	}
	if (csv)
		return reply_text(r, 200, "text/csv; charset=utf-8", out.data, out.len);
	json_t *total = period_json(b.prices, b.t_cpu_us, b.t_mem_mib_s, b.t_run_ms);
	return reply_json(r, 200, json_pack("{s:s,s:o,s:s,s:o,s:o,s:o,s:o,s:o}", "workspace_id", r->workspace,
		"sandbox_id", q_sbx ? json_string(q_sbx) : json_null(), "granularity",
		b.span_ms == 3600000 ? "hour" : "day", "from", render_time(from), "to", render_time(to),
		"prices", prices_json(b.prices), "buckets", b.arr, "total", total));
}

int h_usage(struct req *r)
{
	if (!req_query(r, "from") && !req_query(r, "to") && !req_query(r, "granularity") &&
	    !req_query(r, "sandbox") && !req_query(r, "format"))
		return usage_totals(r);
	return usage_buckets(r);
}

/* ---- GET /v1/billing --------------------------------------------------------- */

int h_billing(struct req *r)
{
	struct plan p;
	int rc = req_plan(r, &p);
	int64_t now = wall_ms(), start, end;
	month_bounds(now, &start, &end);
	struct usage_hour t;
	if (rc == 0)
		rc = ops_month_usage(r->api->store, r->workspace, now, &t);
	if (rc < 0)
		return reply_errno(r, rc);
	const struct prices *pr = req_prices(r);
	int64_t cost = ops_usage_cost(pr, &t);
	/* At this month's pace so far. */
	int64_t elapsed = now - start > 60000 ? now - start : 60000;
	int64_t projected = (int64_t)((__int128)cost * (end - start) / elapsed);
	int64_t credit = p.limits.credit_microdollars;
	json_t *left = credit ? json_integer(credit > cost ? credit - cost : 0) : json_null();
	return reply_json(r, 200, json_pack("{s:s,s:s,s:o,s:{s:o,s:o},s:o,s:I,s:I,s:I,s:o,s:b,s:o}",
		"workspace_id", r->workspace, "plan", p.name[0] ? p.name : "none",
		"prices", prices_json(pr), "period", "from", render_time(start), "to", render_time(end),
		"usage", period_json(pr, t.cpu_us, t.mem_mib_s, t.run_ms),
		"cost_microdollars", (json_int_t)cost, "projected_microdollars", (json_int_t)projected,
		"credit_microdollars", (json_int_t)credit, "credit_left_microdollars", left,
		"credit_exhausted", credit && cost >= credit, "limits", plan_limits_json(&p.limits)));
}
