/*
 * ratelimit: a token bucket per workspace (rate tokens a second, up to
 * burst). The table is small and fixed: when it is full, the bucket used
 * least recently is reused, which can only make a limit more lenient.
 */
#ifndef KILN_API_RATELIMIT_H
#define KILN_API_RATELIMIT_H

#include <stdbool.h>

struct ratelimit;

struct ratelimit *ratelimit_new(int rate_per_sec, int burst);
void ratelimit_free(struct ratelimit *rl);
/* Take one token for key; false when the bucket is empty (answer 429).
 * *retry_ms gets how long until a token is there. */
bool ratelimit_take(struct ratelimit *rl, const char *key, int *retry_ms);

#endif
