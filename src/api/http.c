#include "api/http.h"
#include "ops/credit.h"
#include "api/api.h"
#include "api/audit.h"
#include "api/auth.h"
#include "api/inflight.h"
#include "api/mhd_errors.h"
#include "common/metrics.h"
#include "api/ratelimit.h"
#include "api/window.h"
#include "api/routes.h"
#include "api/session.h"
#include "common/err.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double req_elapsed_ms(const struct req *r)
{
	return (double)(mono_ns() - r->arrival_ns) / 1e6;
}

const char *req_query(struct req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

struct exact {
	const char *name, *value;
	bool nul;
};

static enum MHD_Result find_exact(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				  const char *value, size_t value_size)
{
	(void)kind, (void)key_size;
	struct exact *e = cls;
	if (strcmp(key, e->name) != 0)
		return MHD_YES;
	e->value = value;
	e->nul = value && strlen(value) != value_size;
	return MHD_NO;
}

int req_query_exact(struct req *r, const char *name, const char **out)
{
	struct exact e = { name, NULL, false };
	MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, find_exact, &e);
	if (e.nul)
		return errf(EINVAL, "query parameter '%s' holds a NUL byte", name);
	*out = e.value;
	return 0;
}

struct each_header {
	req_header_fn *fn;
	void *ctx;
};

static enum MHD_Result one_header(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	(void)kind;
	struct each_header *e = cls;
	return e->fn(e->ctx, key, value ? value : "") ? MHD_NO : MHD_YES;
}

void req_each_header(struct req *r, req_header_fn *fn, void *ctx)
{
	struct each_header e = { fn, ctx };
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, one_header, &e);
}

void req_client_addr(struct req *r, char *out, size_t len)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	out[0] = 0;
	if (!ci || !ci->client_addr)
		return;
	const struct sockaddr *sa = ci->client_addr;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)len);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, (socklen_t)len);
}

/* Every Content-Length a request carries: more than one that differ is
 * an error (a proxy in front might frame the body by the other). */
struct lengths {
	const char *first, *other;
	bool conflict;
};

/* Is auth "Bearer KEY"? In time that does not depend on where they differ. */
static bool bearer_is(const char *auth, const char *key)
{
	if (!auth || strncmp(auth, "Bearer ", 7) != 0)
		return false;
	auth += 7;
	size_t n = strlen(key);
	if (strlen(auth) != n)
		return false;
	unsigned char d = 0;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(auth[i] ^ key[i]);
	return d == 0;
}

static int one_length(void *ctx, const char *key, const char *value)
{
	struct lengths *l = ctx;
	if (strcasecmp(key, "Content-Length") != 0)
		return 0;
	if (!l->first)
		l->first = value;
	else if (strcmp(l->first, value) != 0) {
		l->other = value;
		l->conflict = true;
		return 1;
	}
	return 0;
}

const char *req_header(struct req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *req_cookie(struct req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, name);
}

/* ---- replies --------------------------------------------------------------- */

/* The workspace's creates window on every answer to its key or session
 * (window.h), unless the answer has its own (a create's, exact). */
static void window_headers(struct req *r, struct MHD_Response *resp)
{
	if (!r->workspace[0] || !r->route || (r->route->flags & (ROUTE_PROXY | ROUTE_HOST | ROUTE_ADMIN)) ||
	    MHD_get_response_header(resp, "X-RateLimit-Limit"))
		return;
	struct window_count c;
	if (windows_get(r, &c) != 0)
		return;
	int64_t now = wall_ms(), left = c.limit - c.used;
	char v[24];
	snprintf(v, sizeof v, "%lld", (long long)c.limit);
	MHD_add_response_header(resp, "X-RateLimit-Limit", v);
	snprintf(v, sizeof v, "%lld", (long long)(left > 0 ? left : 0));
	MHD_add_response_header(resp, "X-RateLimit-Remaining", v);
	snprintf(v, sizeof v, "%lld", (long long)(c.reset_ms > now ? (c.reset_ms - now + 999) / 1000 : 0));
	MHD_add_response_header(resp, "X-RateLimit-Reset", v);
}

