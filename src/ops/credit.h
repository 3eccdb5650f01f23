/*
 * credit: a plan's monthly credit (ops/plan.h credit_microdollars, the
 * free plan's $5.40) is also what the workspace may spend. Once its usage
 * this UTC month costs that much (ops/billing.h), creates, forks and
 * wakes are refused with 402 credit_exhausted, and the credit watch
 * hibernates its running sandboxes: nothing is deleted or lost, and the
 * next month (or a larger credit) lets them run again. A plan without a
 * credit (0) is billed for what it uses and never stopped here.
 */
#ifndef KILN_OPS_CREDIT_H
#define KILN_OPS_CREDIT_H

#include <stdint.h>

#include "ops/ops.h"
#include "store/store.h"

/* The errno of "the plan's credit is spent" (402 credit_exhausted): no
 * libc errno says it, and this one is used nowhere else in kiln. */
#define E_CREDIT_SPENT EKEYEXPIRED

/* The workspace's usage this UTC month (the month holding now_ms), summed
 * over its hours (store.h struct usage_hour). */
int ops_month_usage(struct store *st, const char *workspace, int64_t now_ms, struct usage_hour *sum);
/* What that usage costs at prices p, micro-dollars. */
int64_t ops_usage_cost(const struct prices *p, const struct usage_hour *u);
/* 0, or -E_CREDIT_SPENT naming the plan, its credit and the month's cost,
 * when the caller's plan has a credit and this month's cost reached it. */
int ops_credit_check(const struct ops_caller *c);

/* The credit watch: every period_ms, each workspace with a running
 * sandbox whose credit is spent, or that the operator suspended, has its
 * running sandboxes hibernated (a suspended workspace's requests are
 * refused, so they stay so until it is restored; nothing is lost).
 * credit_watch_kick: a pass now (a workspace was just suspended). */
int credit_watch_start(struct store *st, struct hostif *hi, const struct plans *plans, int period_ms);
void credit_watch_kick(void);
void credit_watch_stop(void);

#endif
