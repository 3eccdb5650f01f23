/*
 * inflight: how many requests each workspace has under way, against a cap
 * (--max-inflight, and --max-uploads for uploads), so that one tenant's
 * pile of slow requests cannot hold every connection thread and spool
 * slot of the host. Counted from admission (the key is known) to the
 * request's end. The table is small and fixed: a key that finds it full
 * is let through uncounted, which can only make a cap more lenient. The
 * same table counts amounts: the exec output a workspace holds in memory
 * (--max-exec-buffer).
 */
#ifndef KILN_API_INFLIGHT_H
#define KILN_API_INFLIGHT_H

#include <stdbool.h>

struct inflight;

/* cap 0: no cap (enter always succeeds, nothing is counted). */
struct inflight *inflight_new(long long cap);
void inflight_free(struct inflight *t);
/* One more request for key: false when key has cap already (answer 429).
 * On true, *counted says whether inflight_leave must be called. */
bool inflight_enter(struct inflight *t, const char *key, bool *counted);
void inflight_leave(struct inflight *t, const char *key);
/* The same by amount (bytes held, say): take up to n for key, within the
 * cap; returns what was counted (less than n when the cap is near; n,
 * uncounted, when the table is full or there is no cap: *counted false).
 * Give back exactly what was counted. */
long long inflight_take(struct inflight *t, const char *key, long long n, bool *counted);
void inflight_give(struct inflight *t, const char *key, long long n);
/* What key holds now (for tests and metrics). */
long long inflight_count(struct inflight *t, const char *key);

#endif