static int queue(struct req *r, int status, struct MHD_Response *resp, const char *error_code)
{
	if (!resp)
		return MHD_NO;	/* out of memory: MHD closes the connection */
	if (!r->answered)
		window_headers(r, resp);
	if (r->answered) {
		/* A handler answered twice: a bug, but not one to crash on. */
		log_warn("http: %s %s answered twice", r->method, r->route ? r->route->pattern : "?");
		MHD_destroy_response(resp);
		return MHD_YES;
	}
	r->answered = true;
	r->status = status;
	metrics_http(r->api->metrics, status, error_code);
	enum MHD_Result rc = mhd_queue(r->conn, status, resp);
	MHD_destroy_response(resp);
	return rc;
}

static struct MHD_Response *json_response(json_t *json)
{
	char *text = json_dumps(json, JSON_COMPACT);
	json_decref(json);
	if (!text)
		return NULL;
	size_t len = strlen(text);
	char *t = realloc(text, len + 2);
	if (!t) {
		free(text);
		return NULL;
	}
	t[len++] = '\n';
	t[len] = 0;
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, t, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(t);
		return NULL;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	return resp;
}

void req_note_created(struct req *r, int status, const json_t *json)
{
	const char *id = json_string_value(json_object_get(json, "id"));
	if (status == 201 && id)
		snprintf(r->created_id, sizeof r->created_id, "%s", id);
}

int reply_json(struct req *r, int status, json_t *json)
{
	if (!json)
		return reply_error(r, 500, "internal", "out of memory building the reply");
	req_note_created(r, status, json);
	return queue(r, status, json_response(json), NULL);
}

int reply_error(struct req *r, int status, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
	if (!j)	/* json_pack refuses invalid UTF-8; say so without the text */
		j = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message",
			      "(message not valid UTF-8)");
	struct MHD_Response *resp = json_response(j);
	if (resp && status == 401)
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"kiln\"");
	if (status >= 500 && status != 503 && status != 501)
		log_warn("http: %s %s -> %d %s: %s", r->method,
			 r->route ? r->route->pattern : "?", status, code, msg);
	return queue(r, status, resp, code);
}

int errno_status(int rc, const char **code)
{
	switch (-rc) {
	case ENOENT: case ESRCH:
		*code = "not_found"; return 404;
	case EINVAL: case EBADMSG: case ENAMETOOLONG: case ENOTDIR: case EISDIR: case ERANGE:
	case ELOOP: case EDOM:
		*code = "invalid_request"; return 400;
	case EACCES: case EPERM: case EROFS:
		*code = "forbidden"; return 403;
	case EEXIST: case EBUSY: case EALREADY: case ENOTEMPTY: case EXDEV: case ESTALE:
		*code = "conflict"; return 409;
	case EMSGSIZE: case EFBIG: case E2BIG:
		*code = "payload_too_large"; return 413;
	case ENOTSUP: case ENOSYS:
		*code = "not_implemented"; return 501;
	case EAGAIN: case ENOMEM: case ENOSPC: case EMFILE: case ENFILE:
		*code = "no_capacity"; return 503;
	case EDQUOT:	/* a limit of the workspace's plan (ops/plan.h) */
		*code = "limit_exceeded"; return 429;
	case E_CREDIT_SPENT:	/* the plan's monthly credit is spent (ops/credit.h) */
		*code = "credit_exhausted"; return 402;
	case E_WS_SUSPENDED:	/* the operator suspended the workspace (auth.h) */
		*code = "workspace_suspended"; return 403;
	case ETIMEDOUT:
		*code = "timeout"; return 504;
	case ECONNRESET: case ECONNREFUSED: case EPIPE: case EPROTO: case EHOSTDOWN:
		*code = "guest_error"; return 502;
	default:
		*code = "internal"; return 500;
	}
}

int reply_errno(struct req *r, int rc)
{
	const char *code;
	int status = errno_status(rc, &code);
	return reply_error(r, status, code, "%s", errmsg());
}

int reply_empty(struct req *r, int status)
{
	return queue(r, status, MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT), NULL);
}

int reply_headers(struct req *r, int status, const char *const headers[][2])
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	if (resp)
		for (int i = 0; headers[i][0]; i++)
			MHD_add_response_header(resp, headers[i][0], headers[i][1]);
	return queue(r, status, resp, NULL);
}

