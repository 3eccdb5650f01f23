/*
 * tclaim: a replica's claim to copy a template's version to a host
 * (docs/cluster.md "Templates"; the store's template_copies). The claim
 * is a short lease that a thread of the claimer renews while the copy
 * runs, so that a replica that dies mid-copy (kill -9, its machine
 * gone) holds the copy no longer than one lease: the renewing stops with
 * it, and another replica's next round takes the claim over. A copy may
 * take minutes (an export and an import of gigabytes); a lease as long
 * as the longest copy would leave a dead replica's claim that long.
 *
 *   take   store_template_copy_claim for lease_ms; 1: ours, and renewed
 *          every lease_ms / 3 until tclaim_end; 0: another replica's
 *   end    renewing stops; the claim is released (the copy failed: any
 *          replica may try) or held keep_ms more (the copy made: until
 *          the host's heartbeat lists it)
 *
 * Should a renewal find the claim taken over (this replica stalled past
 * its lease), the copy goes on and tclaim_end says so: two copies of one
 * version, each checked by its digest on the host, not a wrong one.
 */
#ifndef KILN_HOSTIF_TCLAIM_H
#define KILN_HOSTIF_TCLAIM_H

#include "common/periodic.h"
#include "store/cluster.h"

#include <stdbool.h>
#include <stdint.h>

struct tclaim {
	struct store *st;
	char name[32], host_id[ID_MAX], owner[24];
	int64_t version, lease_ms;
	struct periodic renew;
	bool renewing;
	bool lost;		/* a renewal found another replica's claim */
	int renewals;		/* made while the copy ran */
};

/* Claim name's version for host_id as owner: 1 when it is ours (renewed
 * until tclaim_end), 0 when another replica's claim holds, -errno when
 * the store did not answer (nothing held). */
int tclaim_take(struct tclaim *c, struct store *st, const char *name, int64_t version, const char *host_id,
		const char *owner, int64_t lease_ms);

/* Stop renewing c; keep_ms 0: release the claim; > 0: hold it that
 * long from now. 0, or -1 when the claim was lost while renewed (the
 * store's claim is then another's and left to it). */
int tclaim_end(struct tclaim *c, int64_t keep_ms);

#endif
