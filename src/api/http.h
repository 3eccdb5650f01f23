/*
 * http: kilnd's HTTP/1.1 server, on libmicrohttpd.
 *
 * Why libmicrohttpd: it is a maintained GNU library packaged by Debian
 * (libmicrohttpd12), it has no dependencies we do not already carry, and it
 * gives us what the API needs without patches: a thread per connection (an
 * exec may block for minutes; a thread that waits on the guest is the
 * simplest correct model, and the connection limit bounds the threads),
 * streaming responses for Server-Sent Events, protocol upgrade for the PTY
 * WebSocket, and careful request parsing with bounded memory. CivetWeb was
 * the alternative; it embeds more (Lua, CGI) than we want.
 *
 * A request moves through: match a route (404/405), authenticate (401),
 * rate limit (429), read the body within its limit (413; JSON bodies in
 * memory, file uploads spooled to an unlinked temporary file), parse JSON
 * (400), then the route's handler, which answers with one of the reply_*
 * helpers. Every error is {"error":{"code":..,"message":..}}.
 */
#ifndef KILN_API_HTTP_H
#define KILN_API_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

struct api;
struct proxy;
struct route;
struct MHD_Connection;

#define MAX_PATH_PARAMS 3

struct req {
	struct api *api;
	struct MHD_Connection *conn;
	const struct route *route;
	char method[8];
	char *raw_uri;			/* as the client sent it (query included), or NULL */
	bool admitted;			/* route, key and size checked */
	char *params[MAX_PATH_PARAMS];	/* {id}... in the path */
	int nparams;
	char workspace[ID_MAX];		/* the caller's, after authentication */
	struct key_auth key;		/* the key it came with; key.id "" when none */
	struct operator_row op;		/* ROUTE_ADMIN: the operator credential; op.id "" else */
	bool inflight_counted, upload_counted;	/* in api->inflight, api->uploads (inflight.h) */
	int64_t arrival_ns;		/* CLOCK_MONOTONIC */
	/* body */
	char *body;			/* JSON: in memory, NUL-terminated */
	size_t body_len, body_cap;
	int body_fd;			/* file uploads: spooled here */
	uint64_t body_total;
	bool body_too_large, body_failed;
	json_t *json;			/* parsed JSON body, or NULL */
	struct proxy *proxy;		/* a request to an exposed port (proxy.c) */
	/* answer */
	bool answered;
	int status;
	char created_id[ID_MAX];	/* the "id" of a 201 JSON answer: what it made (audit.h) */
	void *stream;			/* state of a streaming response */
};

/* Start serving on addr ("127.0.0.1:7070", "[::1]:7070" or ":7070"). */
int http_start(struct api *api, const char *addr);
void http_stop(struct api *api);

/* The reply helpers queue the response and return the value the request
 * callback must return (MHD_YES or MHD_NO). json is stolen. */
int reply_json(struct req *r, int status, json_t *json);
/* Keep the "id" of a 201 answer's JSON in r->created_id (reply_json does;
 * other JSON replies call it). */
void req_note_created(struct req *r, int status, const json_t *json);
int reply_error(struct req *r, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Map a -errno from the layers below (with errmsg()) to a status. */
int reply_errno(struct req *r, int rc);
int reply_empty(struct req *r, int status);
/* No body, these headers ({name, value} pairs up to {NULL, NULL}). */
int reply_headers(struct req *r, int status, const char *const headers[][2]);
/* No answer: the connection is closed (the client went away). */
int reply_abort(struct req *r);
/* A file's bytes (fd is taken over). */
int reply_fd(struct req *r, int fd, uint64_t size, const char *content_type);
/* Raw text (Prometheus). */
int reply_text(struct req *r, int status, const char *content_type, char *text, size_t len);

/* A streaming body (Server-Sent Events): read fills buf with up to max
 * bytes and returns how many, blocking as long as it needs (a thread per
 * connection), or HTTP_STREAM_END / HTTP_STREAM_ERROR; done frees ctx
 * when the response ends for any reason (the client gone included). */
#define HTTP_STREAM_END   (-1)
#define HTTP_STREAM_ERROR (-2)
typedef long http_read_fn(void *ctx, char *buf, size_t max);
typedef void http_done_fn(void *ctx);
int reply_stream(struct req *r, int status, const char *content_type, http_read_fn *read,
		 http_done_fn *done, void *ctx);
/* A response with these headers ({name, value} pairs, up to {NULL,
 * NULL}) and a body of size bytes (HTTP_SIZE_UNKNOWN: chunked, or up to
 * the close) streamed by read as in reply_stream. */
#define HTTP_SIZE_UNKNOWN UINT64_MAX
int reply_response(struct req *r, int status, const char *const headers[][2], uint64_t size,
		   http_read_fn *read, http_done_fn *done, void *ctx);
/* Switch protocols (WebSocket): after the 101 with these headers is sent,
 * run(ctx, fd, peer, extra, n) owns the socket until it returns (extra:
 * bytes the client sent early); then the connection is closed. peer is
 * -1 with plain HTTP, where fd is the client's socket. With HTTPS fd is
 * one end of a socket pair that libmicrohttpd pumps through TLS, and peer
 * the client's network socket, to watch (POLLRDHUP) and never read or
 * write: MHD (0.9.75, daemon.c process_urh) stops reading when the client
 * ends its sending and passes nothing on, so fd would never show the end;
 * nor does a shutdown(fd, SHUT_WR) reach the client: only the session's
 * return closes the connection (proxy/tunnel.h). */
typedef void http_upgrade_fn(void *ctx, int fd, int peer, const char *extra, size_t n);
int reply_upgrade(struct req *r, const char *const headers[][2], http_upgrade_fn *run, void *ctx);
/* Whether r->workspace may open one more WebSocket (a PTY, a proxied
 * port's): -1 to go on, or the 429 sent when it has --max-tunnels open
 * already. Checked before the 101 and counted from the session's start,
 * so connections opened at the same instant may pass the cap by their
 * number, and nothing is counted for a 101 never sent. */
int req_tunnel_room(struct req *r);
/* Take one request from r->workspace's rate: -1 when allowed, else the
 * MHD result of the 429 sent. */
int req_rate_limit(struct req *r);
/* The same against the client's address (--anon-rate), for requests that
 * show no valid key: public ports and refused keys. */
int req_anon_rate_limit(struct req *r);
/* The client's socket, to notice it hanging up (-1 if unknown). */
int req_socket(struct req *r);

/* The status and error code a -errno maps to. */
int errno_status(int rc, const char **code);

/* A query parameter, or NULL. */
const char *req_query(struct req *r, const char *name);
/* Like req_query, but -EINVAL when the value holds a NUL byte (%00),
 * which C strings would silently cut; 0 otherwise (*out NULL if absent). */
int req_query_exact(struct req *r, const char *name, const char **out);
/* Call fn for every request header, in order; non-zero stops. */
typedef int req_header_fn(void *ctx, const char *name, const char *value);
void req_each_header(struct req *r, req_header_fn *fn, void *ctx);
/* The client's address as text ("" if unknown). */
void req_client_addr(struct req *r, char *out, size_t len);
/* A request header, or NULL. */
const char *req_header(struct req *r, const char *name);
/* A cookie the client sent, or NULL. */
const char *req_cookie(struct req *r, const char *name);
/* Milliseconds since the request arrived. */
double req_elapsed_ms(const struct req *r);

#endif