int reply_abort(struct req *r)
{
	r->answered = true;
	return MHD_NO;
}

int reply_fd(struct req *r, int fd, uint64_t size, const char *content_type)
{
	struct MHD_Response *resp = MHD_create_response_from_fd64(size, fd);
	if (!resp) {
		close(fd);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", content_type);
	return queue(r, 200, resp, NULL);
}

int reply_text(struct req *r, int status, const char *content_type, char *text, size_t len)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", content_type);
	return queue(r, status, resp, NULL);
}

struct stream {
	http_read_fn *read;
	http_done_fn *done;
	void *ctx;
};

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct stream *s = cls;
	long n = s->read(s->ctx, buf, max);
	if (n == HTTP_STREAM_END)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n < 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	return n;
}

static void stream_free(void *cls)
{
	struct stream *s = cls;
	s->done(s->ctx);
	free(s);
}

int reply_stream(struct req *r, int status, const char *content_type, http_read_fn *read,
		 http_done_fn *done, void *ctx)
{
	struct stream *s = calloc(1, sizeof *s);
	if (!s) {
		done(ctx);
		return reply_error(r, 500, "internal", "out of memory");
	}
	s->read = read, s->done = done, s->ctx = ctx;
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
								       stream_read, s, stream_free);
	if (!resp) {
		stream_free(s);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", content_type);
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return queue(r, status, resp, NULL);
}

int reply_response(struct req *r, int status, const char *const headers[][2], uint64_t size,
		   http_read_fn *read, http_done_fn *done, void *ctx)
{
	struct stream *s = calloc(1, sizeof *s);
	if (!s) {
		done(ctx);
		return reply_error(r, 500, "internal", "out of memory");
	}
	s->read = read, s->done = done, s->ctx = ctx;
	struct MHD_Response *resp = MHD_create_response_from_callback(
		size == HTTP_SIZE_UNKNOWN ? MHD_SIZE_UNKNOWN : size, 64 * 1024, stream_read, s,
		stream_free);
	if (!resp) {
		stream_free(s);
		return MHD_NO;
	}
	for (int i = 0; headers[i][0]; i++)
		MHD_add_response_header(resp, headers[i][0], headers[i][1]);
	return queue(r, status, resp, NULL);
}

struct upgrade {
	http_upgrade_fn *run;
	void *ctx;
	bool tls;
	struct inflight *tunnels;	/* counted there while it runs (--max-tunnels) */
	char workspace[ID_MAX];
	/* for a session on a thread of its own (HTTPS) */
	MHD_socket sock;
	int peer;			/* the client's network socket (http_upgrade_fn) */
	char *extra;
	size_t n;
	struct MHD_UpgradeResponseHandle *urh;
};

/* run_counted: the session, counted as one of its workspace's open
 * tunnels while it lasts (req_tunnel_room looks at the count). */
static void run_counted(struct upgrade *u, MHD_socket sock, int peer, const char *extra, size_t n)
{
	bool counted = false;
	if (u->tunnels)
		inflight_enter(u->tunnels, u->workspace, &counted);
	u->run(u->ctx, sock, peer, extra, n);
	if (counted)
		inflight_leave(u->tunnels, u->workspace);
}

static void *upgraded_thread(void *arg)
{
	struct upgrade *u = arg;
	run_counted(u, u->sock, u->peer, u->extra, u->n);
	MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
	free(u->extra);
	free(u);
	return NULL;
}

static void on_upgraded(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra,
			size_t n, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	(void)con_cls;
	struct upgrade *u = cls;
	if (!u->tls) {
		/* Thread per connection: this is the connection's own thread,
		 * so the session may block here for as long as it lasts. */
		run_counted(u, sock, -1, extra, n);
		free(u);
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		return;
	}
	/* HTTPS: sock is one end of a socket pair whose other end this
	 * connection's thread relays through TLS once we return, so the
	 * session must run on a thread of its own. */
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	u->sock = sock, u->n = n, u->urh = urh;
	u->peer = ci ? ci->connect_fd : -1;
	u->extra = n ? malloc(n) : NULL;
	pthread_attr_t a;
	pthread_t t;
	int rc = (n && !u->extra) ? ENOMEM : pthread_attr_init(&a);
	if (rc == 0) {
		if (n)
			memcpy(u->extra, extra, n);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &a, upgraded_thread, u);
		pthread_attr_destroy(&a);
	}
	if (rc != 0) {
		log_warn("no thread for an upgraded connection: %s", strerror(rc));
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		free(u->extra);
		free(u);	/* the session's ctx is lost with it */
	}
}

