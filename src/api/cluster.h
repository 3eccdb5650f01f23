/*
 * cluster: the API's side of a kiln cluster (docs/cluster.md): hosts join
 * with a token an operator made and then heartbeat with their own
 * credential (h_cluster.c); a monitor marks down the hosts whose
 * heartbeats stopped.
 */
#ifndef KILN_API_CLUSTER_H
#define KILN_API_CLUSTER_H

#include <stdint.h>

struct store;

#define JOIN_TOKEN_PREFIX "kjt_"		/* a join token: this and 32 base32 characters */
#define NODE_CRED_PREFIX "kiln_node_"		/* a host's credential: this and 32 */
#define HOST_KEY_PREFIX "kiln_hk_"		/* the API's key for calls to a host: this and 32 */
#define HOST_BEAT_MS 3000			/* how often a host heartbeats */
#define HOST_DOWN_MS 10000			/* silent this long: down (docs/cluster.md) */

/* Every second, mark down the hosts silent for down_ms. */
int cluster_monitor_start(struct store *st, int64_t down_ms);
void cluster_monitor_stop(void);

#endif
