/*
 * hostif_remote: the host interface over HTTP to the host agents of a
 * cluster (docs/cluster.md), for kilnd --role api. A create is placed on
 * a host (store/cluster.h store_place: room by memory and vCPUs, the
 * template built there, spread or pack) and recorded in the cluster's
 * store; every later call finds the sandbox's host there and calls it
 * (api/h_host.c answers). Guest access is a relay: an upgraded HTTP
 * connection to the host that carries the guest agent's stream.
 *
 * What a host that stopped heartbeating has shows as state "lost" with
 * the reason; calls that need the host fail with -EHOSTDOWN naming it.
 */
#ifndef KILN_HOSTIF_HOSTIF_REMOTE_H
#define KILN_HOSTIF_HOSTIF_REMOTE_H

#include "hostif/hostif.h"
#include "hostif/placement.h"

struct store;
struct metrics;

/* vCPUs placed per vCPU a host offers: guests mostly wait, and a sandbox
 * that runs gets its vCPU time from the host's scheduler. */
#define HOST_VCPU_OVERCOMMIT 8


struct remote_config {
	struct store *store;		/* the cluster's (PostgreSQL) */
	enum placement_policy policy;
	const char *ca_file;		/* PEM CA for https hosts, or NULL: the system's */
	int vcpu_overcommit;		/* vCPUs placed per vCPU a host offers (>= 1) */
	struct metrics *metrics;	/* creates and forks timed here (the API's /metrics), or NULL */
};

/* Fill *out; cfg is copied. -ENOMEM. */
int hostif_remote(struct hostif *out, const struct remote_config *cfg);
void hostif_remote_free(struct hostif *hi);

#endif
