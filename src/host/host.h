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

#include "host/host_types.h"	/* ws_caps, create_req, HOST_FORK_MAX */
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

/* A workspace's caps (struct ws_caps, ws_caps_report) and the create
 * request (struct create_req) are plain data, in host_types.h, shared
 * with the host interface (src/hostif/hostif.h) that the API calls. */
int host_create(struct host *h, const struct create_req *req, struct sandbox **out);
/* What a workspace's plan says of it, before any create of it since this
 * kilnd started: wakes are held to caps->running (ws_wake_reserve) as if
 * a create had been admitted with caps. Nothing when a create already
 * was (its caps are newer); -ENOMEM. */
int host_ws_seed(struct host *h, const char *ws, const struct ws_caps *caps);
/* The caller's sandbox id (a reference), -ENOENT if it does not exist or
 * belongs to another workspace. */
int host_find(struct host *h, const char *workspace, const char *id, struct sandbox **out);
void sandbox_put(struct host *h, struct sandbox *sb);
/* A consistent copy of the record (sbx_row_clear it). */
int sandbox_row(struct sandbox *sb, struct sbx_row *out);
typedef int host_row_fn(void *ctx, const struct sbx_row *r);
int host_each(struct host *h, const char *workspace, host_row_fn *fn, void *ctx);

int host_delete(struct host *h, struct sandbox *sb);
/* now: without waiting for its operations (hostif.h hostif_hibernate). */
int host_hibernate(struct host *h, struct sandbox *sb, bool now);
int host_wake(struct host *h, struct sandbox *sb);
/* pause.c: stop a running sandbox's vCPUs (its VMM and memory stay);
 * resume starts them again. Pausing a paused one, or resuming a running
 * one, is a success that changes nothing. */
int host_pause(struct host *h, struct sandbox *sb);
/* host_pause for idleness (housekeeping): not counted as activity. */
int host_pause_idle(struct host *h, struct sandbox *sb);
int host_resume(struct host *h, struct sandbox *sb);
/* Change its TTL rule (host_types.h struct lifecycle_change). */
int host_set_lifecycle(struct host *h, struct sandbox *sb, const struct lifecycle_change *lc);
/* A new egress policy (netpolicy.h text), in force when this returns. */
int host_set_network(struct host *h, struct sandbox *sb, const char *policy);
/* A snapshot of the running sandbox (memory and disk); its id. */
int host_snapshot(struct host *h, struct sandbox *sb, char id[ID_MAX]);
/* count (1 to HOST_FORK_MAX) children of sb: with tree, all in one pause
 * (identical); without, one pause each. children[] gets references; *made
 * how many exist (they are returned even when a later one failed). */
int host_fork(struct host *h, struct sandbox *sb, int count, bool tree,
	      const struct ws_caps *caps, struct ws_caps_report *report,
	      struct sandbox **children, int *made);
int host_snapshot_delete(struct host *h, const char *workspace, const char *id);

/* Guest access: wakes a hibernated sandbox (resumes a paused one), counts the operation as
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

/* volume.c: a named volume of workspace ws (DATA/volumes/<id>.img,
 * ext4, size_mib): -EEXIST for a name it has. Delete: -EBUSY while a
 * sandbox has it, naming the sandbox; the file goes. */
int host_volume_create(struct host *h, const char *ws, const char *name, int64_t size_mib,
		       struct vol_row *out);
int host_volume_delete(struct host *h, const char *ws, const char *id);
/* Attach volume v to sb (running; a hibernated one is woken, a paused
 * one resumed) in its lowest free slot, mounted at v->path: -EBUSY for
 * the one-writer rule, a volume or path it has already, or no free slot.
 * Detach: synced and unmounted in the guest (-EBUSY, naming what holds
 * it, while the guest uses it; with force, what uses it is killed
 * first), let go by the VMM, its record gone; a hibernated sandbox's
 * only loses the record. -ENOENT if sb has none. */
int host_volume_attach(struct host *h, struct sandbox *sb, const struct create_volume *v);
int host_volume_detach(struct host *h, struct sandbox *sb, const char *volume, bool force);
/* The workspace's volume id (out may be NULL) and its attachments, each
 * to fn (may be NULL): -ENOENT unless it is the workspace's. */
int host_volume_get(struct host *h, const char *ws, const char *id, struct vol_row *out, store_att_fn *fn,
		    void *fctx);

typedef int host_tmpl_fn(void *ctx, const struct template_def *def, const struct tmpl *t);
/* Every known template, with its version in service (t NULL if none). */
int host_templates(struct host *h, host_tmpl_fn *fn, void *ctx);
/* Gauges: sandboxes by state. */
void host_metrics(struct host *h, struct strbuf *b);

#endif
