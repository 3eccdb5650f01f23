#include "host/host_events.h"
#include "common/err.h"

#include <errno.h>
#include <pthread.h>

/* One process-wide list: subscribers are few (a dashboard tab each). */
#define MAX_SUBSCRIBERS 256

static struct {
	host_event_fn *fn;
	void *ctx;
} subs[MAX_SUBSCRIBERS];
static int nsubs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int host_events_subscribe(host_event_fn *fn, void *ctx)
{
	pthread_mutex_lock(&lock);
	int rc = 0;
	if (nsubs == MAX_SUBSCRIBERS)
		rc = errf(ENOSPC, "too many event streams open (%d)", MAX_SUBSCRIBERS);
	else
		subs[nsubs].fn = fn, subs[nsubs].ctx = ctx, nsubs++;
	pthread_mutex_unlock(&lock);
	return rc;
}

void host_events_unsubscribe(host_event_fn *fn, void *ctx)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nsubs; i++) {
		if (subs[i].fn == fn && subs[i].ctx == ctx) {
			subs[i] = subs[--nsubs];
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

void host_events_emit(const struct host_event *e)
{
	/* Held while calling: unsubscribe then cannot return while a call
	 * into the subscriber is under way. */
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nsubs; i++)
		subs[i].fn(subs[i].ctx, e);
	pthread_mutex_unlock(&lock);
}