int reply_upgrade(struct req *r, const char *const headers[][2], http_upgrade_fn *run, void *ctx)
{
	struct upgrade *u = calloc(1, sizeof *u);
	if (!u)
		return reply_error(r, 500, "internal", "out of memory");
	u->run = run, u->ctx = ctx;
	u->tls = r->api->cfg->tls_cert[0] != 0;
	u->tunnels = r->api->tunnels;
	snprintf(u->workspace, sizeof u->workspace, "%s", r->workspace);
	struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgraded, u);
	if (!resp) {
		free(u);
		return MHD_NO;
	}
	for (int i = 0; headers[i][0]; i++)
		MHD_add_response_header(resp, headers[i][0], headers[i][1]);
	return queue(r, 101, resp, NULL);
}

int req_socket(struct req *r)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

/* ---- request life ---------------------------------------------------------- */

static struct req *req_new(struct api *api, struct MHD_Connection *conn)
{
	struct req *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->api = api;
	r->conn = conn;
	r->body_fd = -1;
	r->arrival_ns = mono_ns();
	return r;
}

/* MHD hands the handler a decoded path without the query; the proxy needs
 * the request target as sent. This callback sees it first and starts the
 * request's record with it. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct req *r = req_new(cls, conn);
	if (r && uri)
		r->raw_uri = strdup(uri);
	return r;
}

static void req_free(struct req *r)
{
	audit_request(r);
	if (r->inflight_counted)
		inflight_leave(r->api->inflight, r->workspace);
	if (r->upload_counted)
		inflight_leave(r->api->uploads, r->workspace);
	if (r->route && r->route->hooks && r->route->hooks->done)
		r->route->hooks->done(r);
	free(r->raw_uri);
	for (int i = 0; i < r->nparams; i++)
		free(r->params[i]);
	free(r->body);
	if (r->body_fd >= 0)
		close(r->body_fd);
	json_decref(r->json);
	free(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)cls, (void)conn, (void)toe;
	struct req *r = *con_cls;
	if (r)
		req_free(r);
	*con_cls = NULL;
}

static uint64_t body_limit(const struct req *r)
{
	const struct api_config *cfg = r->api->cfg;
	if (r->route->body == BODY_STREAM)
		return UINT64_MAX;
	return r->route->body == BODY_FILE ? cfg->max_file_bytes : cfg->max_json_bytes;
}

/* 429 rate_limited in the error shape, with Retry-After in whole seconds. */
static int reply_rate_limited(struct req *r, int retry_ms, const char *msg)
{
	char secs[16];
	snprintf(secs, sizeof secs, "%d", (retry_ms + 999) / 1000);
	json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code", "rate_limited", "message", msg);
	struct MHD_Response *resp = json_response(j);
	if (resp)
		MHD_add_response_header(resp, "Retry-After", secs);
	return queue(r, 429, resp, "rate_limited");
}

int req_rate_limit(struct req *r)
{
	int retry_ms;
	if (ratelimit_take(r->api->rl, r->workspace, &retry_ms))
		return -1;
	return reply_rate_limited(r, retry_ms, "too many requests for this workspace; slow down");
}

int req_anon_rate_limit(struct req *r)
{
	char addr[64];
	int retry_ms;
	req_client_addr(r, addr, sizeof addr);
	addr[ID_MAX - 1] = 0;	/* the table's keys are that long; IPv6 keeps its prefix */
	if (ratelimit_take(r->api->anon_rl, addr, &retry_ms))
		return -1;
	return reply_rate_limited(r, retry_ms, "too many requests from this address without a valid key; slow down");
}

