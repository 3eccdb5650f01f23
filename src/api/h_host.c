/*
 * h_host: a host agent's side of the cluster's agent protocol
 * (docs/cluster.md "Agent protocol"): the API calls the host interface
 * (hostif.h) of this host over HTTP, and these routes call the local one.
 * Only a kilnd --role agent that has joined answers them, and only to the
 * key its API was given at the join (ROUTE_HOST: http.c checks it); the
 * calls and answers are hostif_wire.h's JSON.
 *
 *   POST   /v1/host/sandboxes                       create
 *   GET    /v1/host/sandboxes?workspace=W            list (W: that workspace's)
 *   GET    /v1/host/sandboxes/{ws}/{id}[?touch=1]    get
 *   DELETE /v1/host/sandboxes/{ws}/{id}              delete
 *   POST   /v1/host/sandboxes/{ws}/{id}/{action}     hibernate {now}, wake, pause, resume,
 *                                                   touch, ttl {ttl_seconds, idle_hibernate,
 *                                                   retention_seconds},
 *                                                   network, snapshot, fork
 *   GET    /v1/host/sandboxes/{ws}/{id}/guest        relay: the guest agent's stream
 *   GET    /v1/host/sandboxes/{ws}/{id}/log[?follow=1] relay: the console log
 *   DELETE /v1/host/snapshots/{ws}/{id}              delete a snapshot
 *   POST   /v1/host/volumes                          make a volume {workspace, name, size_mib}
 *   GET    /v1/host/volumes/{ws}/{id}                a volume and its attachments
 *   DELETE /v1/host/volumes/{ws}/{id}                delete a volume
 *   GET    /v1/host/templates                        templates
 *   POST   /v1/host/templates/{name}[?dockerfile=F&build_arg=K=V...&group=G&max_templates=N&max_builds=N&max_seconds=N&max_root_mib=N&first_version=N]
 *                                                   build from the context tar in the body
 *   GET    /v1/host/templates/{name}                 its build's state (wire_tbuild_state)
 *   GET    /v1/host/templates/{name}/logs            its build log (X-Kiln-Running: 1 while it builds)
 *   DELETE /v1/host/templates/{name}                 remove it
 *   GET    /v1/host/templates/{name}/export          its version in service as a tar
 *                                                   (X-Kiln-Sha256, X-Kiln-Version)
 *   PUT    /v1/host/templates/{name}/import?sha256=H take such a tar: 422 when its sha256
 *                                                   is not H (nothing kept)
 *
 * A relay is an HTTP upgrade ("Upgrade: kiln-guest"); after the 101 the
 * host enters the sandbox and writes one line, "OK CWD\n" or "ERR ERRNO
 * MESSAGE\n", and then the stream is the guest agent's connection (or,
 * after "OK SIZE\n", the log's last SIZE bytes and, following, what it
 * gets later): an error found after the 101 still reaches the API as
 * itself.
 */
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "hostif/hostif.h"
#include "hostif/hostif_wire.h"
#include "ops/ops.h"
#include "ops/validate.h"
#include "host/guest_conn.h"
#include "proxy/tunnel.h"
#include "common/err.h"
#include "common/failpoint.h"
#include "common/log.h"

#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* The call failed: its status and the error as hostif_wire.h carries it. */
static int reply_wire_error(struct req *r, int rc, const struct ws_caps_report *report)
{
	const char *code;
	int status = errno_status(rc, &code);
	return reply_json(r, status, wire_error(rc, report));
}

static int reply_row(struct req *r, int status, const struct sbx_row *row)
{
	json_t *j = wire_row(row);
	return j ? reply_json(r, status, j) : reply_error(r, 500, "internal", "out of memory");
}

int h_host_create(struct req *r)
{
	struct create_req q;
	struct ws_caps caps;
	struct ws_caps_report report;
	struct create_volume vols[HOST_VOLUMES_MAX];
	int rc = wire_create_parse(r->json, &q, &caps, &report, vols);
	if (rc < 0)
		return reply_wire_error(r, rc, NULL);
	q.arrival_ns = r->arrival_ns;
	/* This host's records name the API's workspace (a create from a
	 * snapshot finds it made already). */
	if ((rc = store_workspace_mirror(r->api->store, q.workspace)) < 0)
		return reply_wire_error(r, rc, NULL);
	struct sbx_row row;
	rc = hostif_create(r->api->hostif, &q, &row);
	if (rc < 0)
		return reply_wire_error(r, rc, &report);
	rc = reply_row(r, 201, &row);
	sbx_row_clear(&row);
	return rc;
}

