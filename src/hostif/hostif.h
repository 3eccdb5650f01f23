/*
 * hostif: the host interface, what everything above the host agent (the
 * operations layer, REST, MCP, the port proxy, the dashboard) calls for
 * anything that touches a sandbox's VM. It has two implementations behind
 * one dispatch table:
 *
 *   local    today's host agent in the same process (hostif_local.c over
 *            src/host/host.h): the one-box kilnd uses it
 *   remote   HTTP to a host agent on another machine (the cluster; not
 *            built yet)
 *
 * so that both paths are the same code above it. Every call therefore
 * takes plain data (a workspace id, a sandbox id, a request struct) and
 * returns plain data (copies of records, ids) or -errno with errmsg() set;
 * no pointer into the agent's memory crosses it, and the caller holds no
 * reference between calls: a sandbox is named by (workspace, id) each
 * time, as a remote agent would have it. Errors, as host.h has them:
 * -ENOENT "sandbox ID not found" (it does not exist, or is another
 * workspace's), -EBUSY wrong state, -EAGAIN no capacity, -EDQUOT a cap
 * of the workspace refused (the report says which), -ENOTSUP a VMM
 * feature missing, -ECONNREFUSED the guest agent cannot be reached;
 * front ends map them (REST: reply_errno).
 *
 * Guest access (exec, files, pty, ports) is the one exception to "plain
 * data": hostif_enter hands back a struct guest (host/guest_conn.h), a
 * client of the guest agent's wire protocol over one connected stream.
 * Locally that stream is the VMM's vsock socket; a remote implementation
 * makes the same object over a byte stream the agent relays, so callers
 * speak the guest protocol the same way over both.
 *
 * Lifecycle operations on one sandbox run one at a time (the agent's
 * rule, host.h); guest operations run concurrently between hostif_enter
 * and hostif_leave, which count as activity for the TTL.
 */
#ifndef KILN_HOSTIF_HOSTIF_H
#define KILN_HOSTIF_HOSTIF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host/host_types.h"	/* ws_caps, ws_caps_report, create_req, host_event, HOST_FORK_MAX */
#include "store/store.h"	/* struct sbx_row, ID_MAX */
#include "host/tbuild.h"	/* tbuild_req, tbuild_state */
#include "common/strbuf.h"	/* struct hostif_run's output */

struct guest;

/* A guest entered (hostif_enter) or held (hostif_hold): what
 * hostif_leave needs to end it. A value, not a reference: copy it freely,
 * leave it once. */
struct hostif_guest {
	struct guest *g;		/* the connection (enter); NULL for a hold */
	char workspace[ID_MAX], id[ID_MAX];
	bool entered;			/* counted as an operation until left */
};

/* A template as the API lists it: the version in service, or (built
 * false) only what the template would be. */
struct hostif_template {
	char name[32];
	char description[256];
	int vcpus, memory_mib;		/* the version's, else the definition's */
	int64_t disk_mib;		/* built: its root disk (a create's default); 0: not known */
	bool built;
	int version;			/* built */
	int64_t built_ms;		/* built: wall clock */
	bool snapshot;			/* built with a snapshot (fast creates) */
	char start[1024];		/* what its snapshot runs (build --start), or "" */
	int ready_port;			/* the port that runs on, or 0 */
};

/* A fork: count (1 to HOST_FORK_MAX) children of the workspace's sandbox
 * id; with tree all in one pause (identical), without one pause each. */
struct hostif_fork {
	const char *workspace, *id;
	int count;
	bool tree;
	const struct ws_caps *caps;	/* NULL: none */
	struct ws_caps_report *report;	/* with caps */
};

typedef int hostif_row_fn(void *ctx, const struct sbx_row *r);
/* A template version as an archive (host/tship.h). */
struct hostif_tarchive {
	int fd;				/* an unlinked file, read from its start */
	uint64_t size;
	int version;
	char sha256[65];
};

typedef int hostif_template_fn(void *ctx, const struct hostif_template *t);
/* An attachment of a listing's volume v[i] (hostif_volume_attachments);
 * a NULL: v[i]'s host cannot say (errmsg() says why). */
typedef int hostif_att_fn(void *ctx, size_t i, const struct vol_att *a);

/* The implementation's table; ctx is struct hostif's. Callers use the
 * hostif_* wrappers below, which say what each call does. */
