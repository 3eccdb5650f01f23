/*
 * hostif_local: hostif.h over host.h in this process. The agent hands out
 * references (struct sandbox *); they live here only, from host_find to
 * sandbox_put inside one call, and what goes back up is a copy of the
 * record. Guest access keeps no reference between enter and leave: leave
 * finds the sandbox again by its id, and if it is gone meanwhile (deleted
 * during the operation) there is nothing left to count, only the
 * connection to close.
 */
#include "hostif/hostif_local.h"
#include "host/guest_conn.h"
#include "host/host.h"
#include "host/host_events.h"
#include "host/template.h"
#include "host/tship.h"
#include "common/err.h"
#include "common/strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* One operation on the workspace's sandbox id, between host_find and
 * sandbox_put; arg is the operation's own (in or out). */
typedef int sandbox_op(struct host *h, struct sandbox *sb, void *arg);

/* op on the sandbox; then, if it succeeded and out is wanted, its record. */
static int with_sandbox(struct host *h, const char *ws, const char *id, sandbox_op *op, void *arg,
			struct sbx_row *out)
{
	struct sandbox *sb;
	int rc = host_find(h, ws, id, &sb);
	if (rc < 0)
		return rc;
	rc = op ? op(h, sb, arg) : 0;
	if (rc == 0 && out)
		rc = sandbox_row(sb, out);
	sandbox_put(h, sb);
	return rc;
}

static int op_touch(struct host *h, struct sandbox *sb, void *arg)
{
	(void)h, (void)arg;
	sandbox_touch(sb);
	return 0;
}

static int op_delete(struct host *h, struct sandbox *sb, void *arg)
{
	(void)arg;
	return host_delete(h, sb);
}

static int op_hibernate(struct host *h, struct sandbox *sb, void *arg)
{
	return host_hibernate(h, sb, *(bool *)arg);
}

static int op_wake(struct host *h, struct sandbox *sb, void *arg)
{
	(void)arg;
	return host_wake(h, sb);
}

static int op_pause(struct host *h, struct sandbox *sb, void *arg)
{
	return *(bool *)arg ? host_pause(h, sb) : host_resume(h, sb);
}

static int op_lifecycle(struct host *h, struct sandbox *sb, void *arg)
{
	return host_set_lifecycle(h, sb, arg);
}

static int op_network(struct host *h, struct sandbox *sb, void *arg)
{
	return host_set_network(h, sb, arg);
}

static int op_snapshot(struct host *h, struct sandbox *sb, void *arg)
{
	return host_snapshot(h, sb, arg);
}

static int op_log_open(struct host *h, struct sandbox *sb, void *arg)
{
	return host_log_open(h, sb, arg);
}

static int l_create(void *ctx, const struct create_req *req, struct sbx_row *out)
{
	struct host *h = ctx;
	struct sandbox *sb;
	int rc = host_create(h, req, &sb);
	if (rc < 0)
		return rc;
	rc = sandbox_row(sb, out);
	sandbox_put(h, sb);
	return rc;
}

static int l_get(void *ctx, const char *ws, const char *id, bool touch, struct sbx_row *out)
{
	return with_sandbox(ctx, ws, id, touch ? op_touch : NULL, NULL, out);
}

static int l_each(void *ctx, const char *ws, hostif_row_fn *fn, void *fctx)
{
	return host_each(ctx, ws, fn, fctx);
}

static int l_delete(void *ctx, const char *ws, const char *id)
{
	return with_sandbox(ctx, ws, id, op_delete, NULL, NULL);
}

static int l_hibernate(void *ctx, const char *ws, const char *id, bool now, struct sbx_row *out)
{
	return with_sandbox(ctx, ws, id, op_hibernate, &now, out);
}

static int l_wake(void *ctx, const char *ws, const char *id, struct sbx_row *out)
{
	return with_sandbox(ctx, ws, id, op_wake, NULL, out);
}

static int l_pause(void *ctx, const char *ws, const char *id, bool pause, struct sbx_row *out)
{
	return with_sandbox(ctx, ws, id, op_pause, &pause, out);
}

static int l_set_lifecycle(void *ctx, const char *ws, const char *id, const struct lifecycle_change *lc,
			   struct sbx_row *out)
{
	return with_sandbox(ctx, ws, id, op_lifecycle, (void *)lc, out);
}

static int l_set_network(void *ctx, const char *ws, const char *id, const char *policy,
			 struct sbx_row *out)
{
	return with_sandbox(ctx, ws, id, op_network, (void *)policy, out);
}

static int l_snapshot(void *ctx, const char *ws, const char *id, char snap[ID_MAX])
{
	return with_sandbox(ctx, ws, id, op_snapshot, snap, NULL);
}

static int l_snapshot_delete(void *ctx, const char *ws, const char *snap)
{
	return host_snapshot_delete(ctx, ws, snap);
}

