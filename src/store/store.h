/*
 * store: kilnd's durable state (workspaces, API keys, sandboxes, snapshots
 * and their accounting) as records, over a db driver (db.h): SQLite for
 * one box, PostgreSQL for several kilnd sharing one database. One store
 * is shared by every thread: on SQLite calls are serialized inside, on
 * PostgreSQL they run at once on a pool of connections.
 *
 * Every call returns 0 or -errno with errmsg() set. -EAGAIN means the
 * database cannot be reached now ("database unavailable: ..."; the API
 * answers 503): nothing was decided, and a later call reconnects by itself.
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
 * "sqlite:PATH", a bare PATH, or a libpq URI "postgresql://..." (or
 * "postgres://...") whose query may add pool=N (1..64, default 4: how
 * many connections, so how many calls run at once). The schema is created
 * or migrated to this kilnd's version in one transaction, which one
 * kilnd at a time runs. Errors name the target with its password hidden. */
int store_open(const char *target, struct store **out);
void store_close(struct store *st);

/* ---- transactions ---------------------------------------------------------- */

/* Run fn in one transaction, handing it a store (use that one, not st,
 * inside fn) whose every call runs in the transaction. It commits if fn
 * returns >= 0 and rolls back otherwise; store_tx returns fn's value or
 * the commit's error. SQLite: the transaction holds the write lock and
 * the store's mutex, so other calls wait; PostgreSQL: it holds one pooled
 * connection. store_tx inside fn joins the same transaction. A
 * transaction does not make a read-then-write safe between replicas on
 * PostgreSQL by itself (READ COMMITTED): take store_tx_lock first. */
typedef int store_tx_fn(struct store *tx, void *ctx);
int store_tx(struct store *st, store_tx_fn *fn, void *ctx);
/* In a transaction: wait until no other transaction holds key, then hold
 * it until this one ends (PostgreSQL: an advisory lock on a hash of key;
 * SQLite: its transactions are serialized already). */
int store_tx_lock(struct store *tx, const char *key);

/* ---- workspaces and API keys ------------------------------------------ */

/* The id of the workspace called name, created if missing (and made
 * live again if an operator had deleted it). */
int store_workspace_ensure(struct store *st, const char *name, char id[ID_MAX]);
/* A cluster's host: the workspace of this id (the API's) exists here too,
 * for the records of its sandboxes; nothing if it does. */
int store_workspace_mirror(struct store *st, const char *id);

/* What a key may do: everything, or only read (docs/security.md). Stored
 * by its name, "full" or "read". */
enum key_scope { KEY_FULL, KEY_READ };
const char *key_scope_name(enum key_scope s);
/* -EINVAL for a name that is neither. */
int key_scope_parse(const char *name, enum key_scope *out);

struct key_row {
	char id[ID_MAX], workspace[ID_MAX], workspace_name[NAME_MAX_LEN];
	char name[NAME_MAX_LEN], prefix[24];
	enum key_scope scope;
	int64_t created_ms, revoked_ms;
	int64_t expires_ms;		/* 0: never */
	int64_t last_used_ms;		/* 0: never; kept to the minute (store_key_touch) */
};

/* Record a key by its hash (the key itself is never stored); expires_ms
 * 0 for a key that does not expire. */
int store_key_add(struct store *st, const char *workspace, const char *name,
		  const char *hash, const char *prefix, enum key_scope scope, int64_t expires_ms,
		  char id[ID_MAX]);
/* A workspace's plan and its limits (JSON object text, or NULL) over the
 * plan's; set makes the workspace if it is new. operators: the plan is
 * the operator's alone (no server plan of that name), so set checks,
 * under the lock store_plandef_delete takes, that it is still there
 * (-ENOENT when it was deleted). get: -ENOENT when the workspace has no
 * plan of its own; *limits is malloc'd (or NULL). */
int store_plan_set(struct store *st, const char *workspace, const char *plan, const char *limits,
		   bool operators);
int store_plan_get(struct store *st, const char *workspace, char plan[NAME_MAX_LEN], char **limits);
/* The operator's plans (ops/plan.h): a plan's limits, a JSON object
 * over the server's plan of that name (or a plan of its own). get:
 * -ENOENT when the operator set none; *limits malloc'd. each: every one,
 * by name. */
int store_plandef_set(struct store *st, const char *name, const char *limits);
int store_plandef_get(struct store *st, const char *name, char **limits, int64_t *updated_ms);
typedef int store_plandef_fn(void *ctx, const char *name, const char *limits, int64_t updated_ms);
int store_plandef_each(struct store *st, store_plandef_fn *fn, void *ctx);
/* Delete the operator's plan name: -EBUSY while live workspaces are on
 * it (*in_use how many), -ENOENT when the store has no such plan. Rows
 * of deleted workspaces on it go with it. */