struct hostif_ops {
	const char *name;		/* "local", "remote" */
	int (*create)(void *ctx, const struct create_req *req, struct sbx_row *out);
	int (*get)(void *ctx, const char *ws, const char *id, bool touch, struct sbx_row *out);
	int (*each)(void *ctx, const char *ws, hostif_row_fn *fn, void *fctx);
	int (*delete)(void *ctx, const char *ws, const char *id);
	int (*hibernate)(void *ctx, const char *ws, const char *id, bool now, struct sbx_row *out);
	int (*wake)(void *ctx, const char *ws, const char *id, struct sbx_row *out);
	int (*pause)(void *ctx, const char *ws, const char *id, bool pause, struct sbx_row *out);
	int (*set_lifecycle)(void *ctx, const char *ws, const char *id, const struct lifecycle_change *lc,
			     struct sbx_row *out);
	int (*set_network)(void *ctx, const char *ws, const char *id, const char *policy,
			   struct sbx_row *out);
	int (*snapshot)(void *ctx, const char *ws, const char *id, char snap[ID_MAX]);
	int (*snapshot_delete)(void *ctx, const char *ws, const char *snap);
	int (*volume_create)(void *ctx, const char *ws, const char *name, int64_t size_mib,
			     struct vol_row *out);
	int (*volume_delete)(void *ctx, const char *ws, const char *id);
	int (*volume_get)(void *ctx, const char *ws, const char *id, struct vol_row *out, store_att_fn *fn,
			  void *fctx);
	int (*volume_attachments)(void *ctx, const char *ws, const struct vol_row *v, size_t n, hostif_att_fn *fn,
				  void *fctx);
	int (*volume_attach)(void *ctx, const char *ws, const char *id, const struct create_volume *v);
	int (*volume_detach)(void *ctx, const char *ws, const char *id, const char *volume, bool force);
	int (*fork)(void *ctx, const struct hostif_fork *req, struct sbx_row *children, int *made);
	int (*enter)(void *ctx, const char *ws, const char *id, struct hostif_guest *out);
	int (*hold)(void *ctx, const char *ws, const char *id, struct hostif_guest *out);
	void (*leave)(void *ctx, struct hostif_guest *hg);
	int (*touch)(void *ctx, const char *ws, const char *id);
	int (*log_open)(void *ctx, const char *ws, const char *id, bool follow, int *fd, int *more);
	int (*templates)(void *ctx, hostif_template_fn *fn, void *fctx);
	int (*template_build)(void *ctx, const struct tbuild_req *req);
	int (*template_state)(void *ctx, const char *name, struct tbuild_state *out);
	int (*template_log_open)(void *ctx, const char *name, int *fd, bool *running);
	int (*template_delete)(void *ctx, const char *name);
	int (*template_export)(void *ctx, const char *name, struct hostif_tarchive *out);
	int (*template_import)(void *ctx, const char *name, int fd, const char *sha256, int *version, int *had);
	void (*metrics)(void *ctx, struct strbuf *b);
	int (*subscribe)(void *ctx, host_event_fn *fn, void *fctx);
	void (*unsubscribe)(void *ctx, host_event_fn *fn, void *fctx);
};

struct hostif {
	const struct hostif_ops *ops;
	void *ctx;			/* the implementation's (local: struct host *) */
};

/* ---- sandboxes ------------------------------------------------------------------ */

/* Create a sandbox (host.h's create_req: the workspace, its caps, the
 * template or snapshot, TTL rule, metadata, env, egress policy). *out
 * gets its record as made (sbx_row_clear it). -EDQUOT with req->report
 * filled when a cap refused; -ENOMEM after the sandbox was made if its
 * record could not be copied (it exists; list it). */
static inline int hostif_create(struct hostif *hi, const struct create_req *req, struct sbx_row *out)
{
	return hi->ops->create(hi->ctx, req, out);
}

/* The workspace's sandbox id: -ENOENT "sandbox ID not found" if there is
 * no such sandbox or it is another workspace's. With touch the request
 * counts as activity (TTL) first. *out (NULL: only the check) gets a
 * consistent copy of its record (sbx_row_clear it). */
static inline int hostif_get(struct hostif *hi, const char *ws, const char *id, bool touch,
			     struct sbx_row *out)
{
	return hi->ops->get(hi->ctx, ws, id, touch, out);
}

/* Each sandbox of workspace ws (NULL: all) that is not deleted, oldest
 * first, as a record copy valid during the call; fn's non-zero return
 * stops the walk and is returned. */