static int add_row(void *ctx, const struct sbx_row *row)
{
	json_t *j = wire_row(row);
	return j && json_array_append_new(ctx, j) == 0 ? 0 : errf(ENOMEM, "out of memory");
}

int h_host_list(struct req *r)
{
	const char *ws = req_query(r, "workspace");
	json_t *a = json_array();
	if (!a)
		return reply_error(r, 500, "internal", "out of memory");
	int rc = hostif_each(r->api->hostif, ws && ws[0] ? ws : NULL, add_row, a);
	if (rc < 0) {
		json_decref(a);
		return reply_wire_error(r, rc, NULL);
	}
	return reply_json(r, 200, json_pack("{s:o}", "sandboxes", a));
}

int h_host_get(struct req *r)
{
	const char *touch = req_query(r, "touch");
	struct sbx_row row;
	int rc = hostif_get(r->api->hostif, r->params[0], r->params[1], touch && !strcmp(touch, "1"), &row);
	if (rc < 0)
		return reply_wire_error(r, rc, NULL);
	rc = reply_row(r, 200, &row);
	sbx_row_clear(&row);
	return rc;
}

int h_host_delete(struct req *r)
{
	/* A test's reset connection (common/failpoint.h): unanswered. */
	if (failpoint_hit(FP_HOST_DROP_DELETE)) {
		log_warn("test: the delete of sandbox %s dropped unanswered (KILN_TEST_HOST_DROP_DELETES)", r->params[1]);
		return reply_abort(r);
	}
	int rc = hostif_delete(r->api->hostif, r->params[0], r->params[1]);
	return rc < 0 ? reply_wire_error(r, rc, NULL) : reply_empty(r, 204);
}

int h_host_snapshot_delete(struct req *r)
{
	int rc = hostif_snapshot_delete(r->api->hostif, r->params[0], r->params[1]);
	return rc < 0 ? reply_wire_error(r, rc, NULL) : reply_empty(r, 204);
}

/* ---- volumes (docs/cluster.md "Volumes") ---------------------------------- */

int h_host_volume_create(struct req *r)
{
	static const char *const keys[] = { "workspace", "name", "size_mib", NULL };
	const char *ws = NULL, *name = NULL;
	int64_t size = 0;
	int rc = v_known_keys(r->json, keys);
	rc = rc ?: v_str(r->json, "workspace", true, ID_MAX - 1, &ws);
	rc = rc ?: v_str(r->json, "name", true, NAME_MAX_LEN - 1, &name);
	rc = rc ?: v_int(r->json, "size_mib", true, 1, OPS_VOLUME_MIB_MAX, &size);
	if (rc == 0 && !ops_volume_name_ok(name))
		rc = errf(EINVAL, "'%.64s' is not a volume name", name);
	/* Its record names the API's workspace (as a create's does). */
	rc = rc ?: store_workspace_mirror(r->api->store, ws);
	struct vol_row v;
	rc = rc ?: hostif_volume_create(r->api->hostif, ws, name, size, &v);
	if (rc < 0)
		return reply_wire_error(r, rc, NULL);
	json_t *j = wire_vol(&v);
	return j ? reply_json(r, 201, j) : reply_error(r, 500, "internal", "out of memory");
}

static int add_att(void *ctx, const struct vol_att *a)
{
	json_t *j = wire_att(a);
	return j && json_array_append_new(ctx, j) == 0 ? 0 : errf(ENOMEM, "out of memory");
}

int h_host_volume_get(struct req *r)
{
	struct vol_row v;
	json_t *a = json_array();
	int rc = a ? hostif_volume_get(r->api->hostif, r->params[0], r->params[1], &v, add_att, a)
		   : errf(ENOMEM, "out of memory");
	json_t *j = rc == 0 ? json_pack("{s:o,s:O}", "volume", wire_vol(&v), "attachments", a) : NULL;
	json_decref(a);
	if (rc < 0)
		return reply_wire_error(r, rc, NULL);
	return j ? reply_json(r, 200, j) : reply_error(r, 500, "internal", "out of memory");
}

int h_host_volume_delete(struct req *r)
{
	int rc = hostif_volume_delete(r->api->hostif, r->params[0], r->params[1]);
	return rc < 0 ? reply_wire_error(r, rc, NULL) : reply_empty(r, 204);
}

