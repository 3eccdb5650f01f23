/*
 * store/cluster: the records of a kiln cluster (docs/cluster.md): join
 * tokens an operator makes (`kilnd cluster token create`), and the hosts
 * that joined with one, each with its own credential. Secrets are given
 * to the store only as their hex SHA-256 (64 characters); the store never
 * sees a token or a credential itself. Errors as in store.h.
 */
#ifndef KILN_STORE_CLUSTER_H
#define KILN_STORE_CLUSTER_H

#include <stdint.h>

#include "store/store.h"

#define TOKEN_PREFIX_LEN 12	/* "kjt_" and 8 characters: enough to tell tokens apart */

struct join_token_row {
	char id[ID_MAX];
	char prefix[TOKEN_PREFIX_LEN + 1];
	int64_t created_ms, expires_ms;
	int64_t uses_left;		/* -1: any number */
	int64_t revoked_ms;		/* 0: not revoked */
};

int store_join_token_add(struct store *st, const char *hash, const char *prefix,
			 int64_t expires_ms, int64_t uses, char id[ID_MAX]);
typedef int store_join_token_fn(void *ctx, const struct join_token_row *r);
int store_join_token_each(struct store *st, store_join_token_fn *fn, void *ctx);
/* By id or prefix; -ENOENT if no such token is active. */
int store_join_token_revoke(struct store *st, const char *id_or_prefix);

/* A host joins: one use of the token whose hash is token_hash is taken
 * and the host is added with its credential's hash, in one transaction,
 * so that a single-use token admits exactly one host however many try at
 * once. -EACCES with the reason (unknown, expired, revoked, used up: the
 * caller logs it, the joining host is told only "refused"); -EEXIST if a
 * host of that name exists. */
struct host_join {
	const char *token_hash, *credential_hash;
	const char *api_key;		/* what the API shows the host when it calls it */
	const char *name, *url, *version, *templates;	/* templates: JSON text */
	int64_t vcpus, memory_mib, disk_mib;
};
int store_host_join(struct store *st, const struct host_join *j, char id[ID_MAX]);

struct host_row {
	char id[ID_MAX], name[NAME_MAX_LEN], url[256], admin[16], health[16];
	char reason[160], version[64];
	char api_key[64];		/* the API's key for calls to the host ("" before version 8) */
	int64_t vcpus, memory_mib, disk_mib, sandboxes;
	int64_t joined_ms, heartbeat_ms, revoked_ms;
	char *templates;		/* JSON text (malloc'd), or NULL */
};
void host_row_clear(struct host_row *r);

/* The host whose credential hashes to hash: -EACCES "unknown" or
 * "revoked" (the reason in errmsg()). */
int store_host_auth(struct store *st, const char *hash, struct host_row *out);
/* A heartbeat: what the host reports now; a host that was down is up
 * again. */
struct host_beat {
	int64_t vcpus, memory_mib, disk_mib, sandboxes;
	const char *version, *templates;
};
int store_host_beat(struct store *st, const char *id, const struct host_beat *b);
/* Mark down every host up whose last heartbeat is older than
 * before_ms, with reason; *marked how many (may be NULL). */
int store_hosts_mark_down(struct store *st, int64_t before_ms, const char *reason, int *marked);
typedef int store_host_fn(void *ctx, const struct host_row *r);
int store_host_each(struct store *st, store_host_fn *fn, void *ctx);
/* An operator's change to a host named by id or name: admin "active",
 * "cordoned", "draining" or "revoked" (revoked is final). -ENOENT, or
 * -EINVAL for a revoked host. */
int store_host_set_admin(struct store *st, const char *id_or_name, const char *admin);

/* ---- templates deleted (docs/cluster.md "Templates") -------------------------------- */

/* Template name (as the hosts know it) was deleted at its version
 * (the newest any host had): kept at the higher of this and what was
 * recorded before. */
int store_template_deleted_set(struct store *st, const char *name, int64_t version);
/* The version name was deleted at: -ENOENT when it was not (or was
 * built again since). */
int store_template_deleted_get(struct store *st, const char *name, int64_t *version);
/* Every name with a deletion in force or a version floor (below), each
 * once, in one read: fn(ctx, name, deleted, floor), deleted the version
 * of its deletion in force (-1: none), floor that of
 * store_template_version_floor. A non-zero return stops the walk and is
 * returned. */
typedef int store_template_marks_fn(void *ctx, const char *name, int64_t deleted, int64_t floor);
int store_template_marks_each(struct store *st, store_template_marks_fn *fn, void *ctx);
/* A new build of name: its deletion no longer holds. Idempotent. */
int store_template_deleted_clear(struct store *st, const char *name);
/* The highest version name was ever deleted at (0: never), which
 * store_template_deleted_clear leaves: a new build of the name starts
 * above it (remote_template_build), and placement takes no copy at or
 * below it. */
int store_template_version_floor(struct store *st, const char *name, int64_t *version);

/* ---- template copies (docs/cluster.md "Templates") --------------------------------- */

/* Replica owner (a random id of its own) means to copy name's version to
 * host_id: 1 when the copy is its to make (no claim, its own, or one past
 * its lease), held for lease_ms from now; 0 when another replica's claim
 * holds. Its own claim again sets a new lease (a copy made: a short one,
 * so that the host's heartbeat says it has it before another copies). */
