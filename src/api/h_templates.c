/*
 * h_templates: a workspace's own templates (docs/api.md "Templates",
 * docs/templates.md "Building through the API"):
 *   POST   /v1/templates?name=N[&dockerfile=F][&build_arg=K=V...][&disk_mib=MIB][&build_net=P]
 *          [&vcpus=N][&memory_mib=MIB]
 *          the body a tar of the build context (gzip or not), spooled to
 *          an unlinked file as it arrives (BODY_FILE, --max-file bounds
 *          it: 413), never held in memory; 202 once it is unpacked and
 *          the build runs
 *   GET    /v1/templates/{name}          status, error, versions, size
 *   GET    /v1/templates/{name}/logs     the build's log; ?follow=1 as
 *          SSE, "line" events then "end" when the build ends
 *   DELETE /v1/templates/{name}
 * The scoping (a workspace's templates are its own) is ops/template.h's.
 */
#include "ops/template.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "api/sse.h"
#include "common/err.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_MAX_READ (4 << 20)	/* a log's last 4 MiB without follow */
#define LINE_MAX_BYTES 8192

/* ---- POST: the query ------------------------------------------------------------------ */

struct build_query {
	const char *name, *dockerfile;
	int64_t disk_mib;		/* disk_mib=; 0: the FROM image's size */
	const char *build_net;		/* build_net=; NULL: no network */
	int vcpus, memory_mib;		/* vcpus=, memory_mib=; 0: 1 vCPU, 256 MiB */
	const char *args[TBUILD_ARGS_MAX + 2];
	int nargs;
	bool nul, unknown;
	char bad[64];
};

static enum MHD_Result one_arg(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
			       const char *value, size_t value_size)
{
	(void)kind, (void)key_size;
	struct build_query *q = cls;
	if (value && strlen(value) != value_size)
		q->nul = true;
	if (!strcmp(key, "build_arg")) {
		if (q->nargs <= TBUILD_ARGS_MAX)
			q->args[q->nargs++] = value ? value : "";
	} else if (strcmp(key, "name") && strcmp(key, "dockerfile") && strcmp(key, "disk_mib") &&
		   strcmp(key, "build_net") && strcmp(key, "vcpus") && strcmp(key, "memory_mib") && !q->unknown) {
		q->unknown = true;
		snprintf(q->bad, sizeof q->bad, "%s", key);
	}
	return MHD_YES;
}

/* Query parameter key, if there, as a number from lo to hi into *out. */
static int query_int(struct req *r, const char *key, int lo, int hi, const char *what, int *out)
{
	const char *v = req_query(r, key);
	if (!v)
		return 0;
	char *end = NULL;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (errno || end == v || *end || n < lo || n > hi)
		return errf(EINVAL, "%s '%.20s': want %s from %d to %d", key, v, what, lo, hi);
	*out = (int)n;
	return 0;
}

static int build_query(struct req *r, struct build_query *q)
{
	memset(q, 0, sizeof *q);
	MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, one_arg, q);
	if (q->nul)
		return errf(EINVAL, "a query parameter holds a NUL byte");
	if (q->unknown)
		return errf(EINVAL, "unknown query parameter '%s' (name, dockerfile, build_arg, disk_mib, build_net, vcpus, "
				    "memory_mib)", q->bad);
	if (q->nargs > TBUILD_ARGS_MAX)
		return errf(EINVAL, "more than %d build_arg", TBUILD_ARGS_MAX);
	q->name = req_query(r, "name");
	q->dockerfile = req_query(r, "dockerfile");
	q->build_net = req_query(r, "build_net");
	int disk = 0;
	if (query_int(r, "disk_mib", OPS_TEMPLATE_DISK_MIN_MIB, OPS_TEMPLATE_DISK_MAX_MIB, "a number of MiB", &disk) < 0 ||
	    query_int(r, "vcpus", 1, OPS_TEMPLATE_VCPUS_MAX, "a number of vCPUs", &q->vcpus) < 0 ||
	    query_int(r, "memory_mib", OPS_TEMPLATE_MEMORY_MIN_MIB, OPS_TEMPLATE_MEMORY_MAX_MIB, "a number of MiB",
		      &q->memory_mib) < 0)
		return -EINVAL;
	q->disk_mib = disk;
	if (!q->name || !q->name[0])
		return errf(EINVAL, "the query's name= is required: the template's name");
	if (!ops_template_name_ok(q->name))
		return errf(EINVAL, "bad template name '%.64s' (want 1 to %d of a-z, 0-9, '-' and '_', starting "
				    "with a letter or digit)", q->name, OPS_TEMPLATE_NAME_MAX);
	for (int i = 0; i < q->nargs; i++)
		if (!ops_build_arg_ok(q->args[i]))
			return errf(EINVAL, "build_arg '%.64s': want NAME=VALUE (NAME of letters, digits and '_')",
				    q->args[i]);
	return 0;
}

