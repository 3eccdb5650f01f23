#include "ops/statement.h"
#include "ops/plan.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The furthest back a listing looks for months (a hundred years). */
#define MONTHS_MAX 1200

int month_parse(const char *s, int64_t *start, int64_t *end)
{
	int y = 0, m = 0;
	bool shape = strlen(s) == 7 && s[4] == '-';
	for (int i = 0; shape && i < 7; i++)
		if (i != 4 && (s[i] < '0' || s[i] > '9'))
			shape = false;
	if (shape) {
		y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
		m = (s[5] - '0') * 10 + (s[6] - '0');
	}
	if (!shape || y < 1970 || m < 1 || m > 12)
		return errf(EINVAL, "'month' must be a month as YYYY-MM (2026-11), got '%.16s'", s);
	struct tm tm = { .tm_year = y - 1900, .tm_mon = m - 1, .tm_mday = 1 };
	month_bounds((int64_t)timegm(&tm) * 1000, start, end);
	return 0;
}

void month_format(int64_t ms, char out[8])
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	char buf[32];	/* room for any int, to keep the compiler's bound check quiet */
	snprintf(buf, sizeof buf, "%04d-%02d", (tm.tm_year + 1900) % 10000, tm.tm_mon + 1);
	memcpy(out, buf, 7);
	out[7] = '\0';
}

struct month_sum {
	struct statement_row *s;
	int64_t hours;
};

static int add_hour(void *ctx, const struct usage_hour *u)
{
	struct month_sum *m = ctx;
	m->s->cpu_us += u->cpu_us, m->s->mem_mib_s += u->mem_mib_s, m->s->run_ms += u->run_ms;
	m->hours++;
	return 0;
}

/* The statement of the month [start, end) as of now: its usage summed,
 * priced at p, the caller's plan and credit now. -ENOENT without usage. */
static int compute(const struct ops_caller *c, const struct prices *p, const char *month, int64_t start,
		   int64_t end, int64_t now_ms, struct statement_row *s)
{
	memset(s, 0, sizeof *s);
	snprintf(s->workspace, sizeof s->workspace, "%s", c->workspace);
	snprintf(s->month, sizeof s->month, "%s", month);
	struct month_sum m = { s, 0 };
	int rc = store_usage_hours(c->store, c->workspace, NULL, start, end, false, add_hour, &m);
	if (rc < 0)
		return rc;
	if (!m.hours)
		return errf(ENOENT, "no usage in %s", month);
	struct plan plan;
	rc = ops_workspace_plan(c, &plan);
	if (rc < 0)
		return rc;
	snprintf(s->plan, sizeof s->plan, "%s", plan.name[0] ? plan.name : "none");
	s->vcpu_hour = p->vcpu_hour, s->gib_hour = p->gib_hour;
	s->cpu = cost_cpu(p, s->cpu_us), s->mem = cost_mem(p, s->mem_mib_s), s->cost = s->cpu + s->mem;
	s->credit = plan.limits.credit_microdollars;
	s->credit_applied = s->credit < s->cost ? s->credit : s->cost;
	s->amount_due = s->cost - s->credit_applied;
	s->closed_ms = now_ms;
	return 0;
}

/* The closed month's row, written first if it is not there yet. */
static int closed(const struct ops_caller *c, const struct prices *p, const char *month, int64_t start,
		  int64_t end, int64_t now_ms, struct statement_row *out)
{
	int rc = store_statement_load(c->store, c->workspace, month, out);
	if (rc != -ENOENT)
		return rc;
	struct statement_row s;
	rc = compute(c, p, month, start, end, now_ms, &s);
	if (rc < 0)
		return rc;
	/* Whoever closed it first wins; everyone answers what was stored. */
	rc = store_statement_insert(c->store, &s, NULL);
	return rc < 0 ? rc : store_statement_load(c->store, c->workspace, month, out);
}

/* One month by its bounds. */
static int statement_of(const struct ops_caller *c, const struct prices *p, const char *month, int64_t start,
			int64_t end, int64_t now_ms, struct statement_row *out, bool *open)
{
	if (start > now_ms)
		return errf(ENOENT, "%s has not begun", month);
	*open = now_ms < end + STATEMENT_GRACE_MS;
	if (*open) {
		int rc = compute(c, p, month, start, end, now_ms, out);
		out->closed_ms = 0;
		return rc;
	}
	return closed(c, p, month, start, end, now_ms, out);
}

int ops_statement(const struct ops_caller *c, const struct prices *p, const char *month, int64_t now_ms,
		  struct statement_row *out, bool *open)
{
	int64_t start, end;
	int rc = month_parse(month, &start, &end);
	return rc < 0 ? rc : statement_of(c, p, month, start, end, now_ms, out, open);
}

int ops_statement_each(const struct ops_caller *c, const struct prices *p, int64_t now_ms,
		       ops_statement_fn *fn, void *ctx)
{
	int64_t first;
	int rc = store_usage_first_hour(c->store, c->workspace, &first);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	int64_t start, end;
	month_bounds(now_ms, &start, &end);
	for (int i = 0; i < MONTHS_MAX && end > first; i++) {
		char month[8];
		month_format(start, month);
		struct statement_row s;
		bool open;
		rc = statement_of(c, p, month, start, end, now_ms, &s, &open);
		if (rc == 0)
			rc = fn(ctx, &s, open);
		if (rc < 0 && rc != -ENOENT)
			return rc;
		month_bounds(start - 1, &start, &end);	/* the month before */
	}
	return 0;
}
