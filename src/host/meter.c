/*
 * meter: a sandbox's use, cut at the hours it was used in (meter.h).
 */
#include "host/meter.h"
#include "store/store.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define HOUR_MS 3600000LL

/* The hour's bucket, made if new; the newest one when all are taken (the
 * store has refused saves for hours: its use is kept, a little late). */
static struct meter_hour *hour_of(struct meter *m, int64_t hour_ms)
{
	for (int i = 0; i < m->n; i++)
		if (m->h[i].hour_ms == hour_ms)
			return &m->h[i];
	if (m->n == METER_HOURS)
		return &m->h[m->n - 1];
	struct meter_hour *h = &m->h[m->n++];
	*h = (struct meter_hour){ .hour_ms = hour_ms };
	return h;
}

void meter_add(struct meter *m, int64_t end_ms, int64_t dt_ms, double cpu_s, double pss_mib)
{
	if (dt_ms <= 0) {
		hour_of(m, end_ms / HOUR_MS * HOUR_MS)->cpu_s += cpu_s;
		return;
	}
	/* Each hour the span [end - dt, end) touches gets the part of the
	 * sample its piece of the span is: the CPU time in proportion, the
	 * working set and the running time for its own milliseconds. */
	for (int64_t t = end_ms - dt_ms; t < end_ms;) {
		int64_t hour = t / HOUR_MS * HOUR_MS;
		int64_t to = hour + HOUR_MS < end_ms ? hour + HOUR_MS : end_ms;
		double ms = (double)(to - t);
		struct meter_hour *h = hour_of(m, hour);
		h->cpu_s += cpu_s * ms / (double)dt_ms;
		h->mem_mib_s += pss_mib * ms / 1000;
		h->run_s += ms / 1000;
		t = to;
	}
}

/* x to the nearest whole, halves up; *rest gets what is left, in
 * [-0.5, 0.5): a rest added to use (>= 0) never rounds below zero. */
static int64_t whole(double x, double *rest)
{
	double w = floor(x + 0.5);
	*rest = x - w;
	return (int64_t)w;
}

int meter_save(struct meter *m, struct store *st, const char *workspace, const char *sandbox)
{
	int done = 0, rc = 0;
	for (; done < m->n; done++) {
		const struct meter_hour *h = &m->h[done];
		double cpu_rest, mem_rest, run_rest;
		struct usage_hour u = { .hour_ms = h->hour_ms,
					.cpu_us = whole((h->cpu_s + m->carry_cpu_s) * 1e6, &cpu_rest),
					.mem_mib_s = whole(h->mem_mib_s + m->carry_mem_mib_s, &mem_rest),
					.run_ms = whole((h->run_s + m->carry_run_s) * 1e3, &run_rest) };
		if (u.cpu_us || u.mem_mib_s || u.run_ms) {
			snprintf(u.workspace, sizeof u.workspace, "%s", workspace);
			snprintf(u.sandbox, sizeof u.sandbox, "%s", sandbox);
			if ((rc = store_usage_add(st, &u)) < 0)
				break;	/* this hour and the ones after it stay */
		}
		m->carry_cpu_s = cpu_rest / 1e6;
		m->carry_mem_mib_s = mem_rest;
		m->carry_run_s = run_rest / 1e3;
	}
	memmove(m->h, m->h + done, (size_t)(m->n - done) * sizeof m->h[0]);
	m->n -= done;
	return rc;
}
