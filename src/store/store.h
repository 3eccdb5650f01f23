/*
 * store: kilnd's durable state (workspaces, API keys, sandboxes, snapshots
 * and their accounting) as records, over a db driver (db.h). One store is
 * shared by every thread; calls are serialized inside.
 *
 * Sandbox records are never removed: a deleted sandbox keeps its row with
 * state "deleted", so usage stays summable and a restart never loses a
 * record it acknowledged.
 */
#ifndef KILN_STORE_STORE_H
#define KILN_STORE_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "store/sbx_state.h"

#define ID_MAX   40	/* "sbx_" + 20 characters, with room to spare */
#define NAME_MAX_LEN 64

struct store;

/* Open (creating it and its schema if needed) the database at target:
 * "sqlite:PATH" or a bare PATH. */
int store_open(const char *target, struct store **out);
void store_close(struct store *st);

/* ---- workspaces and API keys ------------------------------------------ */

/* The id of the workspace called name, created if missing. */
int store_workspace_ensure(struct store *st, const char *name, char id[ID_MAX]);

struct key_row {
	char id[ID_MAX], workspace[ID_MAX], workspace_name[NAME_MAX_LEN];
	char name[NAME_MAX_LEN], prefix[24];
	int64_t created_ms, revoked_ms;
};

/* Record a key by its hash (the key itself is never stored). */
int store_key_add(struct store *st, const char *workspace, const char *name,
		  const char *hash, const char *prefix, char id[ID_MAX]);
/* A workspace's plan and its limits (JSON object text, or NULL) over the
 * plan's; set makes the workspace if it is new. get: -ENOENT when the
 * workspace has no plan of its own; *limits is malloc'd (or NULL). */
int store_plan_set(struct store *st, const char *workspace, const char *plan, const char *limits);
int store_plan_get(struct store *st, const char *workspace, char plan[NAME_MAX_LEN], char **limits);
/* The creation times (ms) of the workspace's sandboxes made at since_ms
 * or later, oldest first, at most cap of them in times; *n how many. */
int store_creates_since(struct store *st, const char *workspace, int64_t since_ms,
			int64_t *times, int cap, int *n);
/* The workspace of the unrevoked key with this hash; -ENOENT if none. */
int store_key_lookup(struct store *st, const char *hash, char workspace[ID_MAX]);
typedef int store_key_fn(void *ctx, const struct key_row *k);
int store_key_each(struct store *st, store_key_fn *fn, void *ctx);
/* Revoke by key id or by its printed prefix; -ENOENT if none matched. */
int store_key_revoke(struct store *st, const char *id_or_prefix);

/* ---- sandboxes ---------------------------------------------------------- */

struct sbx_row {
	char id[ID_MAX], workspace[ID_MAX];
	char template[NAME_MAX_LEN];
	enum sbx_state state;		/* kept by its name (sbx_state.h) */
	char parent[ID_MAX];		/* forked from, or "" */
	char snapshot[ID_MAX];		/* created from this snapshot, or "" */
	int vcpus, memory_mib;
	int64_t ttl_seconds;		/* idle timeout; 0: none */
	bool ttl_absolute;		/* ttl_seconds counts from creation, activity or not */
	bool idle_hibernate;		/* idle: hibernated, not deleted... */
	int64_t retention_seconds;	/* ...and deleted after this much more (0: kept) */
	int64_t created_ms, updated_ms, deleted_ms, active_ms;	/* wall clock, ms */
	double ready_ms;
	int vmm_pid;			/* 0 when no VMM runs */
	int64_t vmm_start;		/* its start time (/proc/PID/stat field 22) */
	double cpu_seconds;		/* total, all VMM incarnations */
	double cpu_base;		/* of the incarnations that ended */
	double mem_mib_seconds;		/* resident memory integrated over time */
	double running_seconds;
	int64_t rss_bytes;		/* last sample */
	char *metadata;			/* JSON object text (heap, may be NULL) */
	char *env;			/* JSON object text */
	char *disks;			/* JSON array: the disk chain, base first */
	char error[256];		/* why it failed, or "" */
	int net_slot;			/* its network namespace's slot; 0: none */
	char *net_policy;		/* egress policy, JSON object text (or NULL: open) */
	char ended[16];			/* deleted: why ("deleted", "ttl", "failed"), else "" */
};

/* Free the heap strings of a row (not the row). */
void sbx_row_clear(struct sbx_row *r);
/* Deep copy; -ENOMEM. */
int sbx_row_copy(struct sbx_row *dst, const struct sbx_row *src);

int store_sandbox_save(struct store *st, const struct sbx_row *r);
int store_sandbox_load(struct store *st, const char *id, struct sbx_row *r);
typedef int store_sbx_fn(void *ctx, struct sbx_row *r);	/* r is owned by fn */
/* Every sandbox whose state is not "deleted". */
int store_sandbox_each_live(struct store *st, store_sbx_fn *fn, void *ctx);

/* ---- snapshots ---------------------------------------------------------- */

struct snap_row {
	char id[ID_MAX], workspace[ID_MAX], sandbox[ID_MAX];
	char template[NAME_MAX_LEN];
	int vcpus, memory_mib;
	int64_t created_ms, deleted_ms;
	char *disks;			/* JSON array, as in sbx_row */
	char *env;			/* the sandbox's env, inherited by creates */
};

void snap_row_clear(struct snap_row *r);
int store_snapshot_save(struct store *st, const struct snap_row *r);
/* -ENOENT unless it exists, is not deleted, and (if workspace is not
 * NULL) belongs to that workspace. */
int store_snapshot_load(struct store *st, const char *id, const char *workspace,
			struct snap_row *r);
typedef int store_snap_fn(void *ctx, struct snap_row *r);	/* owned by fn */
int store_snapshot_each_live(struct store *st, store_snap_fn *fn, void *ctx);

/* ---- exposed ports -------------------------------------------------------- */

/* A guest TCP port reachable through kilnd's proxy. */
struct port_row {
	char sandbox[ID_MAX], workspace[ID_MAX];
	int port;			/* 1..65535 */
	bool public;			/* reachable without an API key */
	int64_t created_ms;
};

/* Add, or change whether it is public (created_ms stays). */
int store_port_save(struct store *st, const struct port_row *r);
/* -ENOENT when the port is not exposed. */
int store_port_load(struct store *st, const char *sandbox, int port, struct port_row *r);
typedef int store_port_fn(void *ctx, const struct port_row *r);
/* The sandbox's exposed ports, by port number. */
int store_port_each(struct store *st, const char *sandbox, store_port_fn *fn, void *ctx);
/* -ENOENT when the port was not exposed. */
int store_port_delete(struct store *st, const char *sandbox, int port);
/* All of the sandbox's (it is gone). */
int store_port_delete_all(struct store *st, const char *sandbox);

/* ---- accounting ----------------------------------------------------------- */

struct usage {
	double cpu_seconds, mem_mib_seconds, running_seconds;
	int64_t sandboxes;		/* ever created in the workspace */
	int64_t live;			/* not deleted */
};

int store_usage_sum(struct store *st, const char *workspace, struct usage *u);

/* ---- ids ------------------------------------------------------------------ */

/* prefix + 20 random base32 characters (100 bits), e.g. "sbx_". */
int make_id(char out[ID_MAX], const char *prefix);
/* Wall clock in ms. */
int64_t wall_ms(void);

#endif