static int l_fork(void *ctx, const struct hostif_fork *req, struct sbx_row *children, int *made)
{
	struct host *h = ctx;
	struct sandbox *parent, *kids[HOST_FORK_MAX];
	*made = 0;
	if (req->count < 1 || req->count > HOST_FORK_MAX)
		return errf(EINVAL, "count must be from 1 to %d", HOST_FORK_MAX);
	int rc = host_find(h, req->workspace, req->id, &parent);
	if (rc < 0)
		return rc;
	rc = host_fork(h, parent, req->count, req->tree, req->caps, req->report, kids, made);
	char why[512];	/* what the fork said, past the copies below */
	snprintf(why, sizeof why, "%s", rc < 0 ? errmsg() : "");
	for (int i = 0; i < *made; i++) {
		if (sandbox_row(kids[i], &children[i]) < 0)
			memset(&children[i], 0, sizeof children[i]);	/* exists; id "": skipped */
		sandbox_put(h, kids[i]);
	}
	sandbox_put(h, parent);
	if (rc < 0)
		errf(-rc, "%s", why);
	return rc;
}

/* ---- guest access ------------------------------------------------------------------ */

static void guest_handle(struct hostif_guest *out, const char *ws, const char *id, struct guest *g)
{
	out->g = g;
	snprintf(out->workspace, sizeof out->workspace, "%s", ws);
	snprintf(out->id, sizeof out->id, "%s", id);
	out->entered = true;
}

static int op_enter(struct host *h, struct sandbox *sb, void *arg)
{
	return sandbox_enter(h, sb, arg);
}

static int op_hold(struct host *h, struct sandbox *sb, void *arg)
{
	(void)arg;
	return sandbox_hold(h, sb);
}

static int l_enter(void *ctx, const char *ws, const char *id, struct hostif_guest *out)
{
	struct guest *g = NULL;
	memset(out, 0, sizeof *out);
	int rc = with_sandbox(ctx, ws, id, op_enter, &g, NULL);
	if (rc == 0)
		guest_handle(out, ws, id, g);
	return rc;
}

static int l_hold(void *ctx, const char *ws, const char *id, struct hostif_guest *out)
{
	memset(out, 0, sizeof *out);
	int rc = with_sandbox(ctx, ws, id, op_hold, NULL, NULL);
	if (rc == 0)
		guest_handle(out, ws, id, NULL);
	return rc;
}

static void l_leave(void *ctx, struct hostif_guest *hg)
{
	struct host *h = ctx;
	struct sandbox *sb;
	if (!hg->entered)
		return;
	/* The caller reports the guest operation's error after this: the
	 * lookup must not replace its message. */
	char keep[512];
	snprintf(keep, sizeof keep, "%s", errmsg());
	if (host_find(h, hg->workspace, hg->id, &sb) == 0) {
		sandbox_leave(h, sb, hg->g);
		sandbox_put(h, sb);
	} else {
		guest_close(hg->g);	/* deleted meanwhile: nothing to count */
	}
	memset(hg, 0, sizeof *hg);
	errf(EIO, "%s", keep);	/* the message, as it was */
}

static int l_touch(void *ctx, const char *ws, const char *id)
{
	char keep[512];	/* as for leave: touching is never the error reported */
	snprintf(keep, sizeof keep, "%s", errmsg());
	int rc = with_sandbox(ctx, ws, id, op_touch, NULL, NULL);
	errf(EIO, "%s", keep);
	return rc;
}

/* ---- what the host shows ------------------------------------------------------------ */

static int l_log_open(void *ctx, const char *ws, const char *id, bool follow, int *fd, int *more)
{
	(void)follow, (void)more;	/* the file itself grows: *more stays -1 (hostif.h) */
	return with_sandbox(ctx, ws, id, op_log_open, fd, NULL);
}

struct tmpl_walk {
	hostif_template_fn *fn;
	void *fctx;
};

static int tmpl_copy(void *ctx, const struct template_def *d, const struct tmpl *t)
{
	struct tmpl_walk *w = ctx;
	struct hostif_template ht = {
		.vcpus = t ? t->vcpus : d->vcpus,
		.memory_mib = t ? t->memory_mib : d->memory_mib,
		.disk_mib = t ? t->disk_mib : 0,
		.built = t != NULL,
		.version = t ? t->version : 0,
		.built_ms = t ? t->built_ms : 0,
		.snapshot = t && t->snapshot,
	};
	snprintf(ht.name, sizeof ht.name, "%s", d->name);
	snprintf(ht.description, sizeof ht.description, "%s", d->description);
	if (t) {
		snprintf(ht.start, sizeof ht.start, "%s", t->start);
		ht.ready_port = t->ready_port;
	}
	return w->fn(w->fctx, &ht);
}

static int l_templates(void *ctx, hostif_template_fn *fn, void *fctx)
{
	struct tmpl_walk w = { fn, fctx };
	return host_templates(ctx, tmpl_copy, &w);
}

static int l_template_build(void *ctx, const struct tbuild_req *req)
{
	return tbuild_start(ctx, req);
}

static int l_template_state(void *ctx, const char *name, struct tbuild_state *out)
{
	return tbuild_state(ctx, name, out);
}

static int l_template_log_open(void *ctx, const char *name, int *fd, bool *running)
{
	return tbuild_log_open(ctx, name, fd, running);
}