static int host_fork(struct req *r, const char *ws, const char *id)
{
	const json_t *b = r->json;
	struct ws_caps caps;
	struct ws_caps_report report = { 0 };
	struct hostif_fork f = {
		.workspace = ws, .id = id,
		.count = (int)json_integer_value(json_object_get(b, "count")),
		.tree = json_is_true(json_object_get(b, "tree")),
	};
	const json_t *c = json_object_get(b, "caps");
	if (c) {
		if (wire_caps_parse(c, &caps) < 0)
			return reply_wire_error(r, -EINVAL, NULL);
		f.caps = &caps, f.report = &report;
	}
	if (f.count < 1 || f.count > HOST_FORK_MAX)
		return reply_wire_error(r, errf(EINVAL, "count must be from 1 to %d", HOST_FORK_MAX), NULL);
	struct sbx_row kids[HOST_FORK_MAX];
	int made = 0;
	int rc = hostif_fork(r->api->hostif, &f, kids, &made);
	json_t *a = json_array();
	for (int i = 0; i < made; i++) {
		if (kids[i].id[0] && a)
			json_array_append_new(a, wire_row(&kids[i]));
		sbx_row_clear(&kids[i]);
	}
	json_t *o = json_pack("{s:o*}", "children", a);
	if (o && rc < 0)
		json_object_set_new(o, "error", wire_error(rc, &report));
	return o ? reply_json(r, 200, o) : reply_error(r, 500, "internal", "out of memory");
}

int h_host_action(struct req *r)
{
	const char *ws = r->params[0], *id = r->params[1], *act = r->params[2];
	struct hostif *hi = r->api->hostif;
	struct sbx_row row;
	int rc;
	if (!strcmp(act, "fork"))
		return host_fork(r, ws, id);
	if (!strcmp(act, "snapshot")) {
		char snap[ID_MAX];
		rc = hostif_snapshot(hi, ws, id, snap);
		if (rc < 0)
			return reply_wire_error(r, rc, NULL);
		/* Its record too: the API answers with it at once. */
		struct snap_row s;
		json_t *o = json_pack("{s:s}", "snapshot", snap);
		if (o && store_snapshot_load(r->api->store, snap, ws, &s) == 0) {
			json_object_set_new(o, "record", wire_snap(&s));
			snap_row_clear(&s);
		}
		return reply_json(r, 201, o);
	}
	if (!strcmp(act, "touch")) {
		rc = hostif_touch(hi, ws, id);
		return rc < 0 ? reply_wire_error(r, rc, NULL) : reply_empty(r, 204);
	}
	if (!strcmp(act, "hibernate"))
		rc = hostif_hibernate(hi, ws, id, json_is_true(json_object_get(r->json, "now")), &row);
	else if (!strcmp(act, "wake"))
		rc = hostif_wake(hi, ws, id, &row);
	else if (!strcmp(act, "pause"))
		rc = hostif_pause(hi, ws, id, &row);
	else if (!strcmp(act, "resume"))
		rc = hostif_resume(hi, ws, id, &row);
	else if (!strcmp(act, "ttl")) {
		json_t *ttl = json_object_get(r->json, "ttl_seconds");
		json_t *idle = json_object_get(r->json, "idle_hibernate");
		json_t *pause = json_object_get(r->json, "idle_pause_seconds");
		struct lifecycle_change lc = {
			.set_pause = json_is_integer(pause), .idle_pause_seconds = json_integer_value(pause),
			.set_ttl = json_is_integer(ttl), .ttl_seconds = json_integer_value(ttl),
			.set_idle = json_is_boolean(idle), .idle_hibernate = json_is_true(idle),
			.retention_seconds = json_integer_value(json_object_get(r->json, "retention_seconds")),
		};
		rc = hostif_set_lifecycle(hi, ws, id, &lc, &row);
	}
	else if (!strcmp(act, "network"))
		rc = hostif_set_network(hi, ws, id, json_string_value(json_object_get(r->json, "policy")), &row);
	else if (!strcmp(act, "volume_attach") || !strcmp(act, "volume_detach")) {
		const json_t *b = r->json;
		struct create_volume v = {
			json_string_value(json_object_get(b, "id")), json_string_value(json_object_get(b, "name")),
			json_string_value(json_object_get(b, "path")), json_is_true(json_object_get(b, "read_only")),
		};
		const char *vol = json_string_value(json_object_get(b, "volume"));
		if (act[7] == 'a' ? !v.id || !v.name || !v.path : !vol)
			return reply_wire_error(r, errf(EINVAL, "%s without its volume", act), NULL);
		rc = act[7] == 'a' ? hostif_volume_attach(hi, ws, id, &v)
				   : hostif_volume_detach(hi, ws, id, vol, json_is_true(json_object_get(b, "force")));
		rc = rc ?: hostif_get(hi, ws, id, false, &row);
	}
	else
		return reply_error(r, 404, "not_found", "no host call '%s'", act);
	if (rc < 0)
		return reply_wire_error(r, rc, NULL);
	rc = reply_row(r, 200, &row);
	sbx_row_clear(&row);
	return rc;
}

