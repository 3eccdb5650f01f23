/*
 * billing: what a workspace's use costs (docs/billing.md). The host agent
 * meters each sandbox by the hour (store.h struct usage_hour: active vCPU
 * microseconds, working-set MiB-seconds); this turns usage into money.
 * Money is integer micro-dollars (1 USD = 1,000,000), never a float: a
 * period's cost is its summed usage priced once, each of CPU and memory
 * rounded to the nearest micro-dollar, so a bill can be made again from
 * the usage records and comes out the same.
 */
#ifndef KILN_OPS_BILLING_H
#define KILN_OPS_BILLING_H

#include <stdint.h>

/* The platform's published prices, micro-dollars an hour. */
#define PRICE_VCPU_HOUR_DEFAULT 54000	/* $0.054 per active vCPU-hour */
#define PRICE_GIB_HOUR_DEFAULT 16200	/* $0.0162 per working-set GiB-hour */

struct prices {
	int64_t vcpu_hour;		/* micro-dollars per active vCPU-hour */
	int64_t gib_hour;		/* micro-dollars per working-set GiB-hour */
};

/* "0.054" (dollars, at most 6 decimals, at most $1,000,000) into
 * micro-dollars, exactly; -EINVAL naming what (the option) otherwise. */
int price_parse(const char *usd, const char *what, int64_t *micro);
/* The cost of cpu_us of active vCPU time, and of mem_mib_s of working set. */
int64_t cost_cpu(const struct prices *p, int64_t cpu_us);
int64_t cost_mem(const struct prices *p, int64_t mem_mib_s);
/* The UTC calendar month holding ms: its first and its next month's first
 * instant (ms). */
void month_bounds(int64_t ms, int64_t *start, int64_t *end);
/* The UTC day holding ms: its first instant. */
int64_t day_start(int64_t ms);

#endif