int req_tunnel_room(struct req *r)
{
	int cap = r->api->cfg->max_tunnels;
	if (!cap || !r->api->tunnels || inflight_count(r->api->tunnels, r->workspace) < cap)
		return -1;
	char msg[200];
	snprintf(msg, sizeof msg, "this workspace has %d WebSocket connections open, the most it may "
		 "(--max-tunnels); retry when one ends", cap);
	return reply_rate_limited(r, 1000, msg);
}

/* One more request under way for the caller's workspace, and one more
 * upload for an upload route: -1 to go on, or the 429 sent. */
static int req_enter(struct req *r)
{
	const struct api_config *cfg = r->api->cfg;
	const char *what = NULL;
	int cap = 0;
	if (!inflight_enter(r->api->inflight, r->workspace, &r->inflight_counted))
		what = "requests", cap = cfg->max_inflight;
	else if (r->route->body == BODY_FILE &&
		 !inflight_enter(r->api->uploads, r->workspace, &r->upload_counted))
		what = "uploads", cap = cfg->max_uploads;
	if (!what)
		return -1;
	char msg[200];
	snprintf(msg, sizeof msg, "this workspace has %d %s under way, the most it may (--max-%s); "
		 "retry when one ends", cap, what, *what == 'r' ? "inflight" : "uploads");
	return reply_rate_limited(r, 1000, msg);
}

/* Checks made when the headers are in: route, key, rate, declared size.
 * Returns -1 to go on reading, or the MHD result of an early answer. */
static int admit(struct req *r, const char *url)
{
	const struct api_config *cfg = r->api->cfg;
	bool known = false;
	/* A Host under the configured domain names an exposed port, whatever
	 * the path: the whole request is the guest's. */
	r->route = NULL;
	for (size_t i = 0; i < nhost_routes && !r->route; i++)
		if (host_routes[i]->hooks->match_host(r))
			r->route = host_routes[i];
	if (!r->route)
		r->route = route_match(r->method, url, r->params, MAX_PATH_PARAMS, &r->nparams, &known);
	if (r->route && r->api->host_only && !(r->route->flags & ROUTE_HOST) &&
	    strcmp(r->route->pattern, "/healthz") && strcmp(r->route->pattern, "/metrics"))
		return reply_error(r, 404, "not_found", "no route %s %s: a host agent serves only the "
				   "cluster's host protocol; the API is the cluster's (docs/cluster.md)",
				   r->method, url);
	if (r->route && r->route->hooks && r->route->hooks->admit)
		return r->route->hooks->admit(r);
	if (!r->route) {
		if (known)
			return reply_error(r, 405, "method_not_allowed", "%s is not allowed on %s",
					   r->method, url);
		return reply_error(r, 404, "not_found", "no route %s %s", r->method, url);
	}
	if (r->route->flags & ROUTE_ADMIN) {
		/* The operator's credential, never a workspace's key or session;
		 * no workspace, so no workspace's rate or in-flight cap. */
		int rc = auth_operator(r->api, req_header(r, "Authorization"), &r->op);
		if (rc == -EACCES) {
			char why[256];
			snprintf(why, sizeof why, "%s", errmsg());
			int limited = req_anon_rate_limit(r);
			return limited >= 0 ? limited : reply_error(r, 401, "unauthorized", "%s", why);
		}
		if (rc < 0)
			return reply_errno(r, rc);
	} else if (r->route->flags & ROUTE_HOST) {
		const char *key = r->api->host_key;
		if (!key || !key[0])
			return reply_error(r, 404, "not_found", "no route %s %s: this kilnd is not a joined "
					   "host agent (docs/cluster.md)", r->method, url);
		if (!bearer_is(req_header(r, "Authorization"), key)) {
			char addr[64];
			req_client_addr(r, addr, sizeof addr);
			log_warn("cluster: a host call from %s refused: not the cluster API's key", addr);
			int limited = req_anon_rate_limit(r);
			return limited >= 0 ? limited : reply_error(r, 401, "unauthorized", "host call refused");
		}
	} else if (!(r->route->flags & ROUTE_PUBLIC)) {
		int rc = auth_http(r);	/* a key, or a dashboard session (session.h) */
		if (rc == -EACCES) {
			char why[256];
			snprintf(why, sizeof why, "%s", errmsg());
			int limited = req_anon_rate_limit(r);	/* guessing keys costs time */
			return limited >= 0 ? limited : reply_error(r, 401, "unauthorized", "%s", why);
		}
		if (rc < 0)
			return reply_errno(r, rc);
		if (r->key.id[0] && r->key.scope == KEY_READ && !(r->route->flags & ROUTE_READ))
			return reply_error(r, 403, "forbidden", "this API key's scope is read: %s %s needs "
					   "a key of scope full", r->method, r->route->pattern);
		rc = req_rate_limit(r);
		if (rc >= 0)
			return rc;
		rc = req_enter(r);
		if (rc >= 0)
			return rc;
	}
	const char *cl = req_header(r, "Content-Length");
	struct lengths lens = { 0 };
	req_each_header(r, one_length, &lens);
	if (lens.conflict)	/* RFC 9112 §6.3: unrecoverable framing */
		return reply_error(r, 400, "invalid_request",
				   "conflicting Content-Length headers ('%s' and '%s')", lens.first,
				   lens.other);
	if (cl) {
		char *end;
		errno = 0;
		unsigned long long n = strtoull(cl, &end, 10);
		if (errno || *end || end == cl)
			return reply_error(r, 400, "invalid_request", "bad Content-Length");
		if (n > body_limit(r))
			return reply_error(r, 413, "payload_too_large",
					   "the body is %llu bytes; the limit here is %llu", n,
					   (unsigned long long)body_limit(r));
	}
	if (r->route->hooks && r->route->hooks->before_body) {
		int rc = r->route->hooks->before_body(r);
		if (rc >= 0)
			return rc;
	}
	if (r->route->body == BODY_FILE) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s/tmp", cfg->data_dir);
		r->body_fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (r->body_fd < 0)
			return reply_error(r, 500, "internal", "cannot spool the upload in %s: %s", dir,
					   strerror(errno));
	}
	return -1;
}