int store_plandef_delete(struct store *st, const char *name, int64_t *in_use);
/* The creation times (ms) of the workspace's sandboxes made at since_ms
 * or later, oldest first, at most cap of them in times; *n how many. */
int store_creates_since(struct store *st, const char *workspace, int64_t since_ms,
			int64_t *times, int cap, int *n);
/* Who a key is: what a request authenticated by it acts as. */
struct key_auth {
	char id[ID_MAX], workspace[ID_MAX], prefix[24];
	enum key_scope scope;
	int64_t last_used_ms;
	char workspace_name[NAME_MAX_LEN];
	bool suspended;			/* its workspace is (store_workspace_suspend) */
};
/* The unrevoked, unexpired key with this hash; -ENOENT if none. */
int store_key_lookup(struct store *st, const char *hash, struct key_auth *out);
/* Record that key id was used at now_ms, unless it was already recorded
 * less than a minute before (so that a busy key costs one write a minute,
 * not one a request). */
int store_key_touch(struct store *st, const char *id, int64_t now_ms);
typedef int store_key_fn(void *ctx, const struct key_row *k);
int store_key_each(struct store *st, store_key_fn *fn, void *ctx);
/* Revoke by key id or by its printed prefix; -ENOENT if none matched. */
int store_key_revoke(struct store *st, const char *id_or_prefix);

/* ---- workspaces as the operator sees them (store_admin.c) --------------- */

struct workspace_row {
	char id[ID_MAX], name[NAME_MAX_LEN];
	int64_t created_ms;
	bool suspended;
};
/* The live (not deleted) workspace called name; -ENOENT if none. */
int store_workspace_find(struct store *st, const char *name, struct workspace_row *out);
typedef int store_workspace_fn(void *ctx, const struct workspace_row *w);
/* Every live workspace, by name. */
int store_workspace_each(struct store *st, store_workspace_fn *fn, void *ctx);
/* A new workspace called name (one the operator deleted is made live
 * again, unsuspended); -EEXIST when a live one has that name. */
int store_workspace_create(struct store *st, const char *name, char id[ID_MAX]);
/* Suspend (its keys and sessions refused) or restore a workspace. */
int store_workspace_suspend(struct store *st, const char *id, bool suspended);
/* Whether the workspace with that id is suspended (false: not, or no such
 * live workspace). */
int store_workspace_suspended(struct store *st, const char *id, bool *out);
/* How many of the workspace's sandboxes are not deleted. */
int store_workspace_live(struct store *st, const char *id, int64_t *n);
/* Revoke its keys and mark it deleted, in one transaction under the
 * workspace's lock; -EBUSY (naming how many) while it has live sandboxes. */
int store_workspace_delete(struct store *st, const char *id);

/* ---- operator credentials (store_admin.c) ------------------------------- */

struct operator_row {
	char id[ID_MAX], name[NAME_MAX_LEN], prefix[24];
	int64_t created_ms, revoked_ms;
};
/* Record a credential by its hash (it is never stored itself). */
int store_operator_add(struct store *st, const char *name, const char *hash, const char *prefix,
		       char id[ID_MAX]);
/* The unrevoked credential with this hash; -ENOENT if none. */
int store_operator_lookup(struct store *st, const char *hash, struct operator_row *out);
typedef int store_operator_fn(void *ctx, const struct operator_row *o);
int store_operator_each(struct store *st, store_operator_fn *fn, void *ctx);
/* Revoke by id or printed prefix; -ENOENT if none matched. */
int store_operator_revoke(struct store *st, const char *id_or_prefix);

/* ---- the audit log ------------------------------------------------------ */

/* One mutating request made with a key: kept for its workspace to read. */
struct audit_row {
	char id[ID_MAX], workspace[ID_MAX], key_id[ID_MAX], key_prefix[24];
	char method[16], route[160], target[ID_MAX * 2];	/* target: "" when none */
	int status;
	int64_t created_ms;
};
/* Append r (its id and, when 0, created_ms are filled in). */
int store_audit_add(struct store *st, struct audit_row *r);
/* The workspace's newest limit entries, newest first; with q's fields set,
 * only those older than the entry (before_ms, before_id) and of one key
 * (its id or its shown prefix). */
