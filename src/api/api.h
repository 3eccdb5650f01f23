/*
 * api: the control-plane role of kilnd. It owns the HTTP server, the store,
 * authentication, rate limits and metrics, and calls the host agent (the
 * sandbox service of this machine, src/agent/host.h) for everything that
 * touches a VM. With --role=api on several hosts the agent calls become
 * requests to remote agents; on one box they are function calls.
 */
#ifndef KILN_API_API_H
#define KILN_API_API_H

#include "kilnd/config.h"

struct store;
struct host;
struct metrics;
struct ratelimit;

struct api {
	const struct config *cfg;
	struct store *store;
	struct host *host;
	struct metrics *metrics;
	struct ratelimit *rl;
	void *mhd;			/* struct MHD_Daemon */
};

#endif
