/*
 * store_statements: closed months' statements (store.h struct
 * statement_row). A row is written once and never updated: two requests
 * closing the same month at once both INSERT ... ON CONFLICT DO NOTHING,
 * one of them lands, and both read back the one that did.
 */
#include "store/store_int.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>

#define STATEMENT_COLS                                                                     \
	"workspace_id, month, cpu_us, mem_mib_s, run_ms, vcpu_hour_microdollars, "          \
	"gib_hour_microdollars, cpu_microdollars, memory_microdollars, cost_microdollars, " \
	"plan, credit_microdollars, credit_applied_microdollars, amount_due_microdollars, " \
	"closed_ms"
#define STATEMENT_NCOLS 15

int store_statement_insert(struct store *st, const struct statement_row *s, bool *inserted)
{
	int64_t changes = 0;
	int rc = RUN(st,
		     "INSERT INTO statements (" STATEMENT_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "
		     "$9, $10, $11, $12, $13, $14, $15) ON CONFLICT (workspace_id, month) DO NOTHING",
		     NULL, NULL, &changes, DBV_S(s->workspace), DBV_S(s->month), DBV_I(s->cpu_us),
		     DBV_I(s->mem_mib_s), DBV_I(s->run_ms), DBV_I(s->vcpu_hour), DBV_I(s->gib_hour),
		     DBV_I(s->cpu), DBV_I(s->mem), DBV_I(s->cost), DBV_S(s->plan), DBV_I(s->credit),
		     DBV_I(s->credit_applied), DBV_I(s->amount_due), DBV_I(s->closed_ms));
	if (inserted)
		*inserted = rc == 0 && changes > 0;
	return rc;
}

static void row_to_statement(const struct dbv *c, struct statement_row *s)
{
	memset(s, 0, sizeof *s);
	copy_str(s->workspace, sizeof s->workspace, dbv_text(&c[0]));
	copy_str(s->month, sizeof s->month, dbv_text(&c[1]));
	s->cpu_us = dbv_int(&c[2]), s->mem_mib_s = dbv_int(&c[3]), s->run_ms = dbv_int(&c[4]);
	s->vcpu_hour = dbv_int(&c[5]), s->gib_hour = dbv_int(&c[6]);
	s->cpu = dbv_int(&c[7]), s->mem = dbv_int(&c[8]), s->cost = dbv_int(&c[9]);
	copy_str(s->plan, sizeof s->plan, dbv_text(&c[10]));
	s->credit = dbv_int(&c[11]), s->credit_applied = dbv_int(&c[12]), s->amount_due = dbv_int(&c[13]);
	s->closed_ms = dbv_int(&c[14]);
}

struct statement_one {
	struct statement_row *out;
	bool found;
};

static int row_statement_one(void *ctx, const struct dbv *c, int n)
{
	struct statement_one *o = ctx;
	if (n < STATEMENT_NCOLS)
		return errf(EIO, "store: short statements row");
	row_to_statement(c, o->out);
	o->found = true;
	return 0;
}

int store_statement_load(struct store *st, const char *workspace, const char *month, struct statement_row *out)
{
	struct statement_one o = { out, false };
	int rc = RUN(st, "SELECT " STATEMENT_COLS " FROM statements WHERE workspace_id = $1 AND month = $2",
		     row_statement_one, &o, NULL, DBV_S(workspace), DBV_S(month));
	if (rc < 0)
		return rc;
	return o.found ? 0 : errf(ENOENT, "no statement for %s", month);
}

struct statement_walk {
	store_statement_fn *fn;
	void *ctx;
};

static int row_statement_each(void *ctx, const struct dbv *c, int n)
{
	struct statement_walk *w = ctx;
	if (n < STATEMENT_NCOLS)
		return errf(EIO, "store: short statements row");
	struct statement_row s;
	row_to_statement(c, &s);
	return w->fn(w->ctx, &s);
}

int store_statement_each(struct store *st, const char *workspace, store_statement_fn *fn, void *ctx)
{
	struct statement_walk w = { fn, ctx };
	/* "YYYY-MM" sorts as the months do. */
	return RUN(st, "SELECT " STATEMENT_COLS " FROM statements WHERE workspace_id = $1 ORDER BY month DESC",
		   row_statement_each, &w, NULL, DBV_S(workspace));
}

struct first_hour {
	int64_t ms;
	bool found;
};

static int row_first_hour(void *ctx, const struct dbv *c, int n)
{
	struct first_hour *f = ctx;
	if (n >= 1 && c[0].type != DBV_NULL) {
		f->ms = dbv_int(&c[0]);
		f->found = true;
	}
	return 0;
}

int store_usage_first_hour(struct store *st, const char *workspace, int64_t *hour_ms)
{
	struct first_hour f = { 0, false };
	int rc = RUN(st, "SELECT MIN(hour_ms) FROM usage_hours WHERE workspace_id = $1", row_first_hour, &f,
		     NULL, DBV_S(workspace));
	if (rc < 0)
		return rc;
	if (!f.found)
		return errf(ENOENT, "no usage");
	*hour_ms = f.ms;
	return 0;
}