/* Before a byte of the context is taken: a request bound to fail is
 * answered now. */
static int build_before_body(struct req *r)
{
	struct build_query q;
	if (build_query(r, &q) < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	const char *ct = req_header(r, "Content-Type");
	if (ct && strncmp(ct, "application/x-tar", 17) && strncmp(ct, "application/gzip", 16) &&
	    strncmp(ct, "application/x-gzip", 18) && strncmp(ct, "application/octet-stream", 24))
		return reply_error(r, 415, "unsupported_media_type",
				   "Content-Type %.64s: the body is a tar of the build context "
				   "(application/x-tar, or application/gzip for a gzipped one)", ct);
	return -1;
}

const struct route_hooks template_build_hooks = { .before_body = build_before_body };

int h_template_build(struct req *r)
{
	struct build_query q;
	if (build_query(r, &q) < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct stat st;
	if (fstat(r->body_fd, &st) < 0 || st.st_size == 0)
		return reply_error(r, 400, "invalid_request", "the body is empty: send a tar of the build context");
	q.args[q.nargs] = NULL;
	struct ops_caller c;
	struct ops_quota quota;
	req_caller_quota(r, &c, &quota);
	struct ops_build_spec s = { .dockerfile = q.dockerfile, .build_args = q.nargs ? q.args : NULL,
				    .disk_mib = q.disk_mib, .build_net = q.build_net, .vcpus = q.vcpus,
				    .memory_mib = q.memory_mib };
	int rc = ops_template_build(&c, q.name, r->body_fd, &s);
	if (rc == -EDQUOT)
		return reply_limit(r, &quota);
	if (rc < 0)
		return reply_errno(r, rc);
	char id[64];
	snprintf(id, sizeof id, "%s@%lld", q.name, (long long)wall_ms());
	return reply_json(r, 202, json_pack("{s:s,s:s,s:s,s:I}", "name", q.name, "build_id", id, "status",
					    "building", "context_bytes", (json_int_t)st.st_size));
}

/* ---- GET, DELETE ----------------------------------------------------------------------- */

int h_template_get(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	struct ops_template_info in;
	int rc = ops_template_get(&c, r->params[0], &in);
	if (rc < 0)
		return reply_errno(r, rc);
	const struct hostif_template *t = &in.t;
	const char *status = in.own ? in.b.status : (in.listed && t->built ? "ready" : "not_built");
	/* The listing's fields (render_template); null where no version is
	 * listed yet (a first build under way, or failed). */
	json_t *j = render_template(t);
	for (void *it = j && !in.listed ? json_object_iter(j) : NULL; it; it = json_object_iter_next(j, it))
		if (strcmp(json_object_iter_key(it), "name") != 0)
			json_object_iter_set_new(j, it, json_null());
	if (j && (json_object_set_new(j, "status", json_string(status)) < 0 ||
		  json_object_set_new(j, "own", json_boolean(in.own)) < 0)) {
		json_decref(j);
		j = NULL;
	}
	if (!j)
		return reply_error(r, 500, "internal", "out of memory");
	if (in.own) {
		json_t *v = json_array();
		for (int i = 0; v && i < in.b.nversions; i++)
			json_array_append_new(v, json_integer(in.b.versions[i]));
		json_object_set_new(j, "versions", v ? v : json_null());
		json_object_set_new(j, "error", in.b.error[0] ? json_string(in.b.error) : json_null());
		json_object_set_new(j, "size_bytes", json_integer(in.b.bytes));
		json_object_set_new(j, "build_started_at", in.b.started_ms ? render_time(in.b.started_ms)
									   : json_null());
		json_object_set_new(j, "build_finished_at", in.b.finished_ms ? render_time(in.b.finished_ms)
									     : json_null());
	}
	return reply_json(r, 200, j);
}

int h_template_delete(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	int rc = ops_template_delete(&c, r->params[0]);
	if (rc < 0)
		return reply_errno(r, rc);
	return reply_empty(r, 204);
}

/* ---- logs ------------------------------------------------------------------------------- */

struct tfollow {
	struct api *api;
	char ws[ID_MAX], name[64];
	int fd;
	off_t off;
	struct sse_follow sf;
	char part[LINE_MAX_BYTES + 1];
	size_t npart;
	int64_t unsure_ms;		/* since when the log could not be opened again; 0: it could */
};

static void flush_line(struct tfollow *f)
{
	f->part[f->npart] = 0;
	ops_template_unqualify(f->part, f->ws, f->name);
	f->npart = strlen(f->part);
	sse_event(&f->sf.out, "line", json_pack("{s:o}", "text", render_text(f->part, f->npart)));
	f->npart = 0;
}

/* Open the log again: is its build still running (1), or not (0)?
 * Through a cluster the open fetches the builder's log as it is now
 * (hostif_remote.h), so the new descriptor is the one that has what came
 * since; on one host it is the same file. -1: it could not be asked (a
 * cluster's host that missed a heartbeat): asked again at the next look,
 * for up to FOLLOW_UNSURE_MS. */
#define FOLLOW_UNSURE_MS 60000

static int reopen(struct tfollow *f)
{
	struct ops_caller c = { .hostif = f->api->hostif, .workspace = f->ws };
	int fd;
	bool running = false;
	int rc = ops_template_log_open(&c, f->name, &fd, &running);
	if (rc < 0) {
		if (rc == -ENOENT)
			return 0;
		if (!f->unsure_ms)
			f->unsure_ms = wall_ms();
		return wall_ms() - f->unsure_ms < FOLLOW_UNSURE_MS ? -1 : 0;
	}
	f->unsure_ms = 0;
	close(f->fd);
	f->fd = fd;
	return running;
}

/* The build log's next bytes as lines, or its end (sse_more_fn). */
static bool tfollow_more(void *ctx, struct sse_follow *sf)
{
	struct tfollow *f = ctx;
	char chunk[16384];
	/* What the open descriptor has, first; at its end, open again.
	 * Was it running before that read? Then a read to the end after
	 * it stopped has everything it wrote. */
	ssize_t n = pread(f->fd, chunk, sizeof chunk, f->off);
	int running = 1;
	if (n <= 0) {
		if ((running = reopen(f)) < 0)
			return false;	/* not known now: look again */
		n = pread(f->fd, chunk, sizeof chunk, f->off);
	}
	if (n > 0) {
		f->off += n;
		for (ssize_t i = 0; i < n; i++) {
			if (chunk[i] == '\n' || chunk[i] == '\r')
				flush_line(f);
			else if (f->npart < LINE_MAX_BYTES)
				f->part[f->npart++] = chunk[i];
		}
		return true;
	}
	if (running)
		return false;
	if (f->npart)
		flush_line(f);
	struct ops_caller c = { .hostif = f->api->hostif, .workspace = f->ws };
	struct ops_template_info in;
	json_t *e = ops_template_get(&c, f->name, &in) == 0
		? json_pack("{s:s,s:o}", "status", in.b.status, "error",
			    in.b.error[0] ? json_string(in.b.error) : json_null())
		: json_pack("{s:s}", "status", "unknown");
	sse_event(&sf->out, "end", e);
	sf->done = true;
	return true;
}

static long tfollow_read(void *ctx, char *buf, size_t max)
{
	struct tfollow *f = ctx;
	return sse_follow_read(&f->sf, tfollow_more, f, buf, max);
}

static void tfollow_done(void *ctx)
{
	struct tfollow *f = ctx;
	close(f->fd);
	sse_free(&f->sf.out);
	free(f);
}

int h_template_logs(struct req *r)
{
	bool follow = false;
	if (req_query_bool(r, "follow", &follow) < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct ops_caller c;
	req_caller(r, &c);
	int fd;
	bool running;
	int rc = ops_template_log_open(&c, r->params[0], &fd, &running);
	if (rc < 0)
		return reply_errno(r, rc);
	if (follow) {
		struct tfollow *f = calloc(1, sizeof *f);
		if (!f) {
			close(fd);
			return reply_error(r, 500, "internal", "out of memory");
		}
		f->api = r->api;
		snprintf(f->ws, sizeof f->ws, "%s", r->workspace);
		snprintf(f->name, sizeof f->name, "%s", r->params[0]);
		f->fd = fd;
		sse_follow_init(&f->sf, req_socket(r));
		return reply_stream(r, 200, "text/event-stream", tfollow_read, tfollow_done, f);
	}
	/* The whole log (its last 4 MiB) as text. */
	struct stat st;
	off_t from = fstat(fd, &st) == 0 && st.st_size > LOG_MAX_READ ? st.st_size - LOG_MAX_READ : 0;
	size_t cap = fstat(fd, &st) == 0 ? (size_t)(st.st_size - from) : 0;
	char *buf = malloc(cap + 1);
	ssize_t n = buf ? pread(fd, buf, cap, from) : -1;
	close(fd);
	if (n < 0) {
		free(buf);
		return reply_error(r, 500, "internal", "reading the build log failed");
	}
	buf[n] = 0;
	for (ssize_t i = 0; i < n; i++)
		if (!buf[i])
			buf[i] = ' ';	/* a NUL from a step's output: the rest is still text */
	ops_template_unqualify(buf, r->workspace, r->params[0]);
	return reply_text(r, 200, "text/plain; charset=utf-8", buf, strlen(buf));
}
