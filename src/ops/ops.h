/*
 * ops: the operations layer. Each front end (REST in src/api, MCP in
 * src/mcp, later the dashboard) turns its request into arguments, a JSON
 * object with the same field names for all of them (the REST body's), and
 * calls these; what is accepted, the bounds and the defaults live here
 * once, so the front ends cannot drift apart. Errors are -errno with
 * errmsg() set: -EINVAL for a bad argument (the message names it),
 * -ENOENT for a malformed snapshot id, the rest from the host interface
 * (src/hostif/hostif.h), which is all the operations know of the host;
 * each front end maps them (REST to a status, MCP to a tool error).
 *
 * Here so far: create, fork, hibernate, snapshot and network. Exec, files, pty,
 * ports and wake are still parsed by each front end.
 */
#ifndef KILN_OPS_OPS_H
#define KILN_OPS_OPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "hostif/hostif.h"
#include "ops/fields.h"
#include "ops/plan.h"

/* Bounds of a sandbox's metadata and env (keys, key length, value length). */
#define OPS_METADATA_MAX	64
#define OPS_METADATA_KEY_MAX	64
#define OPS_METADATA_VALUE_MAX	1024
#define OPS_ENV_MAX		256
#define OPS_ENV_KEY_MAX		128
#define OPS_ENV_VALUE_MAX	8192
/* A template name or snapshot id. */
#define OPS_NAME_MAX		64
/* A create's disk_mib: 1 MiB to 1 TiB; the
 * template's own size (at least) and the plan's disk_mib (at most) are
 * checked besides. */
#define OPS_DISK_MIB_MIN	1
#define OPS_DISK_MIB_MAX	1048576

/* What a workspace's plan said of a create or fork (for the front end's
 * answer: a refusal's details, the creates window's headers). */
struct ops_quota {
	bool applied;			/* the plan has limits that were checked */
	char plan[PLAN_NAME_MAX];
	struct plan_limits limits;	/* in force for this workspace */
	int64_t window_ms;
	bool window;			/* report counted the creates window (a create or fork
					   under a creates cap): its creates_used and reset_ms */
	struct ws_caps_report report;	/* -EDQUOT: which limit refused */
};

/* Who asks, and the server's bounds: filled by the front end. */
struct ops_caller {
	struct hostif *hostif;		/* the host interface */
	struct store *store;
	const struct plans *plans;	/* NULL: no plans, no limits */
	const char *workspace;		/* the caller's, authenticated */
	int64_t arrival_ns;		/* CLOCK_MONOTONIC when the request came */
	int64_t max_ttl;		/* seconds: the cap on ttl_seconds */
	bool touch;			/* looking a sandbox up is activity (TTL) */
	struct ops_quota *quota;	/* out, or NULL */
	/* A request a front end ran fields_check_shape on against the
	 * operation's own table (MCP, before a tool runs): given as args,
	 * the operation checks only the rest (ops_fields_check). */
	const json_t *shaped;
};

/* args against the operation's table t: fields_check, or, for the
 * request c->shaped, fields_check_rest (its shape was checked once). */
int ops_fields_check(const struct ops_caller *c, const struct field *t, const json_t *args,
		     const struct field_cap *caps);

/* The workspace's plan, with its own limits applied over the plan's
 * (its own plan, or the server's default). */
int ops_workspace_plan(const struct ops_caller *c, struct plan *out);

/* The workspace's plan as the caps a host holds it to (host_types.h):
 * 1 when they limit something, 0 when not, or -errno. */
int ops_workspace_caps(const struct ops_caller *c, struct ws_caps *caps);

/* Note plan p in c->quota (when the caller asked for it), zeroed first:
 * applied says whether a limit of it was checked. */
void ops_quota_note(const struct ops_caller *c, const struct plan *p, bool applied);

/* The caller's sandbox id, counted as activity for its TTL when c->touch;
 * *out (NULL: only the check) gets a copy of its record (sbx_row_clear
 * it). -ENOENT "sandbox ID not found" for a malformed id, one that does
 * not exist, or another workspace's; another error of the host interface
 * (out of memory, an agent that does not answer) as it came. */
