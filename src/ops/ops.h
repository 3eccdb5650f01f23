/*
 * ops: the operations layer. Each front end (REST in src/api, MCP in
 * src/mcp, later the dashboard) turns its request into arguments, a JSON
 * object with the same field names for all of them (the REST body's), and
 * calls these; what is accepted, the bounds and the defaults live here
 * once, so the front ends cannot drift apart. Errors are -errno with
 * errmsg() set: -EINVAL for a bad argument (the message names it),
 * -ENOENT for a malformed snapshot id, the rest from the host agent; each
 * front end maps them (REST to a status, MCP to a tool error).
 *
 * Here so far: create and fork. Exec, files, pty, ports, snapshots,
 * hibernate/wake/ttl and network are still parsed by each front end.
 */
#ifndef KILN_OPS_OPS_H
#define KILN_OPS_OPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "host/host.h"

/* Bounds of a sandbox's metadata and env (keys, key length, value length). */
#define OPS_METADATA_MAX	64
#define OPS_METADATA_KEY_MAX	64
#define OPS_METADATA_VALUE_MAX	1024
#define OPS_ENV_MAX		256
#define OPS_ENV_KEY_MAX		128
#define OPS_ENV_VALUE_MAX	8192
/* A template name or snapshot id. */
#define OPS_NAME_MAX		64

/* Who asks, and the server's bounds: filled by the front end. */
struct ops_caller {
	struct host *host;
	const char *workspace;		/* the caller's, authenticated */
	int64_t arrival_ns;		/* CLOCK_MONOTONIC when the request came */
	int64_t max_ttl;		/* seconds: the cap on ttl_seconds */
	bool touch;			/* looking a sandbox up is activity (TTL) */
};

/* The caller's sandbox id (a reference, sandbox_put it), counted as
 * activity for its TTL when c->touch. -ENOENT "sandbox ID not found" for a malformed id,
 * one that does not exist, or another workspace's. */
int ops_sandbox(const struct ops_caller *c, const char *id, struct sandbox **out);

/* 0 if a template of that name exists; else -ENOENT, errmsg() listing
 * the templates that do, and *names their JSON array (yours; NULL when
 * out of memory). */
int ops_template_known(struct host *h, const char *name, json_t **names);

/* The fields ops_create accepts, NULL-terminated (for a front end that
 * lists them, e.g. in a schema). */
extern const char *const ops_create_fields[];

/* Create a sandbox from args: template (default "base") or from_snapshot,
 * ttl_seconds (0 to max_ttl; absent: the host's default), metadata, env,
 * and the egress policy allow_out, deny_out, allow_internet
 * (host/netpolicy.h). Unknown fields are refused; an unknown template is
 * -ENOENT naming the templates that exist. A reference in *out. */
int ops_create(const struct ops_caller *c, const json_t *args, struct sandbox **out);

/* What a fork made: kids[0..made) are references (sandbox_put each). */
struct ops_forked {
	struct sandbox *kids[HOST_FORK_MAX];
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

#endif
