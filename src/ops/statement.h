/*
 * statement: a workspace's monthly statements (docs/billing.md). A month
 * is open from its first instant until STATEMENT_GRACE_MS after its end
 * (the last samples of its last hour may still be saved then): its
 * statement is computed at each request from usage_hours, with today's
 * prices and plan. After that it is closed: computed once, with the prices
 * and plan in force at that moment, stored (store.h struct statement_row)
 * and served from the store ever after, so usage rows added later and
 * changed prices never alter it. Two requests closing the same month at
 * once both answer the one row that landed.
 */
#ifndef KILN_OPS_STATEMENT_H
#define KILN_OPS_STATEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/billing.h"
#include "ops/ops.h"
#include "store/store.h"

#define STATEMENT_GRACE_MS (5 * 60 * 1000)

/* "2026-11" into its UTC bounds (ms); -EINVAL naming 'month' unless it is
 * exactly YYYY-MM (a year 1970 to 9999, a month 01 to 12). */
int month_parse(const char *s, int64_t *start, int64_t *end);
/* The month holding ms as "YYYY-MM". */
void month_format(int64_t ms, char out[8]);

/* The caller's statement for month (a month_parse'd name): a closed one
 * from the store, closed now if it is not yet; an open one computed.
 * *open says which. -ENOENT ("no usage in 2026-11") for a month that has
 * not begun or has no metered hour; -EINVAL for a malformed month. */
int ops_statement(const struct ops_caller *c, const struct prices *p, const char *month, int64_t now_ms,
		  struct statement_row *out, bool *open);

/* Each of the caller's statements, newest month first: the open months
 * (the one under way, and the last during its grace) then the closed
 * ones, each closed here if it was not yet; months with no usage are
 * left out. */
typedef int ops_statement_fn(void *ctx, const struct statement_row *s, bool open);
int ops_statement_each(const struct ops_caller *c, const struct prices *p, int64_t now_ms,
		       ops_statement_fn *fn, void *ctx);

#endif
