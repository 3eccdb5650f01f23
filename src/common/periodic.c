#include "common/periodic.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>
#include <time.h>

static void *run(void *arg)
{
	struct periodic *p = arg;
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		p->kicked = false;
		pthread_mutex_unlock(&p->lock);
		p->fn(p->ctx);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += p->period_ms / 1000;
		ts.tv_nsec += (long)(p->period_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&p->lock);
		while (!p->stop && !p->kicked)
			if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT)
				break;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int periodic_start(struct periodic *p, const char *name, int period_ms, void (*fn)(void *), void *ctx)
{
	p->fn = fn;
	p->ctx = ctx;
	p->period_ms = period_ms > 0 ? period_ms : 1000;
	p->stop = p->kicked = false;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	int e = pthread_create(&p->thread, NULL, run, p);
	if (e)
		return errf(e, "%s thread: %s", name, strerror(e));
	p->running = true;
	return 0;
}

void periodic_kick(struct periodic *p)
{
	if (!p->running)
		return;
	pthread_mutex_lock(&p->lock);
	p->kicked = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void periodic_stop(struct periodic *p)
{
	if (!p->running)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	p->running = false;
}
