/*
 * host_events: who wants to hear of sandbox record changes. Every time a
 * sandbox's record is saved (sandbox_save: a state change, a create or
 * fork reaching "running", an accounting sample), the subscribers are
 * called with its workspace, id, state and accounting figures. Front ends (the dashboard's
 * event stream, src/api/h_events.c) subscribe; the agent never waits on
 * them: a callback must only copy what it needs and return.
 */
#ifndef KILN_HOST_HOST_EVENTS_H
#define KILN_HOST_HOST_EVENTS_H

#include "host/host_types.h"	/* struct host_event, host_event_fn */

/* -ENOSPC when too many are subscribed. */
int host_events_subscribe(host_event_fn *fn, void *ctx);
/* After it returns, fn is never called again with ctx. */
void host_events_unsubscribe(host_event_fn *fn, void *ctx);
/* Tell every subscriber (sandbox_save calls it). */
void host_events_emit(const struct host_event *e);

#endif