static inline int hostif_each(struct hostif *hi, const char *ws, hostif_row_fn *fn, void *fctx)
{
	return hi->ops->each(hi->ctx, ws, fn, fctx);
}

/* Delete it: its VM, disk and directory go; its record stays, "deleted". */
static inline int hostif_delete(struct hostif *hi, const char *ws, const char *id)
{
	return hi->ops->delete(hi->ctx, ws, id);
}

/* Hibernate a running sandbox (memory and disk saved, the VM stopped;
 * -EBUSY while guest operations run 5 s on; now: at once, whatever runs,
 * whose clients get errors: a spent credit, a suspended workspace), wake
 * a hibernated one, replace the
 * TTL (seconds, 0: none), replace the egress policy (netpolicy.h text, in
 * force when this returns). *out (NULL: not wanted) gets the record after
 * the change; on failure it is untouched. */
static inline int hostif_hibernate(struct hostif *hi, const char *ws, const char *id, bool now,
				   struct sbx_row *out)
{
	return hi->ops->hibernate(hi->ctx, ws, id, now, out);
}

static inline int hostif_wake(struct hostif *hi, const char *ws, const char *id, struct sbx_row *out)
{
	return hi->ops->wake(hi->ctx, ws, id, out);
}

/* Pause a running sandbox (vCPUs stopped; its VMM, memory and network
 * kept: -EBUSY while guest operations run 2 s on), or resume a paused
 * one. Either on a sandbox already so is a success. */
static inline int hostif_pause(struct hostif *hi, const char *ws, const char *id, struct sbx_row *out)
{
	return hi->ops->pause(hi->ctx, ws, id, true, out);
}

static inline int hostif_resume(struct hostif *hi, const char *ws, const char *id, struct sbx_row *out)
{
	return hi->ops->pause(hi->ctx, ws, id, false, out);
}

/* Change the TTL rule (host_types.h struct lifecycle_change). */
static inline int hostif_set_lifecycle(struct hostif *hi, const char *ws, const char *id,
				       const struct lifecycle_change *lc, struct sbx_row *out)
{
	return hi->ops->set_lifecycle(hi->ctx, ws, id, lc, out);
}

static inline int hostif_set_network(struct hostif *hi, const char *ws, const char *id, const char *policy,
				     struct sbx_row *out)
{
	return hi->ops->set_network(hi->ctx, ws, id, policy, out);
}

/* A snapshot of the running sandbox (memory and disk): its id in snap
 * (the store has its record). */
static inline int hostif_snapshot(struct hostif *hi, const char *ws, const char *id, char snap[ID_MAX])
{
	return hi->ops->snapshot(hi->ctx, ws, id, snap);
}

/* Delete the workspace's snapshot snap. */
static inline int hostif_snapshot_delete(struct hostif *hi, const char *ws, const char *snap)
{
	return hi->ops->snapshot_delete(hi->ctx, ws, snap);
}

/* A named volume of the workspace (docs/api.md "Volumes") made on the
 * host (an ext4 file of size_mib): -EEXIST for a name it has; *out its
 * record. Delete: -EBUSY while a sandbox has it (naming it), -ENOENT
 * unless it is the workspace's. Remote: the volume is made on one host
 * (the up one with the most free disk), recorded in the cluster's
 * database and placed there (kind "volume"); its sandboxes are placed
 * where it is (docs/cluster.md "Volumes"); a call about it while that
 * host is down is -EHOSTDOWN. */
static inline int hostif_volume_create(struct hostif *hi, const char *ws, const char *name, int64_t size_mib,
				       struct vol_row *out)
{
	return hi->ops->volume_create(hi->ctx, ws, name, size_mib, out);
}

static inline int hostif_volume_delete(struct hostif *hi, const char *ws, const char *id)
{
	return hi->ops->volume_delete(hi->ctx, ws, id);
}

/* The volume as its host has it: *out (may be NULL) its record, and each
 * attachment (which sandbox has it where) to fn (may be NULL), oldest
 * first. -ENOENT unless it is the workspace's. */
static inline int hostif_volume_get(struct hostif *hi, const char *ws, const char *id, struct vol_row *out,
				    store_att_fn *fn, void *fctx)
{
	return hi->ops->volume_get(hi->ctx, ws, id, out, fn, fctx);
}

/* A listing's hostif_volume_get for the workspace's volumes v[0..n) (ws
 * NULL: any workspace's): fn(i, a) for each attachment of v[i], in
 * hostif_volume_get's order, or fn(i, NULL) once when v[i]'s host cannot
 * say (what it told of v[i] before is void); the others are still told.
 * < 0 only when fn failed (its error) or out of memory. Local: one query
 * for them all, not one a volume. */