/* ---- template builds and their copies (docs/cluster.md "Templates") ---------------- */

struct host_args {
	const char *args[TBUILD_ARGS_MAX + 2];
	int n;
};

static enum MHD_Result one_build_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	struct host_args *a = cls;
	if (!strcmp(key, "build_arg") && a->n <= TBUILD_ARGS_MAX)
		a->args[a->n++] = value ? value : "";
	return MHD_YES;
}

/* query_num: the query parameter name, absent (0) or a whole number from
 * min to max; anything else -EINVAL naming it. What the API replica sent
 * (remote_template_build) is numbers; a value that is not one is refused,
 * never read as 0 or as its leading digits. */
static int query_num(struct req *r, const char *name, int64_t min, int64_t max, int64_t *out)
{
	const char *v = req_query(r, name);
	*out = 0;
	if (!v)
		return 0;
	char *end = NULL;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (end == v || *end || errno || n < min || n > max)
		return errf(EINVAL, "%s must be a whole number from %lld to %lld, not '%.20s'", name, (long long)min,
			    (long long)max, v);
	*out = n;
	return 0;
}

int h_host_template_build(struct req *r)
{
	struct host_args a = { 0 };
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, one_build_arg, &a);
	if (a.n > TBUILD_ARGS_MAX)
		return reply_wire_error(r, errf(EINVAL, "more than %d build_arg", TBUILD_ARGS_MAX), NULL);
	a.args[a.n] = NULL;
	/* The plan's limits, as the API replica that took the request read
	 * them (remote_template_build): counted here, where the build runs.
	 * vcpus, memory_mib and disk_mib: template_build checks their bounds;
	 * here only that each is a number. */
	int64_t mt, mb, ms, mr, fv, dm, vc, mm;
	int rc = query_num(r, "max_templates", 0, INT64_MAX, &mt);
	rc = rc ?: query_num(r, "max_builds", 0, INT64_MAX, &mb);
	rc = rc ?: query_num(r, "max_seconds", 0, INT64_MAX, &ms);
	rc = rc ?: query_num(r, "max_root_mib", 0, INT64_MAX, &mr);
	rc = rc ?: query_num(r, "first_version", 0, INT32_MAX, &fv);
	rc = rc ?: query_num(r, "disk_mib", 0, INT64_MAX >> 20, &dm);
	rc = rc ?: query_num(r, "vcpus", 0, INT32_MAX, &vc);
	rc = rc ?: query_num(r, "memory_mib", 0, INT32_MAX, &mm);
	if (rc < 0)
		return reply_wire_error(r, rc, NULL);
	struct tbuild_req q = { .name = r->params[0], .tar_fd = r->body_fd, .dockerfile = req_query(r, "dockerfile"),
				.build_args = a.n ? a.args : NULL, .group = req_query(r, "group"),
				.max_templates = mt, .max_builds = mb, .max_seconds = ms, .max_root_mib = mr,
				.disk_mib = dm, .build_net = req_query(r, "build_net"),
				.vcpus = (int)vc, .memory_mib = (int)mm, .first_version = fv };
	rc = hostif_template_build(r->api->hostif, &q);
	if (rc < 0)
		return reply_wire_error(r, rc, NULL);
	return reply_json(r, 202, json_pack("{s:s}", "status", "building"));
}

int h_host_template_get(struct req *r)
{
	struct tbuild_state st;
	int rc = hostif_template_state(r->api->hostif, r->params[0], &st);
	if (rc < 0)
		return reply_wire_error(r, rc, NULL);
	json_t *j = wire_tbuild_state(&st);
	return j ? reply_json(r, 200, j) : reply_error(r, 500, "internal", "out of memory");
}

int h_host_template_delete(struct req *r)
{
	int rc = hostif_template_delete(r->api->hostif, r->params[0]);
	return rc < 0 ? reply_wire_error(r, rc, NULL) : reply_empty(r, 204);
}

/* A file's bytes as the body, with headers. */
struct fd_body {
	int fd;
	off_t off;
};