static void take_body(struct req *r, const char *data, size_t n)
{
	if (r->route->body == BODY_STREAM) {
		if (r->route->hooks && r->route->hooks->body)
			r->route->hooks->body(r, data, n);
		return;
	}
	if (r->body_too_large || r->body_failed)
		return;
	r->body_total += n;
	if (r->body_total > body_limit(r)) {
		r->body_too_large = true;
		return;
	}
	if (r->route->body == BODY_NONE)
		return;
	if (r->route->body == BODY_FILE) {
		while (n > 0) {
			ssize_t w = write(r->body_fd, data, n);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				r->body_failed = true;
				return;
			}
			data += w, n -= w;
		}
		return;
	}
	if (r->body_len + n + 1 > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap : 4096;
		while (cap < r->body_len + n + 1)
			cap *= 2;
		char *b = realloc(r->body, cap);
		if (!b) {
			r->body_failed = true;
			return;
		}
		r->body = b, r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, data, n);
	r->body_len += n;
	r->body[r->body_len] = 0;
}

static int dispatch(struct req *r)
{
	if (r->body_too_large)
		return reply_error(r, 413, "payload_too_large", "the body is over the limit of %llu bytes",
				   (unsigned long long)body_limit(r));
	if (r->body_failed)
		return reply_error(r, 503, "no_capacity", "could not store the request body");
	if (r->route->body == BODY_JSON && r->body_len > 0) {
		json_error_t e;
		r->json = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &e);
		if (!r->json)
			return reply_error(r, 400, "invalid_json", "JSON body: %s (line %d, column %d)",
					   e.text, e.line, e.column);
		if (!json_is_object(r->json))
			return reply_error(r, 400, "invalid_json", "the JSON body must be an object");
	}
	if (r->route->body == BODY_FILE && lseek(r->body_fd, 0, SEEK_SET) < 0)
		return reply_error(r, 500, "internal", "rewinding the upload: %s", strerror(errno));
	return r->route->fn(r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct req *r = *con_cls;
	if (!r) {
		r = req_new(cls, conn);
		if (!r)
			return MHD_NO;
		*con_cls = r;
	}
	if (!r->admitted) {
		r->admitted = true;
		snprintf(r->method, sizeof r->method, "%s", method);
		/* RFC 9112 §3.2. Checked here, not by MHD_OPTION_STRICT_FOR_CLIENT:
		 * libmicrohttpd 0.9.75 writes its own answer to that twice
		 * (mhd_errors.h). */
		int rc = strcmp(version, MHD_HTTP_VERSION_1_1) == 0 && !req_header(r, "Host")
			 ? reply_error(r, 400, "invalid_request", "an HTTP/1.1 request needs a Host header")
			 : admit(r, url);
		return rc < 0 ? MHD_YES : rc;
	}
	if (*upload_size) {
		if (!r->answered)
			take_body(r, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->answered)
		return MHD_YES;
	return dispatch(r);
}

static int parse_listen(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[128], port[16];
	const char *colon = strrchr(addr, ':');
	if (!colon || !colon[1] || strlen(colon + 1) >= sizeof port)
		return errf(EINVAL, "listen address %s: want HOST:PORT", addr);
	size_t hl = colon - addr;
	if (hl >= sizeof host)
		return errf(EINVAL, "listen address %s: host too long", addr);
	memcpy(host, addr, hl);
	host[hl] = 0;
	if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = 0;
	}
	snprintf(port, sizeof port, "%s", colon + 1);
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
				  .ai_socktype = SOCK_STREAM }, *ai;
	int e = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
	if (e)
		return errf(EINVAL, "listen address %s: %s", addr, gai_strerror(e));
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

