/*
 * placement: which host of a cluster takes a new sandbox (docs/cluster.md
 * "Placement"). A pure choice over what the store says of each host that
 * may take one (store/cluster.h struct host_load: up, active, what its
 * placements reserve), so that the rule is tested apart from the HTTP
 * around it.
 *
 *   room      the template's memory fits in what the host offers less what
 *             is placed there; its vCPUs in what it offers times the
 *             overcommit
 *   template  built on the host (its heartbeat lists it); a host without
 *             it is never chosen. A workspace's template (copied between
 *             hosts): only a host with the newest version any of them
 *             lists (one whose copy is on its way waits for it), and
 *             never a version the name had before it was deleted (an
 *             old copy a host came back with: min_version)
 *   spread    of those with room, the one with the most memory free;
 *   pack      the one with the least (fill a host before the next)
 *   ties      the host that joined first (the store's order)
 */
#ifndef KILN_HOSTIF_PLACEMENT_H
#define KILN_HOSTIF_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "store/cluster.h"

enum placement_policy {
	PLACE_SPREAD,		/* the host with the most memory free */
	PLACE_PACK,		/* the host with the least memory free that fits */
};

struct placement_rule {
	enum placement_policy policy;
	int vcpu_overcommit;		/* vCPUs placed per vCPU a host offers (< 1: 1) */
	const char *template;
	bool newest;			/* only hosts with the newest version listed */
	int64_t min_version;		/* no host whose version is below this */
};

/* ops/template.h's name of a workspace's template (w, 10 hex digits,
 * _): built once and copied between hosts (docs/cluster.md
 * "Templates"); any other template each host builds its own. */
bool placement_workspace_template(const char *name);

/* The index of the host chosen among n, with the template's size there
 * in *vcpus and *memory_mib; -ENOENT when no host has the template built,
 * -EAGAIN when none that has it has room (errmsg() says which). */
int placement_choose(const struct placement_rule *rule, const struct host_load *hosts, int n,
		     int64_t *vcpus, int64_t *memory_mib);

/* A workspace's template (rule->newest) whose newest version is on its
 * way to a host with room: that version, when one of the n hosts lacks it
 * (lists an older one, or none: the cluster copies it there, remote_tmpl.c)
 * and has room for a sandbox of it; 0 when none. A create that found
 * only full hosts with the newest version is then told to retry, not
 * that the cluster is full. */
int64_t placement_copy_pending(const struct placement_rule *rule, const struct host_load *hosts, int n);

/* The size of template name as host h built it (its heartbeat's list):
 * 0, or -ENOENT. */
int placement_template_size(const struct host_row *h, const char *name, int64_t *vcpus,
			    int64_t *memory_mib);

/* The host to build a template on (docs/cluster.md "Templates"): of n
 * hosts that are up and active, the one with the fewest sandboxes, then
 * the most memory offered (a build boots a VM of its own); ties go to
 * the first. -EAGAIN when there is none. */
int placement_builder(const struct host_row *hosts, int n);

#endif