static int l_template_delete(void *ctx, const char *name)
{
	return tbuild_delete(ctx, name);
}

static int l_template_export(void *ctx, const char *name, struct hostif_tarchive *out)
{
	memset(out, 0, sizeof *out);
	return tship_export(ctx, name, &out->fd, &out->size, &out->version, out->sha256);
}

static int l_template_import(void *ctx, const char *name, int fd, const char *sha256, int *version, int *had)
{
	return tship_import(ctx, name, fd, sha256, version, had);
}

static void l_metrics(void *ctx, struct strbuf *b)
{
	host_metrics(ctx, b);
}

static int l_subscribe(void *ctx, host_event_fn *fn, void *fctx)
{
	(void)ctx;	/* the agent's subscribers are one list per process */
	return host_events_subscribe(fn, fctx);
}

static void l_unsubscribe(void *ctx, host_event_fn *fn, void *fctx)
{
	(void)ctx;
	host_events_unsubscribe(fn, fctx);
}

static int l_volume_create(void *ctx, const char *ws, const char *name, int64_t size_mib,
			   struct vol_row *out)
{
	return host_volume_create(ctx, ws, name, size_mib, out);
}

static int l_volume_delete(void *ctx, const char *ws, const char *id)
{
	return host_volume_delete(ctx, ws, id);
}

static int l_volume_get(void *ctx, const char *ws, const char *id, struct vol_row *out, store_att_fn *fn,
			void *fctx)
{
	return host_volume_get(ctx, ws, id, out, fn, fctx);
}

/* A listing's attachments: each to the index of its volume in v. */
struct att_index {
	const struct vol_row *v;
	size_t n;
	hostif_att_fn *fn;
	void *fctx;
	int rc;				/* fn's own failure: the listing's */
};

static int att_index(void *ctx, const struct vol_att *a)
{
	struct att_index *x = ctx;
	for (size_t i = 0; i < x->n; i++)
		if (!strcmp(x->v[i].id, a->volume))
			return x->rc = x->fn(x->fctx, i, a);
	return 0;	/* made after the caller's list was read */
}

static int l_volume_attachments(void *ctx, const char *ws, const struct vol_row *v, size_t n, hostif_att_fn *fn,
				void *fctx)
{
	struct att_index x = { v, n, fn, fctx, 0 };
	int rc = n ? host_volume_get(ctx, ws, NULL, NULL, att_index, &x) : 0;
	if (x.rc < 0 || rc == -ENOMEM)
		return x.rc < 0 ? x.rc : rc;
	/* The store could not say: none of them is known (as each one's
	 * get would have failed). */
	char why[512];
	snprintf(why, sizeof why, "%s", rc < 0 ? errmsg() : "");
	for (size_t i = 0; rc < 0 && i < n; i++) {
		errf(-rc, "%s", why);
		if ((x.rc = fn(fctx, i, NULL)) < 0)
			return x.rc;
	}
	return 0;
}

static int op_volume_attach(struct host *h, struct sandbox *sb, void *arg)
{
	return host_volume_attach(h, sb, arg);
}

struct detach_arg {
	const char *volume;
	bool force;
};

static int op_volume_detach(struct host *h, struct sandbox *sb, void *arg)
{
	const struct detach_arg *a = arg;
	return host_volume_detach(h, sb, a->volume, a->force);
}

static int l_volume_attach(void *ctx, const char *ws, const char *id, const struct create_volume *v)
{
	return with_sandbox(ctx, ws, id, op_volume_attach, (void *)v, NULL);
}

static int l_volume_detach(void *ctx, const char *ws, const char *id, const char *volume, bool force)
{
	struct detach_arg a = { volume, force };
	return with_sandbox(ctx, ws, id, op_volume_detach, &a, NULL);
}

static const struct hostif_ops local_ops = {
	.name = "local",
	.create = l_create,
	.get = l_get,
	.each = l_each,
	.delete = l_delete,
	.hibernate = l_hibernate,
	.wake = l_wake,
	.pause = l_pause,
	.set_lifecycle = l_set_lifecycle,
	.set_network = l_set_network,
	.snapshot = l_snapshot,
	.snapshot_delete = l_snapshot_delete,
	.volume_create = l_volume_create,
	.volume_delete = l_volume_delete,
	.volume_get = l_volume_get,
	.volume_attachments = l_volume_attachments,
	.volume_attach = l_volume_attach,
	.volume_detach = l_volume_detach,
	.fork = l_fork,
	.enter = l_enter,
	.hold = l_hold,
	.leave = l_leave,
	.touch = l_touch,
	.log_open = l_log_open,
	.templates = l_templates,
	.template_build = l_template_build,
	.template_state = l_template_state,
	.template_log_open = l_template_log_open,
	.template_delete = l_template_delete,
	.template_export = l_template_export,
	.template_import = l_template_import,
	.metrics = l_metrics,
	.subscribe = l_subscribe,
	.unsubscribe = l_unsubscribe,
};

void hostif_local(struct hostif *out, struct host *h)
{
	out->ops = &local_ops;
	out->ctx = h;
}
