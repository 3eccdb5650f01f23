/*
 * kilnd/cluster: kilnd's cluster commands and a host's link to its
 * cluster (docs/cluster.md).
 *
 *   kilnd cluster token create [--expires SECONDS] [--uses N|any]
 *   kilnd cluster token list | revoke ID|PREFIX
 *   kilnd cluster hosts [list] | cordon H | uncordon H | drain H | revoke H
 *
 * The agent link (kilnd --role agent --api URL --join-token T) joins the
 * cluster once, keeps the credential it was given in DATA/cluster.json
 * (0600), and heartbeats with the host's capacity until kilnd stops.
 */
#ifndef KILN_KILND_CLUSTER_H
#define KILN_KILND_CLUSTER_H

#include <stdint.h>

struct store;

struct cluster_opts {
	int64_t expires_s;		/* token create: 0: the default (1 hour) */
	int64_t uses;			/* token create: 0: the default (1); -1: any */
};

/* Run `kilnd cluster ARGS...`; 0, or exits 2 with a message. */
int cluster_cmd(struct store *st, const struct cluster_opts *o, int argc, char **argv);

struct agent_link_config {
	const char *api_url;		/* the cluster's API endpoint */
	const char *join_token;		/* for the first start; then DATA/cluster.json */
	const char *ca_file;		/* PEM CA for an https API, or NULL: the system's */
	const char *advertise;		/* the URL the API reaches this host at */
	const char *name;		/* this host's name (default: its hostname) */
	const char *data_dir;
	struct store *store;		/* for the live sandbox count */
	struct hostif *hostif;		/* for the templates built here */
	int64_t offer_vcpus, offer_memory_mib;	/* what placement may use; 0: the machine's */
	int64_t orphan_grace_ms;	/* a sandbox no API claims is deleted once ready
					 * this long (0: AGENT_ORPHAN_GRACE_MS) */
};

#define AGENT_ORPHAN_GRACE_MS 30000

/* Join if this host has no credential yet (failing: -errno, errmsg()),
 * then heartbeat from a thread. */
int agent_link_start(const struct agent_link_config *cfg);
void agent_link_stop(void);
/* After a start: the key the cluster's API calls this host with. */
const char *agent_link_api_key(void);

#endif
