/*
 * periodic: a thread that calls fn(ctx) at once and then every period_ms
 * until stopped, for kilnd's background duties (the cluster monitor, a
 * host's heartbeat, the credit watch). Stopping wakes it from its wait,
 * so periodic_stop returns within one call of fn, not one period.
 */
#ifndef KILN_COMMON_PERIODIC_H
#define KILN_COMMON_PERIODIC_H

#include <pthread.h>
#include <stdbool.h>

struct periodic {
	void (*fn)(void *ctx);
	void *ctx;
	int period_ms;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool running, stop, kicked;
};

/* Start p's thread (name: for the error message). -errno if it could not. */
int periodic_start(struct periodic *p, const char *name, int period_ms, void (*fn)(void *), void *ctx);
/* Have fn called again now, not at the end of the period (it runs once
 * more after the call in progress, if one is). */
void periodic_kick(struct periodic *p);
/* Stop it and wait for it; nothing if it is not running. */
void periodic_stop(struct periodic *p);

#endif
