/*
 * host: the agent role of kilnd, the sandbox service of one KVM host. It
 * owns the templates and their zygotes, every sandbox's VMM, disks,
 * network lease and directory, and a housekeeping thread that notices dead
 * VMMs, applies TTLs and samples accounting. The API role calls these
 * functions; errors are -errno with errmsg() set, mapped to HTTP statuses
 * by the caller (-ENOENT 404, -EBUSY 409 wrong state, -EAGAIN 503 no
 * capacity, -ENOTSUP 501 a VMM feature missing).
 *
 * A sandbox's lifecycle operations (create, delete, hibernate, wake, fork,
 * snapshot) run one at a time per sandbox; guest operations (exec, files,
 * pty) run concurrently between sandbox_enter and sandbox_leave, which
 * count as activity for the TTL and wake a hibernated sandbox first.
 */
#ifndef KILN_HOST_HOST_H
#define KILN_HOST_HOST_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"
#include "common/strbuf.h"

struct host_config;
struct metrics;
struct guest;
struct host;
struct sandbox;
struct template_def;
struct tmpl;

/* Load templates, recover the sandboxes a previous kilnd left (re-attach
 * or clean up), start housekeeping. */
int host_open(const struct host_config *cfg, struct store *store, struct metrics *metrics,
	      struct host **out);
/* Stop housekeeping. Running VMMs are left running, for the next kilnd. */
void host_close(struct host *h);

/* A workspace's caps on what it starts, counted exactly by the host (the
 * ops layer's plans set them; 0 is no cap). A refusal is -EDQUOT, with
 * the cap that refused in the report. */
struct ws_caps {
	int running;			/* sandboxes creating or running */
	int creates;			/* sandboxes made (creates, fork children) per window */
	int64_t window_ms;		/* that window, sliding */
	int vcpus, memory_mib;		/* of one sandbox */
};
/* The most creates a workspace's window counts (a creates cap above it
 * is counted as this many at most: a cap that large is no cap). */
#define WS_WINDOW_MAX 4096

struct ws_caps_report {
	const char *limit;		/* -EDQUOT: "running", "creates", "vcpus", "memory_mib" */
	int64_t value;			/* that cap */
	int64_t retry_after_ms;		/* -EDQUOT: when trying again may succeed; 0: unknown */
	int creates_used;		/* in the window, this request's included when admitted */
	int64_t reset_ms;		/* wall ms when the window's oldest create leaves it; 0: none */
};

struct create_req {
	const char *workspace;
	const struct ws_caps *caps;	/* NULL: none */
	struct ws_caps_report *report;	/* with caps */
	const char *template;		/* or NULL with snapshot */
	const char *snapshot;		/* from_snapshot */
	int64_t ttl_seconds;		/* -1: the default */
	int64_t ttl_cap;		/* > 0: the default is at most this */
	bool ttl_absolute, idle_hibernate;	/* the TTL rule (store.h sbx_row) */
	int64_t retention_seconds;
	const char *metadata, *env;	/* JSON object text, or NULL */
	const char *net_policy;		/* egress policy text (netpolicy.h), or NULL: open */
	int64_t arrival_ns;		/* CLOCK_MONOTONIC, for ready_ms */
};

int host_create(struct host *h, const struct create_req *req, struct sandbox **out);
/* The caller's sandbox id (a reference), -ENOENT if it does not exist or
 * belongs to another workspace. */
int host_find(struct host *h, const char *workspace, const char *id, struct sandbox **out);
void sandbox_put(struct host *h, struct sandbox *sb);
/* A consistent copy of the record (sbx_row_clear it). */
int sandbox_row(struct sandbox *sb, struct sbx_row *out);
typedef int host_row_fn(void *ctx, const struct sbx_row *r);
int host_each(struct host *h, const char *workspace, host_row_fn *fn, void *ctx);

int host_delete(struct host *h, struct sandbox *sb);
int host_hibernate(struct host *h, struct sandbox *sb);
int host_wake(struct host *h, struct sandbox *sb);
int host_set_ttl(struct host *h, struct sandbox *sb, int64_t ttl_seconds);
/* A new egress policy (netpolicy.h text), in force when this returns. */
int host_set_network(struct host *h, struct sandbox *sb, const char *policy);
/* A snapshot of the running sandbox (memory and disk); its id. */
int host_snapshot(struct host *h, struct sandbox *sb, char id[ID_MAX]);
/* count (1 to HOST_FORK_MAX) children of sb: with tree, all in one pause
 * (identical); without, one pause each. children[] gets references; *made
 * how many exist (they are returned even when a later one failed). */
#define HOST_FORK_MAX 64
int host_fork(struct host *h, struct sandbox *sb, int count, bool tree,
	      const struct ws_caps *caps, struct ws_caps_report *report,
	      struct sandbox **children, int *made);
int host_snapshot_delete(struct host *h, const char *workspace, const char *id);

/* Guest access: wakes a hibernated sandbox, counts the operation as
 * activity until sandbox_leave, and connects to its agent. */
int sandbox_enter(struct host *h, struct sandbox *sb, struct guest **out);
void sandbox_leave(struct host *h, struct sandbox *sb, struct guest *g);
/* Count an operation that already has its guest connection (a proxied
 * WebSocket taken over from its request) without waking or connecting:
 * -EBUSY-style state error unless running. sandbox_leave(h, sb, NULL)
 * ends it. */
int sandbox_hold(struct host *h, struct sandbox *sb);
/* Count a change to the sandbox as activity (TTL; docs/api.md says what is). */
void sandbox_touch(struct sandbox *sb);

/* A read-only descriptor of the sandbox's console log: the guest
 * kernel's messages and kiln-init's lines ("kiln-init: ..."), since it
 * was created, as the VMM appends them (a failed sandbox: the end of it,
 * kept; nothing written yet: an empty file). Safe against a VMM that
 * replaced the file (logs.c). */
int host_log_open(struct host *h, struct sandbox *sb, int *fd);

typedef int host_tmpl_fn(void *ctx, const struct template_def *def, const struct tmpl *t);
/* Every known template, with its version in service (t NULL if none). */
int host_templates(struct host *h, host_tmpl_fn *fn, void *ctx);
/* Gauges: sandboxes by state. */
void host_metrics(struct host *h, struct strbuf *b);

#endif
