/*
 * metrics: counters and the create-latency histogram, rendered in the
 * Prometheus text format at GET /metrics (gauges of sandboxes by state are
 * added by the host agent at scrape time).
 */
#ifndef KILN_COMMON_METRICS_H
#define KILN_COMMON_METRICS_H

#include <stdbool.h>

#include "common/strbuf.h"

struct metrics;

struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);
/* One answered request: its status and, for errors, the error code. */
void metrics_http(struct metrics *m, int status, const char *error_code);
/* One sandbox create (or fork child): seconds to ready, and whether it worked. */
void metrics_create(struct metrics *m, double seconds, bool ok);
/* One sandbox started again after its guest died before it was ready. */
void metrics_start_retry(struct metrics *m);
void metrics_render(struct metrics *m, struct strbuf *b);

#endif
