/*
 * retry: the Retry-After of a create refused by a workspace's `running`
 * limit (docs/billing.md "Limits"), the same on one box (host/ws_caps.c)
 * and in the cluster (store/store_placement.c). Nothing says when one of
 * the sandboxes holding the slots ends, so the answer is a poll interval:
 * short while some of them are still starting (a start that fails frees
 * its slot within about a second, and a client's burst learns quickly
 * where it stands), longer when all of them are running (a slot frees
 * only when one is deleted, hibernated or ends by its TTL).
 */
#ifndef KILN_COMMON_RETRY_H
#define KILN_COMMON_RETRY_H

#include <stdint.h>

#define RETRY_RUNNING_STARTING_MS 1000
#define RETRY_RUNNING_FULL_MS 10000

/* starting: how many of the slots are held by sandboxes still starting
 * (reservations and wakes in flight included). */
static inline int64_t retry_running_ms(int64_t starting)
{
	return starting > 0 ? RETRY_RUNNING_STARTING_MS : RETRY_RUNNING_FULL_MS;
}

#endif