struct audit_query {
	int limit;
	int64_t before_ms;		/* 0: from the newest */
	const char *before_id;		/* breaks ties of one millisecond */
	const char *key;		/* NULL: every key's */
};
typedef int store_audit_fn(void *ctx, const struct audit_row *r);
int store_audit_each(struct store *st, const char *workspace, const struct audit_query *q, store_audit_fn *fn,
		     void *ctx);
/* Remove the entries made before before_ms (retention); *removed how many
 * (may be NULL). */
int store_audit_prune(struct store *st, int64_t before_ms, int64_t *removed);

/* ---- sandboxes ---------------------------------------------------------- */

struct sbx_row {
	char id[ID_MAX], workspace[ID_MAX];
	char template[NAME_MAX_LEN];
	enum sbx_state state;		/* kept by its name (sbx_state.h) */
	char parent[ID_MAX];		/* forked from, or "" */
	char snapshot[ID_MAX];		/* created from this snapshot, or "" */
	int vcpus, memory_mib;
	int64_t disk_mib;		/* its root disk's size (template's or create's); 0: unknown */
	int64_t rev;			/* revision: its host's saves count it up (store_sandbox_keep) */
	int64_t ttl_seconds;		/* idle timeout; 0: none */
	bool ttl_absolute;		/* ttl_seconds counts from creation, activity or not */
	bool idle_hibernate;		/* idle: hibernated, not deleted... */
	int64_t retention_seconds;	/* ...and deleted after this much more (0: kept) */
	int64_t idle_pause_seconds;	/* paused after this long idle, before the rule (0: never) */
	int64_t created_ms, updated_ms, deleted_ms, active_ms;	/* wall clock, ms */
	double ready_ms;
	int vmm_pid;			/* 0 when no VMM runs */
	int64_t vmm_start;		/* its start time (/proc/PID/stat field 22) */
	double cpu_seconds;		/* total, all VMM incarnations */
	double cpu_base;		/* of the incarnations that ended */
	double mem_mib_seconds;		/* resident memory integrated over time */
	double running_seconds;
	int64_t rss_bytes;		/* last sample */
	/* What is billed (docs/billing.md): the vCPUs' time in guest mode,
	 * all incarnations (active_base: of those that ended), and the
	 * working set as the proportional set size, integrated over time. */
	double active_cpu_seconds, active_base;
	double pss_mib_seconds;
	int64_t pss_bytes;		/* last sample */
	int64_t stored_bytes;		/* hibernated: the disk space its memory, device state and
					   own disk layers take (allocated blocks); else 0 */
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

/* Insert or replace a sandbox's record, unless the one kept has a higher
 * rev: a record read on a host before a change (a heartbeat's) must not
 * overwrite the change that a later answer of the host already saved.
 * keep: 0 saved, 1 not (the kept record is newer), or -errno; save: the
 * same with 1 as 0, for a caller to whom either is success. */
int store_sandbox_keep(struct store *st, const struct sbx_row *r);
int store_sandbox_save(struct store *st, const struct sbx_row *r);
int store_sandbox_load(struct store *st, const char *id, struct sbx_row *r);
typedef int store_sbx_fn(void *ctx, struct sbx_row *r);	/* r is owned by fn */
/* Every sandbox whose state is not "deleted". */
int store_sandbox_each_live(struct store *st, store_sbx_fn *fn, void *ctx);
/* Each sandbox saved at or after since_ms (wall clock), deleted ones too:
 * what a cluster's host sends its API (docs/cluster.md "Records"). */
int store_sandbox_each_since(struct store *st, int64_t since_ms, store_sbx_fn *fn, void *ctx);
/* How many sandboxes are not deleted. */
int store_sandboxes_live(struct store *st, int64_t *n);

/* ---- snapshots ---------------------------------------------------------- */

struct snap_row {
	char id[ID_MAX], workspace[ID_MAX], sandbox[ID_MAX];
	char template[NAME_MAX_LEN];
	int vcpus, memory_mib;
	int64_t created_ms, deleted_ms;
	int64_t stored_bytes;		/* the disk space its files take (allocated blocks) */
	char *disks;			/* JSON array, as in sbx_row */
	char *env;			/* the sandbox's env, inherited by creates */
};

void snap_row_clear(struct snap_row *r);
/* Insert or update; a snapshot once deleted stays deleted (deleted_ms is
 * kept whatever r says). */
int store_snapshot_save(struct store *st, const struct snap_row *r);
/* -ENOENT unless it exists, is not deleted, and (if workspace is not
 * NULL) belongs to that workspace. */
int store_snapshot_load(struct store *st, const char *id, const char *workspace,
			struct snap_row *r);
/* Mark it deleted, if it exists, is not deleted and (workspace not NULL)
 * belongs to workspace: -ENOENT otherwise. One statement, so of two
 * deletes at once exactly one succeeds. */
int store_snapshot_delete(struct store *st, const char *id, const char *workspace);
typedef int store_snap_fn(void *ctx, struct snap_row *r);	/* owned by fn */
int store_snapshot_each_live(struct store *st, store_snap_fn *fn, void *ctx);
/* Each snapshot made or deleted at or after since_ms. */
int store_snapshot_each_since(struct store *st, int64_t since_ms, store_snap_fn *fn, void *ctx);

/* ---- volumes ------------------------------------------------------------- */

struct vol_row {
	char id[ID_MAX], workspace[ID_MAX];
	char name[NAME_MAX_LEN];
	int64_t size_mib;
	int64_t created_ms, deleted_ms;
};

/* An attachment: volume in slot of sandbox, mounted at path. */
#define VOL_PATH_MAX 256
struct vol_att {
	char volume[ID_MAX], sandbox[ID_MAX];
	int slot;
	bool read_only;
	char path[VOL_PATH_MAX];
	int64_t created_ms;
};

/* Record a new volume: -EEXIST "a volume named N exists" when the
 * workspace has a live one of that name (one statement: of two creates
 * at once exactly one succeeds). */
int store_volume_insert(struct store *st, const struct vol_row *r);
/* The workspace's live volume by id, or (by_name) by name: -ENOENT
 * "volume X not found" otherwise (workspace NULL: any workspace's). */
int store_volume_load(struct store *st, const char *workspace, const char *key, bool by_name,
		      struct vol_row *r);
/* Mark it deleted (live, the workspace's): -ENOENT otherwise. */
int store_volume_delete(struct store *st, const char *workspace, const char *id);
typedef int store_vol_fn(void *ctx, const struct vol_row *r);
/* The workspace's live volumes (NULL: every workspace's), oldest first. */
int store_volume_each(struct store *st, const char *workspace, store_vol_fn *fn, void *ctx);
/* How many live volumes the workspace has, and their sizes' sum. */
int store_volume_usage(struct store *st, const char *workspace, int64_t *count, int64_t *mib);

int store_volume_attach(struct store *st, const struct vol_att *a);
/* Remove the sandbox's attachments (all of them). */
int store_volume_detach_sandbox(struct store *st, const char *sandbox);
/* Remove the attachments of every sandbox that ended (deleted, failed)
 * or has no record: what a kilnd that died between a sandbox's end and
 * the removal of its attachments left holding a volume; *n how many
 * (may be NULL). */
int store_volume_detach_ended(struct store *st, int64_t *n);
/* Remove the sandbox's attachment in slot: -ENOENT if it has none. */
int store_volume_detach_slot(struct store *st, const char *sandbox, int slot);
typedef int store_att_fn(void *ctx, const struct vol_att *a);
/* The attachments of a volume (sandbox NULL: oldest first) or of a
 * sandbox (volume NULL: in slot order). */
int store_volume_attachments(struct store *st, const char *volume, const char *sandbox,
			     store_att_fn *fn, void *ctx);
/* The attachments of all the workspace's live volumes (NULL: every
 * workspace's) in one query, a listing's: oldest first, so each
 * volume's come in the order above. */
int store_volume_attachments_ws(struct store *st, const char *workspace, store_att_fn *fn, void *ctx);

/* ---- exposed ports -------------------------------------------------------- */

/* A guest TCP port reachable through kilnd's proxy. */
struct port_row {
	char sandbox[ID_MAX], workspace[ID_MAX];
	int port;			/* 1..65535 */
	bool public;			/* reachable without an API key */
	int64_t created_ms;
	bool suspended;			/* store_port_load: its workspace is suspended */
};

/* Add, or change whether it is public (created_ms stays). */
int store_port_save(struct store *st, const struct port_row *r);
/* Like save, but a port that is new is added only while the sandbox
 * exposes fewer than max (-ENOSPC otherwise), counted and added in one
 * transaction under the sandbox's lock, so two replicas cannot both add
 * the last one. *existed: the port was exposed already. */
int store_port_add(struct store *st, const struct port_row *r, int max, bool *existed);
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
	double active_cpu_seconds, pss_mib_seconds;	/* what is billed */
	int64_t sandboxes;		/* ever created in the workspace */
	int64_t live;			/* not deleted */
};