int ops_sandbox(const struct ops_caller *c, const char *id, struct sbx_row *out);

/* 0 if a template of that name exists for workspace ws (ops/template.h); else -ENOENT, errmsg() listing
 * the templates that do, and *names their JSON array (yours; NULL when
 * out of memory). */
int ops_template_known(struct hostif *hi, const char *ws, const char *name, json_t **names);

/* NAME=VALUE strings (NULL-terminated, one malloc) of sandbox env text
 * overridden by a request's env object (may be NULL); NULL when out of
 * memory. */
char **ops_env_merge(const char *sandbox_env, const json_t *request_env);

/* The fields each operation accepts (ops/fields.h): what it checks a
 * request against, and what MCP's tools show as their inputSchema.
 * ops_create's; ops_set_lifecycle's; ops_set_network's; ops_fork's (count:
 * its other fields are the front end's). */
extern const struct field ops_create_fields[];
extern const struct field ops_lifecycle_fields[];
extern const struct field ops_network_fields[];
extern const struct field ops_fork_fields[];

/* Create a sandbox from args: template (default "base") or from_snapshot,
 * ttl_seconds (0 to max_ttl, or the plan's max_ttl_seconds when lower;
 * absent: the host's default, so capped), persistent (ops_set_lifecycle),
 * metadata, env,
 * and the egress policy allow_out, deny_out, allow_internet
 * (net/netpolicy.h). Unknown fields are refused; an unknown template is
 * -ENOENT naming the templates that exist; -EDQUOT when
 * a limit of the workspace's plan refuses (c->quota says which). *out
 * gets the new sandbox's record (sbx_row_clear it). */
int ops_create(const struct ops_caller *c, const json_t *args, struct sbx_row *out);
/* The same for kiln's own services (ops/database.c), which may also
 * give workspace_ports: TCP ports of the sandbox the workspace's other
 * sandboxes may connect to (net/netpolicy.h; never a user's field). */
int ops_create_service(const struct ops_caller *c, const json_t *args, struct sbx_row *out);

/* PATCH .../lifecycle: ttl_seconds (as at create: 0 to the plan's max),
 * persistent (true: hibernated when idle, never deleted by its TTL;
 * -EPERM on a plan whose TTL counts from creation), or both; one at
 * least. Counts as activity. */
int ops_set_lifecycle(const struct ops_caller *c, const char *id, const json_t *args, struct sbx_row *out);

/* PUT .../network: the whole egress policy of the caller's sandbox id
 * replaced by args' allow_out, deny_out, allow_internet
 * (net/netpolicy.h; absent fields take their defaults, so an empty or
 * NULL args is the open policy); in force when it returns. -EINVAL
 * naming a bad field (checked before the sandbox is looked up), -ENOENT
 * for no such sandbox. Counts as activity when c->touch. */
int ops_set_network(const struct ops_caller *c, const char *id, const json_t *args, struct sbx_row *out);

/* What a fork made: kids[0..made) are the children's records
 * (ops_forked_clear them); one with id "" exists but could not be copied
 * (hostif_fork): skip it. */
struct ops_forked {
	struct sbx_row kids[HOST_FORK_MAX];
	int count;			/* asked for */
	int made;
	char why[512];			/* made < count: why the rest failed */
};

/* Fork sandbox parent_id into args.count (1 to HOST_FORK_MAX, default 1)
 * children; with tree all in one pause. The count is checked before the
 * sandbox is looked up; other fields of args are the front end's (it
 * checks them). 0 when all were made; < 0 with made > 0 when some were
 * (why says what went wrong); < 0 with made 0 when none. */
int ops_fork(const struct ops_caller *c, const char *parent_id, const json_t *args, bool tree,
	     struct ops_forked *f);
void ops_forked_clear(struct ops_forked *f);

/* Hibernate the caller's sandbox id, or snapshot it (its new id in snap),
 * held to the plan's `hibernated` and `snapshots` limits (ops/keep.c):
 * -EDQUOT at the limit, c->quota saying which; else the host
 * interface's answer. */