/* A PEM file, whole and NUL-terminated (malloc'd). */
static int read_pem(const char *path, char **out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("%s", path);
	size_t cap = 1 << 20, len = 0;
	char *b = malloc(cap + 1);
	ssize_t n = 0;
	while (b && len < cap && (n = read(fd, b + len, cap - len)) > 0)
		len += (size_t)n;
	close(fd);
	if (!b || n < 0 || len == 0 || len == cap) {
		free(b);
		return errf(EINVAL, "%s: not a PEM file of at most 1 MiB", path);
	}
	b[len] = 0;
	*out = b;
	return 0;
}

int http_start(struct api *api, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	int rc = parse_listen(addr, &ss, &sslen);
	if (rc < 0)
		return rc;
	/* Uploads are spooled here (BODY_FILE): the API's own directory,
	 * there whether or not a host agent shares the data directory. */
	char spool[PATH_MAX];
	snprintf(spool, sizeof spool, "%s/tmp", api->cfg->data_dir);
	if (mkdir(spool, 0700) < 0 && errno != EEXIST)
		return errf_sys("%s", spool);
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE;
	/* HTTPS (--tls-cert, --tls-key): MHD's GnuTLS, fed the PEM files. */
	struct MHD_OptionItem tls[3] = { { MHD_OPTION_END, 0, NULL } };
	if (api->cfg->tls_cert[0]) {
		static char *cert, *key;	/* MHD keeps pointers to them */
		if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
			return errf(ENOTSUP, "this libmicrohttpd has no TLS: --tls-cert cannot be served");
		if ((rc = read_pem(api->cfg->tls_cert, &cert)) < 0 || (rc = read_pem(api->cfg->tls_key, &key)) < 0)
			return rc;
		flags |= MHD_USE_TLS;
		tls[0] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, cert };
		tls[1] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, key };
		tls[2] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	}
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	struct MHD_Daemon *d = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, api,
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)api->cfg->max_connections,
		MHD_OPTION_CONNECTION_TIMEOUT, 120u,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128 * 1024),
		MHD_OPTION_THREAD_STACK_SIZE, (size_t)(2 << 20),
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, api,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, api,
		MHD_OPTION_ARRAY, tls,
		MHD_OPTION_END);
	if (!d && tls[0].option != MHD_OPTION_END)
		return errf(EINVAL, "cannot serve HTTPS on %s (in use, or --tls-cert/--tls-key are not a PEM "
			    "certificate and its key)", addr);
	if (!d)
		return errf(EADDRINUSE, "cannot listen on %s (in use, or not an address of this machine)", addr);
	api->mhd = d;
	return 0;
}

void http_stop(struct api *api)
{
	if (api->mhd)
		MHD_stop_daemon(api->mhd);
	api->mhd = NULL;
}
