/*
 * sbx_state: a sandbox's lifecycle state and the moves between them.
 *
 *   creating -> running | deleted (the create failed)
 *   running -> paused | hibernated | failed | deleting
 *   paused -> running | hibernated | failed | deleting  (vCPUs stopped,
 *         memory and the VMM kept: POST .../pause and .../resume)
 *   hibernated -> running | failed | deleting
 *   failed -> running (a persistent one, booted again from its disk) | deleting
 *   deleting -> deleted
 *   deleted: final (the record stays, for usage)
 *   lost: what a cluster's API answers for a sandbox whose host stopped
 *         heartbeating (docs/cluster.md); never kept by a host: the
 *         host's own record says what it was, and it is that again
 *         when the host is back
 *
 * A record is born creating. The names are what the API answers and the
 * store keeps (its `state` column); the enum is what the code compares.
 * Every change of state goes through sbx_state_move, the one place that
 * says which moves are legal (and, with several API replicas, where the
 * compare-and-set in the database goes).
 */
#ifndef KILN_STORE_SBX_STATE_H
#define KILN_STORE_SBX_STATE_H

#include <stdbool.h>

enum sbx_state {
	SBX_CREATING,
	SBX_RUNNING,
	SBX_HIBERNATED,
	SBX_FAILED,
	SBX_DELETING,
	SBX_DELETED,
	SBX_LOST,
	SBX_PAUSED,
	SBX_NSTATES
};

/* "running"...; "invalid" for a value outside the enum. */
const char *sbx_state_name(enum sbx_state s);
/* The state named name; -EINVAL with errmsg() set for an unknown name. */
int sbx_state_parse(const char *name, enum sbx_state *out);
/* May a sandbox in from go to to? */
bool sbx_state_legal(enum sbx_state from, enum sbx_state to);
/* Move *state to to if that is legal: 0, or -EBUSY with errmsg() set
 * ("cannot go from running to creating") and *state unchanged. */
int sbx_state_move(enum sbx_state *state, enum sbx_state to);

#endif