static long fd_body_read(void *ctx, char *buf, size_t max)
{
	struct fd_body *b = ctx;
	ssize_t n = pread(b->fd, buf, max, b->off);
	if (n < 0)
		return HTTP_STREAM_ERROR;
	if (n == 0)
		return HTTP_STREAM_END;
	b->off += n;
	return n;
}

static void fd_body_done(void *ctx)
{
	struct fd_body *b = ctx;
	close(b->fd);
	free(b);
}

static int reply_fd_with(struct req *r, int fd, uint64_t size, const char *const hd[][2])
{
	struct fd_body *b = calloc(1, sizeof *b);
	if (!b) {
		close(fd);
		return reply_error(r, 500, "internal", "out of memory");
	}
	b->fd = fd;
	return reply_response(r, 200, hd, size, fd_body_read, fd_body_done, b);
}

int h_host_template_logs(struct req *r)
{
	int fd;
	bool running = false;
	int rc = hostif_template_log_open(r->api->hostif, r->params[0], &fd, &running);
	if (rc < 0)
		return reply_wire_error(r, rc, NULL);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return reply_wire_error(r, errf_sys("fstat"), NULL);
	}
	const char *const hd[][2] = { { "Content-Type", "text/plain; charset=utf-8" },
				      { "X-Kiln-Running", running ? "1" : "0" }, { NULL, NULL } };
	return reply_fd_with(r, fd, (uint64_t)st.st_size, hd);
}

int h_host_template_export(struct req *r)
{
	struct hostif_tarchive ta;
	int rc = hostif_template_export(r->api->hostif, r->params[0], &ta);
	if (rc < 0)
		return reply_wire_error(r, rc, NULL);
	char ver[16];
	snprintf(ver, sizeof ver, "%d", ta.version);
	const char *const hd[][2] = { { "Content-Type", "application/x-tar" }, { "X-Kiln-Sha256", ta.sha256 },
				      { "X-Kiln-Version", ver }, { NULL, NULL } };
	return reply_fd_with(r, ta.fd, ta.size, hd);
}

int h_host_template_import(struct req *r)
{
	int version = 0, had = 0;
	int rc = hostif_template_import(r->api->hostif, r->params[0], r->body_fd, req_query(r, "sha256"), &version,
					&had);
	if (rc == -EBADMSG)	/* the bytes are not the builder's: 422, nothing kept */
		return reply_json(r, 422, wire_error(rc, NULL));
	if (rc < 0)
		return reply_wire_error(r, rc, NULL);
	return reply_json(r, had ? 200 : 201, json_pack("{s:i,s:b}", "version", version, "had", had));
}

static int add_template(void *ctx, const struct hostif_template *t)
{
	json_t *j = wire_template(t);
	return j && json_array_append_new(ctx, j) == 0 ? 0 : errf(ENOMEM, "out of memory");
}

int h_host_templates(struct req *r)
{
	json_t *a = json_array();
	int rc = a ? hostif_templates(r->api->hostif, add_template, a) : errf(ENOMEM, "out of memory");
	if (rc < 0) {
		json_decref(a);
		return reply_wire_error(r, rc, NULL);
	}
	return reply_json(r, 200, json_pack("{s:o}", "templates", a));
}

/* ---- relays ---------------------------------------------------------------------- */

struct relay {
	struct api *api;
	char ws[ID_MAX], id[ID_MAX];
	bool log, follow;
};

#define RELAY_SEND_WAIT_MS 30000
#define LOG_RELAY_MAX (64 << 20)	/* the last bytes of a console a relay sends */
#define LOG_FOLLOW_POLL_MS 250

static int relay_send(int fd, const void *p, size_t n)
{
	return tunnel_send_all(fd, p, n, RELAY_SEND_WAIT_MS);
}

