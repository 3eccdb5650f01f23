/*
 * meter: what a sandbox used since its usage was last saved, split between
 * the hours it was used in (usage_hours, store.h), so that a day's or a
 * month's bill holds exactly its own use (docs/billing.md).
 *
 * A sample covers the wall-clock span [end - dt, end) and is spread over
 * it evenly: the CPU it burned, its working set times the time, its
 * running time. A sample that crosses an hour's end (midnight, the 1st of
 * a month) is cut there: a 10 s sample from 23:59:55 to 00:00:05 puts 5 s
 * of each in either day. The store holds whole units (microseconds,
 * MiB-seconds, milliseconds); a save rounds each hour to them and keeps
 * what rounding left (under half a unit an hour) for the next hour saved,
 * so nothing is lost or counted twice.
 *
 * Concurrency: none of its own; the sandbox's lock guards its meter.
 */
#ifndef KILN_HOST_METER_H
#define KILN_HOST_METER_H

#include <stdint.h>

struct store;

/* Hours a meter holds between saves: two while saves succeed (a sample is
 * at most an hour, --sample-ms); more while the store refuses them. Past
 * that, a new hour's use joins the newest one held. */
#define METER_HOURS 8

struct meter {
	struct meter_hour {
		int64_t hour_ms;		/* its start, wall clock (UTC) */
		double cpu_s, mem_mib_s, run_s;
	} h[METER_HOURS];		/* oldest first */
	int n;
	/* What rounding left of the hours saved: added to the next hour. */
	double carry_cpu_s, carry_mem_mib_s, carry_run_s;
};

/* Add a sample ending at end_ms (wall clock) that lasted dt_ms: cpu_s
 * seconds of active vCPU time and a working set of pss_mib MiB throughout,
 * each hour of the span getting its share. dt_ms <= 0 adds the CPU time
 * alone, to end_ms's hour. */
void meter_add(struct meter *m, int64_t end_ms, int64_t dt_ms, double cpu_s, double pss_mib);

/* Add each hour held to the sandbox's row of that hour (store_usage_add),
 * oldest first; an hour saved leaves the meter, one the store refused
 * stays (with the ones after it) for the next save. An hour that rounds
 * to nothing is carried, not written. 0 or the store's -errno. */
int meter_save(struct meter *m, struct store *st, const char *workspace, const char *sandbox);

#endif