int ops_hibernate(const struct ops_caller *c, const char *id, struct sbx_row *out);
int ops_snapshot(const struct ops_caller *c, const char *id, char snap[ID_MAX]);
/* What the workspace keeps now: its hibernated sandboxes, its snapshots,
 * and the disk space both take (the hosts' measure, sbx_row and
 * snap_row stored_bytes). */
struct ops_kept {
	int64_t hibernated, snapshots, stored_bytes;	/* stored_bytes: volumes' sizes too */
	int64_t volumes;
};
int ops_kept(const struct ops_caller *c, struct ops_kept *out);

/* ---- volumes (ops/volume.c, docs/api.md "Volumes") ------------------------ */

/* A volume's name: [a-z0-9][a-z0-9-]*, at most this long; its size, MiB;
 * a mount path's length. */
#define OPS_VOLUME_NAME_MAX	63
#define OPS_VOLUME_MIB_MAX	65536
#define OPS_VOLUME_PATH_MAX	200
bool ops_volume_name_ok(const char *s);

/* A create's `volumes` ([{name, path, read_only}], at most
 * HOST_VOLUMES_MAX; names resolved to ids in the caller's workspace:
 * -ENOENT "volume N not found"), as create_volume entries v[0..n). */
struct ops_volumes {
	struct create_volume v[HOST_VOLUMES_MAX];
	char id[HOST_VOLUMES_MAX][ID_MAX], name[HOST_VOLUMES_MAX][OPS_VOLUME_NAME_MAX + 1];
	char path[HOST_VOLUMES_MAX][OPS_VOLUME_PATH_MAX + 1];
	int n;
};
int ops_volumes_parse(const struct ops_caller *c, const json_t *args, struct ops_volumes *out);
/* args' volumes checked as ops_volumes_parse does, but for names not
 * being looked up (no store needed). */
int ops_volumes_check(const json_t *args);
/* A volumes entry's fields {name, path, read_only} (attach's too);
 * POST /v1/volumes's {name, size_mib}. */
extern const struct field ops_volume_entry_fields[];
extern const struct field ops_volume_create_fields[];

/* POST /v1/volumes {name, size_mib (1 to OPS_VOLUME_MIB_MAX)}: held to
 * the plan's volumes, volume_mib and storage_mib (-EDQUOT, c->quota
 * saying which); -EEXIST for a name the workspace has. */
int ops_volume_create(const struct ops_caller *c, const json_t *args, struct vol_row *out);
/* The caller's volume id (-ENOENT otherwise). */
int ops_volume_get(const struct ops_caller *c, const char *id, struct vol_row *out);
/* {id, name, size_mib, created_ms, attached_to: [{sandbox_id, path,
 * read_only, slot}]}; NULL when out of memory. */
json_t *ops_volume_json(const struct ops_caller *c, const struct vol_row *r);
/* The caller's volumes, as that JSON, in an array (*out yours). */
int ops_volume_list(const struct ops_caller *c, json_t **out);
/* -EBUSY while a sandbox has it (naming it). */
int ops_volume_delete(const struct ops_caller *c, const char *id);
/* POST /v1/sandboxes/{id}/volumes {name, path, read_only}: the caller's
 * volume attached to its sandbox, mounted at path (host.h
 * host_volume_attach); *out the volume. Detach names the volume by name
 * or id: -ENOENT if the sandbox does not have it. */
int ops_volume_attach(const struct ops_caller *c, const char *sandbox, const json_t *args, struct vol_row *out);
int ops_volume_detach(const struct ops_caller *c, const char *sandbox, const char *volume, bool force);

/* Keep the caller's sandbox id, a fork's child, and delete its siblings
 * (every other live sandbox forked from the same parent), and with
 * delete_parent the parent too. All are found before any is deleted (a
 * sandbox that was not forked is -EINVAL, nothing done); then each
 * deletion is tried and reported to fn (rc 0 or its error; errmsg()
 * says why), the parent last. *parent gets the parent's id. */
typedef void ops_promote_fn(void *ctx, const char *id, bool is_parent, int rc);
int ops_promote(const struct ops_caller *c, const char *id, bool delete_parent, char parent[ID_MAX],
		ops_promote_fn *fn, void *ctx);

#endif