static void say_error(int fd, int rc)
{
	char line[600];
	int n = snprintf(line, sizeof line, "ERR %d %.500s\n", -rc, errmsg());
	for (int i = 4; i < n - 1; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	relay_send(fd, line, (size_t)n);
}

static void relay_tick(void *ctx)
{
	struct relay *rl = ctx;
	hostif_touch(rl->api->hostif, rl->ws, rl->id);
}

static void relay_guest(struct relay *rl, int fd, int peer, const char *extra, size_t n)
{
	struct hostif *hi = rl->api->hostif;
	struct hostif_guest hg;
	int gfd = -1;
	void *early = NULL;
	size_t m = 0;
	int rc = hostif_enter(hi, rl->ws, rl->id, &hg);
	rc = rc ?: guest_release(hg.g, &gfd, &early, &m);
	if (rc < 0) {
		say_error(fd, rc);
		hostif_leave(hi, &hg);
		return;
	}
	char line[320];
	int k = snprintf(line, sizeof line, "OK %s\n", guest_default_cwd(hg.g));
	if (relay_send(fd, line, (size_t)k) == 0 && (!m || relay_send(fd, early, m) == 0) &&
	    (!n || relay_send(gfd, extra, n) == 0))
		tunnel_run(fd, gfd, peer, relay_tick, rl);
	free(early);
	close(gfd);
	hostif_leave(hi, &hg);
}

/* "OK SIZE\n" and the log's last SIZE bytes as they are now; following,
 * then what the VMM appends, until the sandbox ends or the API goes
 * (peer: http.h, the API's TLS connection). */
static void relay_log(struct relay *rl, int fd, int peer)
{
	int lfd = -1, more;
	int rc = hostif_log_open(rl->api->hostif, rl->ws, rl->id, false, &lfd, &more);
	if (rc < 0) {
		say_error(fd, rc);
		return;
	}
	struct stat st;
	off_t size = fstat(lfd, &st) == 0 ? st.st_size : 0;
	off_t at = size > LOG_RELAY_MAX ? size - LOG_RELAY_MAX : 0, left = size - at;
	char buf[65536];
	int k = snprintf(buf, sizeof buf, "OK %lld\n", (long long)left);
	int ok = relay_send(fd, buf, (size_t)k);
	while (ok == 0 && left > 0) {
		ssize_t got = pread(lfd, buf, left < (off_t)sizeof buf ? (size_t)left : sizeof buf, at);
		if (got <= 0) {
			ok = -1;	/* shorter than it was: the API sees it end early */
			break;
		}
		ok = relay_send(fd, buf, (size_t)got);
		at += got, left -= got;
	}
	bool last = false;	/* the sandbox ended: what it wrote before, then the end */
	while (ok == 0 && rl->follow) {
		ssize_t got = pread(lfd, buf, sizeof buf, at);
		if (got > 0) {
			ok = relay_send(fd, buf, (size_t)got);
			at += got;
			continue;
		}
		if (last)
			break;
		if ((last = sandbox_ended(rl->api->hostif, rl->ws, rl->id)))
			continue;
		struct pollfd p[2] = { { .fd = fd, .events = POLLRDHUP }, { .fd = peer, .events = POLLRDHUP } };
		if (poll(p, 2, LOG_FOLLOW_POLL_MS) > 0)
			break;	/* the API went */
	}
	close(lfd);
}

static void relay_run(void *ctx, int fd, int peer, const char *extra, size_t n)
{
	struct relay *rl = ctx;
	if (rl->log)
		relay_log(rl, fd, peer);
	else
		relay_guest(rl, fd, peer, extra, n);
	free(rl);
}

int h_host_relay(struct req *r)
{
	const char *what = r->params[2];
	bool log = !strcmp(what, "log");
	if (!log && strcmp(what, "guest"))
		return reply_error(r, 404, "not_found", "no host relay '%s'", what);
	const char *up = req_header(r, "Upgrade");
	if (!up || strcasecmp(up, "kiln-guest"))
		return reply_error(r, 426, "upgrade_required", "a relay wants 'Upgrade: kiln-guest'");
	/* A proper 404 now; the relay looks again after the 101. */
	int rc = hostif_get(r->api->hostif, r->params[0], r->params[1], false, NULL);
	if (rc < 0)
		return reply_wire_error(r, rc, NULL);
	struct relay *rl = calloc(1, sizeof *rl);
	if (!rl)
		return reply_error(r, 500, "internal", "out of memory");
	rl->api = r->api;
	rl->log = log;
	const char *follow = req_query(r, "follow");
	rl->follow = log && follow && !strcmp(follow, "1");
	snprintf(rl->ws, sizeof rl->ws, "%s", r->params[0]);
	snprintf(rl->id, sizeof rl->id, "%s", r->params[1]);
	/* Relays count against the tenant's WebSocket cap here as on the
	 * API (--max-tunnels): the workspace is the one the path names. */
	snprintf(r->workspace, sizeof r->workspace, "%s", rl->ws);
	const char *const headers[][2] = {
		{ "Upgrade", "kiln-guest" },
		{ "Connection", "Upgrade" },
		{ NULL, NULL },
	};
	return reply_upgrade(r, headers, relay_run, rl);
}
