#include "api/ratelimit.h"
#include "store/store.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUCKETS 1024

struct bucket {
	char key[ID_MAX];
	double tokens;
	int64_t last_ns;
};

struct ratelimit {
	pthread_mutex_t lock;
	double rate, burst;
	struct bucket b[BUCKETS];
};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct ratelimit *ratelimit_new(int rate_per_sec, int burst)
{
	struct ratelimit *rl = calloc(1, sizeof *rl);
	if (!rl)
		return NULL;
	pthread_mutex_init(&rl->lock, NULL);
	rl->rate = rate_per_sec;
	rl->burst = burst > 0 ? burst : rate_per_sec;
	return rl;
}

void ratelimit_free(struct ratelimit *rl)
{
	if (!rl)
		return;
	pthread_mutex_destroy(&rl->lock);
	free(rl);
}

bool ratelimit_take(struct ratelimit *rl, const char *key, int *retry_ms)
{
	*retry_ms = 0;
	if (rl->rate <= 0)
		return true;
	int64_t now = mono_ns();
	pthread_mutex_lock(&rl->lock);
	struct bucket *hit = NULL, *oldest = &rl->b[0];
	for (int i = 0; i < BUCKETS; i++) {
		struct bucket *b = &rl->b[i];
		if (b->key[0] && strcmp(b->key, key) == 0) {
			hit = b;
			break;
		}
		if (b->last_ns < oldest->last_ns)
			oldest = b;
	}
	if (!hit) {
		hit = oldest;
		snprintf(hit->key, sizeof hit->key, "%s", key);
		hit->tokens = rl->burst;
		hit->last_ns = now;
	}
	hit->tokens += (double)(now - hit->last_ns) / 1e9 * rl->rate;
	if (hit->tokens > rl->burst)
		hit->tokens = rl->burst;
	hit->last_ns = now;
	bool ok = hit->tokens >= 1;
	if (ok)
		hit->tokens -= 1;
	else
		*retry_ms = (int)((1 - hit->tokens) / rl->rate * 1000) + 1;
	pthread_mutex_unlock(&rl->lock);
	return ok;
}