static inline int hostif_volume_attachments(struct hostif *hi, const char *ws, const struct vol_row *v, size_t n,
					    hostif_att_fn *fn, void *fctx)
{
	return hi->ops->volume_attachments(hi->ctx, ws, v, n, fn, fctx);
}

/* Attach the workspace's volume v (its id resolved) to sandbox id, or
 * detach volume (an id) from it (host.h host_volume_attach). Remote: the
 * volume must be on the sandbox's host (-EINVAL naming both). */
static inline int hostif_volume_attach(struct hostif *hi, const char *ws, const char *id,
				       const struct create_volume *v)
{
	return hi->ops->volume_attach(hi->ctx, ws, id, v);
}

static inline int hostif_volume_detach(struct hostif *hi, const char *ws, const char *id, const char *volume,
					bool force)
{
	return hi->ops->volume_detach(hi->ctx, ws, id, volume, force);
}

/* Fork (struct hostif_fork). children[0..*made) get the records of the
 * children that exist (sbx_row_clear each), even when a later one failed
 * (then < 0, errmsg() says why); a child whose record could not be copied
 * (out of memory) exists but has id "": skip it. */
static inline int hostif_fork(struct hostif *hi, const struct hostif_fork *req, struct sbx_row *children,
			      int *made)
{
	return hi->ops->fork(hi->ctx, req, children, made);
}

/* ---- guest access --------------------------------------------------------------- */

/* Wake the sandbox if it hibernates, count an operation (activity for the
 * TTL) until hostif_leave, and connect to its guest agent: out->g. On
 * failure nothing is counted and *out is zeroed (leaving it does nothing);
 * -ECONNREFUSED when the agent does not answer. */
static inline int hostif_enter(struct hostif *hi, const char *ws, const char *id, struct hostif_guest *out)
{
	return hi->ops->enter(hi->ctx, ws, id, out);
}

/* Count an operation that has its guest connection already (a proxied
 * WebSocket taken over from its request), without waking or connecting:
 * -EBUSY-style state error unless running. out->g is NULL; hostif_leave
 * ends it. */
static inline int hostif_hold(struct hostif *hi, const char *ws, const char *id, struct hostif_guest *out)
{
	return hi->ops->hold(hi->ctx, ws, id, out);
}

/* End an operation: close its connection and stop counting it. Once per
 * enter or hold; a zeroed handle (a failed enter) is left alone. The
 * handle is zeroed. errmsg() is left as it was: callers leave on their
 * error paths and report the guest operation's error afterwards. */
static inline void hostif_leave(struct hostif *hi, struct hostif_guest *hg)
{
	hi->ops->leave(hi->ctx, hg);
}

/* Count a change to the sandbox as activity (TTL; docs/api.md says what
 * is), now. -ENOENT if it is gone (callers may ignore it); errmsg() is
 * left as it was. */
static inline int hostif_touch(struct hostif *hi, const char *ws, const char *id)
{
	return hi->ops->touch(hi->ctx, ws, id);
}

/* ---- commands by id --------------------------------------------------------------- */

/* A command run in a sandbox's guest for an operation of kiln's own (a
 * database's password, an app's supervisor or log), over hostif_enter:
 * the caller names the sandbox and gets plain data back, no connection. */
struct hostif_run {
	const char *const *argv;
	const char *const *env;		/* NAME=VALUE, NULL-terminated, or NULL */
	uint32_t timeout_ms;		/* the guest kills it after this (0: never) */
	bool background;		/* start it and leave it running: no output, no exit */
	size_t out_max, err_max;	/* bytes of stdout / stderr kept (the rest is dropped) */
	int64_t enter_until_ms;		/* CLOCK_MONOTONIC ms: a slow guest is tried again until then; 0: once */
	/* out (not background): how it ended, and its output (hostif_run_free) */
	int code, signal;		/* the exit code (128 + signal), the signal or 0 */
	bool timed_out;
	struct strbuf out, err;
};

/* Run r->argv in the workspace's sandbox id to its exit (0 whatever its
 * exit code), or start it in the background. A slow guest (one just made
 * or woken on a busy host: -ECONNREFUSED, -ETIMEDOUT, -ECONNRESET,
 * -EAGAIN) is entered again every 100 ms until r->enter_until_ms. Each
 * wait for the command's next output is bounded by its timeout_ms plus
 * 5 s (-ETIMEDOUT), none without one. Call hostif_run_free after it,
 * whatever it returned. */