int store_usage_sum(struct store *st, const char *workspace, struct usage *u);

/* ---- metered usage by the hour (docs/billing.md) ----------------------- */

/* What one sandbox used in one hour: active vCPU time in microseconds,
 * working set (PSS) in MiB-seconds, running time in milliseconds. Integers,
 * so that sums and the money made of them are exact. */
struct usage_hour {
	char workspace[ID_MAX], sandbox[ID_MAX];
	int64_t hour_ms;		/* the hour's start, wall clock */
	int64_t cpu_us, mem_mib_s, run_ms;
};
/* Add to a sandbox's hour (created at zero if new). */
int store_usage_add(struct store *st, const struct usage_hour *u);
/* Set (not add) an hour's usage: a cluster's API keeping what its host
 * counted, which the host sends whole and may send again. Each figure
 * only grows (an older copy taken after a newer one changes nothing). */
int store_usage_set(struct store *st, const struct usage_hour *u);
/* Each hour of the workspace's usage (of one sandbox, unless sandbox is
 * NULL) with from_ms <= hour_ms < to_ms, by hour then sandbox, summed over
 * sandboxes when per_sandbox is false. */
typedef int usage_hour_fn(void *ctx, const struct usage_hour *u);
/* Each hour's usage of every sandbox from the hour from_ms. */
int store_usage_each_since(struct store *st, int64_t from_ms, usage_hour_fn *fn, void *ctx);
int store_usage_hours(struct store *st, const char *workspace, const char *sandbox, int64_t from_ms,
		      int64_t to_ms, bool per_sandbox, usage_hour_fn *fn, void *ctx);

