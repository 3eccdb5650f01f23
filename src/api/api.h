/*
 * api: the control-plane role of kilnd. It owns the HTTP server, the store,
 * authentication, rate limits and metrics, and calls the host interface
 * (src/hostif/hostif.h) for everything that touches a VM: on one box its
 * local implementation, function calls into the host agent of this
 * process; with --role=api on several hosts, requests to remote agents.
 */
#ifndef KILN_API_API_H
#define KILN_API_API_H

#include <stdint.h>

#include "host/host_config.h"	/* DATA_DIR_MAX */

/* The API's settings, filled by kilnd from its command line
 * (src/kilnd/config.c, config_api); read-only once the server runs. */
struct api_config {
	char listen[128];		/* host:port served */
	char data_dir[DATA_DIR_MAX + 1];	/* tmp/ for request bodies */
	char role[8];			/* reported by /v1/health */
	char domain[254];		/* host routing PORT-ID.DOMAIN; "" : off */
	char mcp_origins[1024];		/* Origins allowed on MCP besides loopback */
	char tls_cert[PATH_MAX];	/* PEM certificate chain: serve HTTPS; "" : HTTP */
	char tls_key[PATH_MAX];		/* its PEM private key */
	char web_dir[PATH_MAX];		/* the dashboard's files (BIN/web) */
	int64_t max_ttl;		/* seconds */
	uint64_t max_json_bytes, max_file_bytes, max_exec_output;
	int max_connections;
	int max_inflight, max_uploads;	/* per workspace under way at once; 0: no cap */
	int max_tunnels;		/* WebSockets per workspace open at once; 0: no cap */
};

struct store;
struct hostif;
struct metrics;
struct ratelimit;
struct plans;

struct api {
	const struct api_config *cfg;
	struct store *store;
	struct hostif *hostif;		/* every sandbox operation goes through it */
	struct metrics *metrics;
	struct ratelimit *rl;		/* per workspace */
	struct windows *windows;	/* creates windows, for X-RateLimit-* (window.h) */
	struct ratelimit *anon_rl;	/* per client address, for requests with no valid key */
	struct inflight *inflight;	/* requests under way per workspace (--max-inflight) */
	struct inflight *uploads;	/* uploads under way per workspace (--max-uploads) */
	struct inflight *tunnels;	/* WebSockets open per workspace (--max-tunnels) */
	struct inflight *exec_buffer;	/* bytes of exec output held per workspace (--max-exec-buffer) */
	uint8_t preview_key[32];	/* signs preview links (proxy/preview.h) */
	const struct plans *plans;	/* what workspaces may start (ops/plan.h) */
	struct event_log *events;	/* what GET /v1/events streams (event_log.h); NULL on an agent */
	void *mhd;			/* struct MHD_Daemon */
	/* --role agent, once joined: the key the cluster's API calls this
	 * host with (ROUTE_HOST); NULL otherwise. */
	const char *volatile host_key;
	/* --role agent: only the host protocol (ROUTE_HOST), /healthz and
	 * /metrics are served; the cluster's public API is the API role's,
	 * which needs no privilege (docs/security.md "Privilege map"). */
	bool host_only;
};

#endif