int hostif_run(struct hostif *hi, const char *ws, const char *id, struct hostif_run *r);
void hostif_run_free(struct hostif_run *r);

/* Whether something in the sandbox's guest accepts TCP connections on its
 * loopback port: 1 it does, 0 not (yet): refused, or the guest did not
 * answer the connect in time; < 0 the guest could not be entered (after
 * tries until enter_until_ms, as hostif_run) or another error. */
int hostif_port_listening(struct hostif *hi, const char *ws, const char *id, unsigned port,
			  int64_t enter_until_ms);

/* ---- what the host shows ---------------------------------------------------------- */

/* A read-only descriptor of the sandbox's console log (host.h
 * host_log_open: the guest kernel's and kiln-init's lines as the VMM
 * appends them; the caller closes it). A remote implementation gives a
 * copy of what the agent relays (its last 64 MiB). *more: -1 where *fd
 * grows as the log does (this host's file); with follow, a remote one
 * gives a stream socket there that carries what the log gets after the
 * copy, and ends when the sandbox does (the caller closes it too). */
static inline int hostif_log_open(struct hostif *hi, const char *ws, const char *id, bool follow, int *fd,
				  int *more)
{
	*more = -1;
	return hi->ops->log_open(hi->ctx, ws, id, follow, fd, more);
}

/* Every known template, in the host's order; fn's non-zero return stops. */
static inline int hostif_templates(struct hostif *hi, hostif_template_fn *fn, void *fctx)
{
	return hi->ops->templates(hi->ctx, fn, fctx);
}

/* Template builds from an uploaded context (host/tbuild.h), by the
 * template's name on the host (ops/template.h qualifies a workspace's).
 * Build: unpack and start, answering at once; -EBUSY while one runs.
 * State: building/ready/failed, versions, size. Log: the build's, open
 * (*running while it builds). Delete: -EBUSY naming the sandboxes that
 * use it. Through a cluster's API (hostif_remote.h) the build runs on
 * the host placement picks and is copied to every other host when it is
 * ready (docs/cluster.md "Templates"). */
static inline int hostif_template_build(struct hostif *hi, const struct tbuild_req *req)
{
	return hi->ops->template_build(hi->ctx, req);
}

static inline int hostif_template_state(struct hostif *hi, const char *name, struct tbuild_state *out)
{
	return hi->ops->template_state(hi->ctx, name, out);
}

static inline int hostif_template_log_open(struct hostif *hi, const char *name, int *fd, bool *running)
{
	return hi->ops->template_log_open(hi->ctx, name, fd, running);
}

static inline int hostif_template_delete(struct hostif *hi, const char *name)
{
	return hi->ops->template_delete(hi->ctx, name);
}

/* A template's version in service as an archive for another host
 * (host/tship.h): export fills out (fd taken over by the caller); import
 * takes one, checking its sha256 (-EBADMSG), and puts it in service
 * once its zygote runs. A host's calls: a cluster's API answers
 * -ENOTSUP (it relays them between hosts itself). */
static inline int hostif_template_export(struct hostif *hi, const char *name, struct hostif_tarchive *out)
{
	return hi->ops->template_export(hi->ctx, name, out);
}

static inline int hostif_template_import(struct hostif *hi, const char *name, int fd, const char *sha256,
					 int *version, int *had)
{
	return hi->ops->template_import(hi->ctx, name, fd, sha256, version, had);
}

/* The host's gauges (sandboxes by state, guest memory), appended to b in
 * Prometheus text format. */
static inline void hostif_metrics(struct hostif *hi, struct strbuf *b)
{
	hi->ops->metrics(hi->ctx, b);
}

/* Hear of every sandbox record saved (host_types.h struct host_event; the
 * callback must only copy what it needs and return). -ENOSPC when too
 * many listen. After unsubscribe returns, fn is never called with fctx. */
static inline int hostif_subscribe(struct hostif *hi, host_event_fn *fn, void *fctx)
{
	return hi->ops->subscribe(hi->ctx, fn, fctx);
}

static inline void hostif_unsubscribe(struct hostif *hi, host_event_fn *fn, void *fctx)
{
	hi->ops->unsubscribe(hi->ctx, fn, fctx);
}

/* The implementations' constructors are in their own headers
 * (hostif_local.h), for kilnd's main alone. */

#endif