/* ---- monthly statements (docs/billing.md) ------------------------------- */

/* A closed month's statement: computed once from usage_hours when its
 * month has ended, with the prices and the plan in force then, and served
 * from this row ever after, so later usage rows or price changes never
 * alter it. Money in integer micro-dollars. */
struct statement_row {
	char workspace[ID_MAX];
	char month[8];			/* "2026-11" */
	int64_t cpu_us, mem_mib_s, run_ms;	/* the month's usage_hours, summed */
	int64_t vcpu_hour, gib_hour;	/* the prices, micro-dollars an hour */
	int64_t cpu, mem, cost;		/* cost = cpu + mem */
	char plan[32];
	int64_t credit, credit_applied, amount_due;	/* amount_due = cost - credit_applied */
	int64_t closed_ms;
};
/* Store a month's statement unless one is there already (the first to
 * close a month wins: INSERT ... ON CONFLICT DO NOTHING); *inserted says
 * which (may be NULL). Read it back with store_statement_load. */
int store_statement_insert(struct store *st, const struct statement_row *s, bool *inserted);
/* -ENOENT when the month has no statement. */
int store_statement_load(struct store *st, const char *workspace, const char *month, struct statement_row *out);
/* The workspace's statements, newest month first. */
typedef int store_statement_fn(void *ctx, const struct statement_row *s);
int store_statement_each(struct store *st, const char *workspace, store_statement_fn *fn, void *ctx);
/* The first hour of the workspace's metered usage; -ENOENT when none. */
int store_usage_first_hour(struct store *st, const char *workspace, int64_t *hour_ms);

/* ---- notices (docs/cluster.md "Events") ----------------------------------- */

/* What a sandbox's event stream tells that is not a state: a TTL warning
 * (kind "ttl_warning": the TTL rule acts at due_ms, action "hibernate"
 * or "delete", the sandbox being in state then). A cluster's host agent
 * keeps those of its sandboxes (kilnd/agent_link.c) and sends them with
 * its records; the API keeps them, and each replica's event stream tells
 * of those saved lately. saved_ms: when this store saved it. */
struct notice_row {
	char sandbox[ID_MAX], workspace[ID_MAX];
	char kind[16], state[16], action[16];
	int64_t due_ms, saved_ms;
};
/* Keep a notice (saved now; one of a sandbox, kind and due time is kept
 * once), and forget those saved more than a day ago. */
int store_notice_add(struct store *st, const struct notice_row *n);
/* Each notice saved at since_ms or later, oldest first. */
typedef int store_notice_fn(void *ctx, const struct notice_row *n);
int store_notice_each_since(struct store *st, int64_t since_ms, store_notice_fn *fn, void *ctx);

/* ---- ids ------------------------------------------------------------------ */

/* prefix + 20 random base32 characters (100 bits), e.g. "sbx_". */
int make_id(char out[ID_MAX], const char *prefix);
/* Wall clock in ms. */
int64_t wall_ms(void);

#endif