int store_template_copy_claim(struct store *st, const char *name, int64_t version, const char *host_id,
			      const char *owner, int64_t lease_ms);
/* owner's copy failed: its claim goes, so that any replica may try. */
int store_template_copy_release(struct store *st, const char *name, int64_t version, const char *host_id,
				const char *owner);

/* ---- placement (docs/cluster.md "Placement") ---------------------------------------- */

/* A host that may take a sandbox now (joined, not revoked, up, active),
 * with what the placements not yet ended reserve on it. */
struct host_load {
	struct host_row host;
	int64_t vcpus, memory_mib, sandboxes;
};
/* Choose one of n hosts: its index, or -errno with errmsg() (-EAGAIN:
 * none has room). Called inside the placement's transaction. */
typedef int store_place_fn(void *ctx, const struct host_load *hosts, int n);

/* A workspace's caps counted over the whole cluster (each host counts only
 * its own share): sandboxes creating or running, reservations included,
 * and sandboxes made in a sliding window. 0: no cap. */
struct place_caps {
	int64_t running, creates, window_ms;
};
/* What the count found: the cap that refused (-EDQUOT), and the window's
 * use either way (for X-RateLimit-*). */
struct place_count {
	char limit[16];			/* "running" or "creates"; "" when admitted */
	int64_t value;			/* that cap */
	int64_t retry_after_ms;		/* when trying again may succeed; 0: unknown */
	int64_t running;		/* creating or running (reservations and wakes included) */
	int64_t creates_used;		/* in the window, this request's included if admitted */
	int64_t reset_ms;		/* wall ms the window's oldest create leaves it; 0: none */
};

struct placement {
	const char *workspace, *kind;	/* kind: "sandbox", "snapshot", "volume" or "wake" */
	int64_t vcpus, memory_mib;	/* of each */
	int n;				/* how many (a fork's children); 0 as 1 */
	const char *host_id;		/* where they must go (a fork, a create from a snapshot:
					   where the parent is; no room check); NULL: fn chooses */
	const struct place_caps *caps;	/* NULL: none */
	struct place_count *count;	/* with caps */
	/* kind "wake": the hibernated sandbox a wake starts, held as running
	 * (reservation "wake_ID", on host_id) until its record says it runs
	 * (store_wake_done) or for WAKE_STALE_MS; it is no create. */
	const char *wake_of;
};
/* Reserve p on the host fn chooses (or p->host_id), in one transaction
 * that holds the cluster's placement lock: two API replicas placing at
 * once see each other's reservations, so neither places past a host's
 * room nor a workspace's caps. res_ids gets the n reservations' ids
 * ("res_..."; rename each to a sandbox's, drop what the create did not
 * use), *host the chosen host (left empty with p->host_id). -EDQUOT when
 * a cap refused, *p->count saying which. */
int store_place(struct store *st, const struct placement *p, store_place_fn *fn, void *ctx,
		char (*res_ids)[ID_MAX], struct host_row *host);
/* Record id as placed on host_id (a fork's child, a snapshot: where their
 * parent is). */
int store_placement_add(struct store *st, const char *id, const char *host_id, const struct placement *p);
/* Reservation from becomes sandbox to, of the size the host made it. */
int store_placement_rename(struct store *st, const char *from, const char *to, int64_t vcpus,
			   int64_t memory_mib);
int store_placement_drop(struct store *st, const char *id);
/* The wake of sandbox id is over (it runs, or it failed): its hold goes. */
int store_wake_done(struct store *st, const char *id);
/* It ended (deleted): its reservation is free, and a sandbox's exposed
 * ports are gone. Idempotent. */
int store_placement_end(struct store *st, const char *id);
/* The host the workspace's id (sandbox or snapshot) is placed on:
 * -ENOENT if the workspace has no such placement. *ended whether the
 * API saw it end (may be NULL). */
int store_placement_host(struct store *st, const char *ws, const char *id, struct host_row *host,
			 bool *ended);
/* Each placement of kind not yet ended, of workspace ws (NULL: all),
 * oldest first, with its host. */
typedef int store_placed_fn(void *ctx, const char *id, const char *ws, const struct host_row *h);
/* Is id of workspace ws placed on host_id (ended or not)? 0, or -ENOENT:
 * what a host may send records of (docs/cluster.md "Records"). */
int store_placement_is(struct store *st, const char *id, const char *ws, const char *host_id);
/* The ids of the sandboxes placed on host_id and not ended, each to fn
 * (what the host's reconciliation keeps: docs/cluster.md). */
typedef int store_id_fn(void *ctx, const char *id);
int store_placement_ids(struct store *st, const char *host_id, store_id_fn *fn, void *ctx);
int store_placement_each(struct store *st, const char *ws, const char *kind, store_placed_fn *fn,
			 void *ctx);

/* How many sandboxes of the cluster are in each state but deleted
 * (count indexed by enum sbx_state; the deleted one stays 0): a
 * replica's kiln_sandboxes gauge. */
int store_sandbox_states(struct store *st, int64_t count[SBX_NSTATES]);

#endif
