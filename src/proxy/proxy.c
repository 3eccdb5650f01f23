/*
 * proxy: requests to exposed ports. See proxy.h for what it does; here is
 * how a request goes:
 *
 *   proxy_admit    who may (store, key), wake and enter the sandbox,
 *                  CONNECT to the port, send the request head
 *   proxy_body     each piece of the body, as MHD hands it over
 *                  (re-chunked when the client sent it chunked)
 *   h_proxy        read the guest's response head; answer with its status
 *                  and headers and a body streamed from the guest, or
 *                  switch protocols and tunnel
 *
 * The request holds the sandbox "entered" (an operation, for the TTL and
 * against hibernation) until the response has been sent.
 */
#include "proxy/proxy.h"
#include "host/guest_conn.h"
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/auth.h"
#include "api/handlers.h"
#include "api/http.h"
#include "api/routes.h"
#include "api/session.h"
#include "proxy/preview.h"
#include "proxy/tunnel.h"
#include "proxy/upstream.h"
#include "ops/app.h"
#include "ops/validate.h"
#include "common/err.h"
#include "common/strbuf.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* A guest server that takes longer than this to start answering, or to
 * take a piece of the body, gets a 504 / 502. Response bodies may pause
 * for as long as they like (event streams): the client's hang-up ends
 * them. */
#define PROXY_WAIT_MS (300 * 1000)
/* The pass a browser let in by key gets for a private port's own origin. */
#define PROXY_PASS_TTL_S 3600

struct proxy {
	struct api *api;
	struct hostif_guest guest;	/* an operation of the sandbox while guest.entered */
	int fd;				/* the stream to the guest port */
	struct upstream up;
	char workspace[ID_MAX], id[ID_MAX];
	int port;
	bool head;			/* a HEAD request: no response body */
	bool chunked;			/* the body goes to the guest chunked */
	bool upgrade;			/* the client asked to switch protocols */
	int err;			/* sending the request failed: -errno */
	char errmsg[256];
	char set_cookie[300];		/* a preview link's cookie for the answer, or "" */
};

void proxy_free(struct proxy *p)
{
	if (!p)
		return;
	up_free(&p->up);
	if (p->fd >= 0)
		close(p->fd);
	hostif_leave(p->api->hostif, &p->guest);	/* nothing if not entered */
	free(p);
}

/* ---- routing -------------------------------------------------------------------- */

/* APP_LABEL_PREFIX names an app: the request goes to the port of the
 * sandbox serving it now (params as a port's: sandbox, port, target); an
 * app with none gets its own id, which proxy_admit answers 503. */
static bool app_match(struct req *r, const char *label)
{
	if (strncmp(label, APP_LABEL_PREFIX, strlen(APP_LABEL_PREFIX)) != 0)
		return false;
	char sandbox[ID_MAX], port[8];
	int p = 0;
	/* An app's label that names none (deleted, mistyped) is answered
	 * here too, port "0": not read as PORT-ID, which would name a
	 * sandbox "not found" instead of the app. */
	if (ops_app_route(r->api->store, label, sandbox, &p) < 0 || !sandbox[0])
		snprintf(sandbox, sizeof sandbox, "app_%.32s", label + strlen(APP_LABEL_PREFIX));
	snprintf(port, sizeof port, "%d", p);
	r->params[0] = strdup(sandbox);
	r->params[1] = strdup(port);
	r->params[2] = strdup(r->raw_uri ? r->raw_uri : "/");
	r->nparams = 3;
	if (r->params[0] && r->params[1] && r->params[2])
		return true;
	while (r->nparams > 0)
		free(r->params[--r->nparams]);
	return false;
}

bool proxy_host_match(struct req *r)
{
	const char *domain = r->api->cfg->domain, *host = req_header(r, "Host");
	char name[300];
	if (!domain[0] || !host || strlen(host) >= sizeof name || host[0] == '[')
		return false;
	size_t n = 0;
	for (; host[n] && host[n] != ':'; n++)
		name[n] = (char)tolower((unsigned char)host[n]);
	name[n] = 0;
	size_t dl = strlen(domain);
	if (n <= dl + 1 || name[n - dl - 1] != '.' || strcmp(name + n - dl, domain) != 0)
		return false;
	name[n - dl - 1] = 0;		/* "8080-sbx_abc", or an app's "app-abc" */
	if (!strchr(name, '.') && app_match(r, name))
		return true;
	char *dash = strchr(name, '-');
	if (!dash || strchr(name, '.'))
		return false;
	*dash = 0;
	char *id = dash + 1;
	if (!strncmp(id, "sbx-", 4))
		id[3] = '_';
	r->params[0] = strdup(id);
	r->params[1] = strdup(name);
	r->params[2] = strdup(r->raw_uri ? r->raw_uri : "/");
	r->nparams = 3;
	if (r->params[0] && r->params[1] && r->params[2])
		return true;
	while (r->nparams > 0)		/* out of memory: not ours after all */
		free(r->params[--r->nparams]);
	return false;
}

static const char *client_scheme(struct req *r)
{
	const char *proto = req_header(r, "X-Forwarded-Proto");
	return r->api->cfg->tls_cert[0] || (proto && !strcasecmp(proto, "https")) ? "https" : "http";
}

static const char *client_host(struct req *r)
{
	const char *host = req_header(r, "Host");
	return !host || strpbrk(host, " /\\\"<>") ? r->api->cfg->listen : host;
}

void proxy_path_url(struct req *r, const char *id, int port, const char *path, char *out, size_t len)
{
	snprintf(out, len, "%s://%s/v1/sandboxes/%s/proxy/%d%s", client_scheme(r), client_host(r), id, port,
		 path);
}

/* The client's port in its Host header (":8080"), or "". */
static const char *client_port(const char *host)
{
	const char *colon = host[0] != '[' ? strrchr(host, ':') : strstr(host, "]:");
	if (colon && host[0] == '[')
		colon++;
	return colon ? colon : "";
}

void proxy_app_url(struct req *r, const char *app_id, char *out, size_t len)
{
	const char *domain = r->api->cfg->domain;
	*out = 0;
	if (domain[0] && !strncmp(app_id, "app_", 4))
		snprintf(out, len, "%s://%s%s.%s%s/", client_scheme(r), APP_LABEL_PREFIX, app_id + 4, domain,
			 client_port(client_host(r)));
}

void proxy_host_url(struct req *r, const char *id, int port, const char *path, char *out, size_t len)
{
	const char *domain = r->api->cfg->domain, *host = client_host(r);
	*out = 0;
	if (!domain[0])
		return;
	/* DNS names have no '_': the id is written with '-', which
	 * proxy_host_match turns back. The client's port, if any, is kept
	 * (the same server answers). */
	char dns_id[ID_MAX];
	snprintf(dns_id, sizeof dns_id, "%s", id);
	for (char *c = dns_id; *c; c++)
		if (*c == '_')
			*c = '-';
	snprintf(out, len, "%s://%d-%s.%s%s%s", client_scheme(r), port, dns_id, domain, client_port(host),
		 path);
}

/* target less its kiln_preview=... query parameter (the guest never sees
 * it), into out. */
static void without_preview_param(const char *target, char *out, size_t len)
{
	snprintf(out, len, "%s", target);
	char *q = strchr(out, '?');
	if (!q)
		return;
	size_t pl = strlen(PREVIEW_PARAM);
	char *w = q + 1;
	for (char *p = q + 1; *p;) {
		char *e = strchrnul(p, '&');
		bool drop = !strncmp(p, PREVIEW_PARAM, pl) && (p[pl] == '=' || p + pl == e);
		if (!drop) {
			if (w != q + 1)
				*w++ = '&';
			memmove(w, p, (size_t)(e - p));
			w += e - p;
		}
		p = *e ? e + 1 : e;
	}
	*w = 0;
	if (w == q + 1)
		*q = 0;		/* nothing else was asked */
}

/* A browser opening a page (not a script's fetch, not an SDK or curl,
 * which send no Sec-Fetch-* headers). */
static bool browser_navigation(struct req *r)
{
	const char *mode = req_header(r, "Sec-Fetch-Mode"), *dest = req_header(r, "Sec-Fetch-Dest");
	return (mode && !strcasecmp(mode, "navigate")) ||
	       (dest && (!strcasecmp(dest, "document") || !strcasecmp(dest, "iframe")));
}

/* The request target for the guest: the raw URI after
 * /v1/sandboxes/ID/proxy/PORT, or NULL when there is no "/" after PORT. */
static const char *path_rest(const char *raw)
{
	const char *p = raw;
	for (int i = 0; i < 6; i++) {
		p = strpbrk(p + (i > 0), "/?");
		if (!p || *p == '?')
			return NULL;
	}
	return p;
}

/* ".../proxy/8080" (query kept) to ".../proxy/8080/". */
static int redirect_slash(struct req *r)
{
	const char *raw = r->raw_uri ? r->raw_uri : "";
	size_t q = strcspn(raw, "?");
	char *loc = NULL;
	if (asprintf(&loc, "%.*s/%s", (int)q, raw, raw + q) < 0)
		return reply_error(r, 500, "internal", "out of memory");
	const char *const headers[][2] = { { "Location", loc }, { NULL, NULL } };
	int rc = reply_headers(r, 308, headers);
	free(loc);
	return rc;
}

/* ---- the request head --------------------------------------------------------- */

struct head_ctx {
	struct req *r;
	struct strbuf *b;
	const char *connection;		/* the client's Connection header */
	bool strip_auth;
};

static bool has_crlf(const char *s)
{
	return strpbrk(s, "\r\n") != NULL;
}

static int copy_header(void *ctx, const char *name, const char *value)
{
	struct head_ctx *h = ctx;
	if (up_hop_by_hop(name) || !strcasecmp(name, "Expect") ||
	    !strncasecmp(name, "X-Forwarded-", 12) || has_crlf(name) || has_crlf(value))
		return 0;
	if (!strcasecmp(name, "Authorization") && (h->strip_auth || up_is_kiln_credential(value)))
		return 0;
	/* The dashboard's session is kilnd's, never the guest's (session.h). */
	if (!strcasecmp(name, "Cookie")) {
		char *rest = cookie_without_session(value);
		if (rest && *rest && !has_crlf(rest))
			strbuf_printf(h->b, "Cookie: %s\r\n", rest);
		free(rest);
		return 0;
	}
	/* Headers the client declared hop-by-hop in Connection. */
	if (h->connection && up_list_has(h->connection, name))
		return 0;
	strbuf_printf(h->b, "%s: %s\r\n", name, value);
	return 0;
}

/* The request as the guest sees it. */
static void build_head(struct req *r, struct proxy *p, const char *target, bool by_host,
		       bool strip_auth, struct strbuf *b)
{
	const char *conn = req_header(r, "Connection"), *upg = req_header(r, "Upgrade");
	const char *te = req_header(r, "Transfer-Encoding"), *cl = req_header(r, "Content-Length");
	const char *host = req_header(r, "Host"), *xff = req_header(r, "X-Forwarded-For");
	struct head_ctx h = { r, b, conn, strip_auth };
	char client[64];

	strbuf_printf(b, "%s %s HTTP/1.1\r\n", r->method, target);
	req_each_header(r, copy_header, &h);
	p->upgrade = upg && conn && up_list_has(conn, "upgrade") && !has_crlf(upg);
	if (p->upgrade)
		strbuf_printf(b, "Connection: Upgrade\r\nUpgrade: %s\r\n", upg);
	else
		strbuf_printf(b, "Connection: close\r\n");
	/* MHD has decoded a chunked body; it is chunked again for the guest. */
	p->chunked = te && strcasecmp(te, "identity") != 0;
	if (p->chunked)
		strbuf_printf(b, "Transfer-Encoding: chunked\r\n");
	else if (cl && !has_crlf(cl))
		strbuf_printf(b, "Content-Length: %s\r\n", cl);
	req_client_addr(r, client, sizeof client);
	if (xff && !has_crlf(xff))
		strbuf_printf(b, "X-Forwarded-For: %s, %s\r\n", xff, client);
	else if (client[0])
		strbuf_printf(b, "X-Forwarded-For: %s\r\n", client);
	/* Behind a TLS proxy, the host and scheme the user saw are that
	 * proxy's: keep them when it said so. (Any client can send these;
	 * they tell the guest how to build links, they prove nothing.) */
	const char *xfh = req_header(r, "X-Forwarded-Host"), *xfp = req_header(r, "X-Forwarded-Proto");
	if (xfh && !has_crlf(xfh))
		host = xfh;
	if (host && !has_crlf(host))
		strbuf_printf(b, "X-Forwarded-Host: %s\r\n", host);
	strbuf_printf(b, "X-Forwarded-Proto: %s\r\n", xfp && !strcasecmp(xfp, "https") ? "https" : "http");
	if (!by_host)
		strbuf_printf(b, "X-Forwarded-Prefix: /v1/sandboxes/%s/proxy/%d\r\n", p->id, p->port);
	strbuf_printf(b, "\r\n");
}

/* ---- admission ------------------------------------------------------------------ */

/* Who may: fills r->workspace with the sandbox's workspace. -1 to go on,
 * or the MHD result of the refusal. *strip_auth: the Authorization header
 * holds a kiln key, which the guest must not see. */
/* A preview link's token (preview.h), from the query or its cookie. */
struct preview_pass {
	const char *from_query;		/* the token, when the query carried it (set the cookie) */
	const char *token;		/* the token that let the request in (query or cookie) */
	int64_t expiry;
};

static int authorize(struct req *r, const char *id, int port, bool *strip_auth, bool *public_port,
		     struct preview_pass *pv)
{
	struct api *api = r->api;
	struct port_row pr;
	struct key_auth who = { 0 };
	const char *ws = who.workspace;
	int rc = store_port_load(api->store, id, port, &pr);
	if (rc < 0 && rc != -ENOENT)
		return reply_errno(r, rc);
	bool exposed = rc == 0;
	/* A suspended workspace's ports answer nobody: not the public, not a
	 * preview link (its own keys are refused by auth_request). */
	if (exposed && pr.suspended)
		return reply_error(r, 403, "workspace_suspended",
				   "the workspace of sandbox %s is suspended by the operator", id);
	int arc = auth_request(api, req_header(r, "Authorization"), &who);
	if (arc < 0 && arc != -EACCES)
		return reply_errno(r, arc);
	*strip_auth = arc == 0;
	if (exposed && pr.public) {
		*public_port = true;
		snprintf(r->workspace, sizeof r->workspace, "%s", pr.workspace);
		/* With a valid key, the key's workspace pays; without, the
		 * client's address (anyone on the internet may call). */
		if (arc == 0) {
			snprintf(r->workspace, sizeof r->workspace, "%s", ws);
			rc = req_rate_limit(r);
			snprintf(r->workspace, sizeof r->workspace, "%s", pr.workspace);
		} else {
			rc = req_anon_rate_limit(r);
		}
		return rc >= 0 ? rc : -1;
	}
	if (arc < 0) {
		char why[256];
		snprintf(why, sizeof why, "%s", errmsg());
		const char *q = req_query(r, PREVIEW_PARAM), *tok = q ? q : req_cookie(r, PREVIEW_PARAM);
		bool pass = exposed && tok &&
			    preview_valid(api->preview_key, id, port, tok, wall_ms() / 1000, &pv->expiry);
		if (pass) {
			pv->from_query = q;
			pv->token = tok;
			snprintf(r->workspace, sizeof r->workspace, "%s", pr.workspace);
		}
		rc = req_anon_rate_limit(r);
		if (rc >= 0)
			return rc;
		if (pass)
			return -1;
		if (tok)
			snprintf(why, sizeof why, "the preview link is expired or not for this port");
		return reply_error(r, 401, "unauthorized", "%s", why);
	}
	snprintf(r->workspace, sizeof r->workspace, "%s", ws);
	rc = req_rate_limit(r);
	if (rc >= 0)
		return rc;
	/* A read key may look at a port's pages, not send it changes. */
	if (who.scope == KEY_READ && strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0)
		return reply_error(r, 403, "forbidden", "this API key's scope is read: %s to a sandbox's "
				   "port needs a full key", r->method);
	if (exposed && !strcmp(pr.workspace, ws))
		return -1;
	if (hostif_get(api->hostif, ws, id, false, NULL) < 0)
		return reply_error(r, 404, "not_found", "sandbox %s not found", id);
	return reply_error(r, 404, "not_found", "port %d of sandbox %s is not exposed", port, id);
}

int proxy_admit(struct req *r)
{
	struct api *api = r->api;
	const char *id = r->nparams == 3 ? r->params[0] : "";
	const char *portstr = r->nparams == 3 ? r->params[1] : "";
	bool by_host = r->route == &proxy_host_route, strip_auth = false;
	int port = v_port(portstr);

	if (by_host && !strncmp(id, "app_", 4) && !port)
		return reply_error(r, 404, "not_found", "app %.40s not found", id);
	if (by_host && v_is_id(id, "app_"))
		return reply_error(r, 503, "unavailable", "app %s has no sandbox serving it now (GET /v1/apps/%s "
				   "says why)", id, id);
	if (!v_is_id(id, "sbx_"))
		return reply_error(r, 404, "not_found", "sandbox %.40s not found", id);
	if (!port)
		return reply_error(r, 400, "invalid_request", "'%.20s' is not a TCP port (1 to 65535)",
				   portstr);
	const char *target = by_host ? (r->raw_uri ? r->raw_uri : "/") : path_rest(r->raw_uri ? r->raw_uri : "");
	bool public_port = false;
	struct preview_pass pv = { 0 };
	int rc = authorize(r, id, port, &strip_auth, &public_port, &pv);
	if (rc >= 0)
		return rc;
	/* With --domain, a browser opening a port's page by path is sent to
	 * the port's own origin: by path, the page would share kilnd's
	 * origin (cookies included) with the dashboard and every other
	 * sandbox. A private port's visitor carries its pass along: the
	 * preview token it came with, or (let in by a key, which a browser
	 * will not send to the other origin) a new one, so that the port's
	 * origin sets its own cookie (docs/api.md "Exposed ports"). */
	if (!by_host && r->api->cfg->domain[0] && browser_navigation(r) &&
	    (!strcmp(r->method, "GET") || !strcmp(r->method, "HEAD"))) {
		char loc[1024], token[PREVIEW_TOKEN_MAX];
		const char *pass = NULL;
		if (!public_port && pv.token) {
			pass = pv.token;
		} else if (!public_port && strip_auth) {
			preview_token(api->preview_key, id, port, wall_ms() / 1000 + PROXY_PASS_TTL_S, token);
			pass = token;
		}
		const char *from = target ? target : "/";
		char *to = malloc(strlen(from) + 1);
		if (!to)
			return reply_error(r, 500, "internal", "out of memory");
		without_preview_param(from, to, strlen(from) + 1);
		char *with = NULL;
		if ((public_port || pass) &&
		    asprintf(&with, "%s%s%s%s", to, !pass ? "" : strchr(to, '?') ? "&" : "?",
			     pass ? PREVIEW_PARAM "=" : "", pass ? pass : "") >= 0) {
			proxy_host_url(r, id, port, with, loc, sizeof loc);
			free(with);
			free(to);
			if (!has_crlf(loc)) {
				const char *const headers[][2] = { { "Location", loc }, { NULL, NULL } };
				return reply_headers(r, 308, headers);
			}
		} else {
			free(to);
		}
	}
	if (!target)
		return redirect_slash(r);
	if (target[0] != '/' || has_crlf(target) || strchr(target, ' '))
		return reply_error(r, 400, "invalid_request", "bad request target");
	char *clean = strdup(target);
	if (!clean)
		return reply_error(r, 500, "internal", "out of memory");
	without_preview_param(target, clean, strlen(target) + 1);

	struct proxy *p = calloc(1, sizeof *p);
	if (!p)
		return reply_error(r, 500, "internal", "out of memory");
	p->api = api;
	p->fd = -1;
	p->port = port;
	p->head = !strcmp(r->method, "HEAD");
	snprintf(p->workspace, sizeof p->workspace, "%s", r->workspace);
	snprintf(p->id, sizeof p->id, "%s", id);
	/* A request to a sandbox's port is activity (TTL). */
	if (hostif_get(api->hostif, p->workspace, id, true, NULL) < 0) {
		free(p);
		free(clean);
		return reply_error(r, 404, "not_found", "sandbox %s not found", id);
	}
	/* A preview link that came in the query goes on as a cookie for the
	 * port's pages, which the links between them do not carry. */
	if (pv.from_query && !has_crlf(pv.from_query) && !strpbrk(pv.from_query, "; ,")) {
		int64_t left = pv.expiry - wall_ms() / 1000;
		char path[160];
		if (by_host)
			snprintf(path, sizeof path, "/");
		else
			snprintf(path, sizeof path, "/v1/sandboxes/%s/proxy/%d/", id, port);
		snprintf(p->set_cookie, sizeof p->set_cookie, "%s=%s; Path=%s; Max-Age=%lld; HttpOnly; SameSite=Lax%s",
			 PREVIEW_PARAM, pv.from_query, path, (long long)(left > 0 ? left : 0),
			 req_is_tls(r) ? "; Secure" : "");
	}
	/* Wakes a hibernated sandbox. */
	rc = hostif_enter(api->hostif, p->workspace, id, &p->guest);
	if (rc < 0) {
		free(p);
		free(clean);
		return reply_errno(r, rc);
	}
	void *early = NULL;
	size_t n = 0;
	rc = guest_tcp_connect(p->guest.g, (unsigned)port, &p->fd, &early, &n);
	if (rc == 0)
		rc = up_init(&p->up, p->fd, req_socket(r), early, n);
	free(early);
	if (rc < 0) {
		char msg[300];
		snprintf(msg, sizeof msg, "%s", errmsg());
		proxy_free(p);
		free(clean);
		if (rc == -ECONNREFUSED)
			return reply_error(r, 502, "guest_error", "nothing listens on port %d in sandbox %s",
					   port, id);
		return reply_error(r, 502, "guest_error", "port %d of sandbox %s: %s", port, id, msg);
	}
	r->proxy = p;

	struct strbuf b;
	strbuf_init(&b);
	build_head(r, p, clean, by_host, strip_auth, &b);
	free(clean);
	if (strbuf_failed(&b))
		rc = errf(ENOMEM, "out of memory");
	else
		rc = up_write(&p->up, b.data, b.len, PROXY_WAIT_MS);
	strbuf_free(&b);
	if (rc < 0) {
		p->err = rc;
		snprintf(p->errmsg, sizeof p->errmsg, "%s", errmsg());
	}
	return -1;
}

void proxy_body(struct req *r, const char *data, size_t n)
{
	struct proxy *p = r->proxy;
	if (!p || p->err || n == 0)
		return;
	int rc = 0;
	if (p->chunked) {
		char size[24];
		snprintf(size, sizeof size, "%zx\r\n", n);
		rc = up_write(&p->up, size, strlen(size), PROXY_WAIT_MS);
	}
	if (rc == 0)
		rc = up_write(&p->up, data, n, PROXY_WAIT_MS);
	if (rc == 0 && p->chunked)
		rc = up_write(&p->up, "\r\n", 2, PROXY_WAIT_MS);
	if (rc < 0) {
		/* The guest may have answered early (413...) and closed:
		 * h_proxy still reads its answer. The rest of the body is
		 * dropped. */
		p->err = rc;
		snprintf(p->errmsg, sizeof p->errmsg, "%s", errmsg());
	}
}

/* ---- the answer ------------------------------------------------------------------ */

static long body_read(void *ctx, char *buf, size_t max)
{
	struct proxy *p = ctx;
	long n = up_read_body(&p->up, buf, max);
	hostif_touch(p->api->hostif, p->workspace, p->id);
	if (n > 0)
		return n;
	return n == 0 ? HTTP_STREAM_END : HTTP_STREAM_ERROR;
}

static void body_done(void *ctx)
{
	proxy_free(ctx);
}

static void tick(void *ctx)
{
	struct proxy *p = ctx;
	hostif_touch(p->api->hostif, p->workspace, p->id);
}

/* After the 101: the client's socket and the guest's are one stream, an
 * operation of the sandbox again until it ends. */
static void tunnel(void *ctx, int fd, int peer, const char *extra, size_t n)
{
	struct proxy *p = ctx;
	const uint8_t *early;
	size_t m = up_pending(&p->up, &early);
	bool held = hostif_hold(p->api->hostif, p->workspace, p->id, &p->guest) == 0;
	if (held && (!n || up_write(&p->up, extra, n, PROXY_WAIT_MS) == 0) &&
	    (!m || tunnel_send_all(fd, early, m, PROXY_WAIT_MS) == 0))
		tunnel_run(fd, p->fd, peer, tick, p);
	proxy_free(p);
}

/* The guest switched protocols (WebSocket). MHD gives upgrade responses
 * no destructor: if it never gets to send the 101 (the client vanished
 * first), it never calls tunnel, and p is lost. So the sandbox is left
 * here, and tunnel holds it again: what may be lost is memory and a
 * socket, never an operation count that would keep the sandbox from
 * hibernating for good. */
static int answer_upgrade(struct req *r, struct proxy *p, const struct up_head *h)
{
	/* The workspace's WebSockets are capped (--max-tunnels): refused, the
	 * guest's half is closed with the request (proxy_done). */
	int full = req_tunnel_room(r);
	if (full >= 0)
		return full;
	const char *(*hdr)[2] = calloc((size_t)h->n + 3, sizeof *hdr);
	if (!hdr)
		return reply_error(r, 500, "internal", "out of memory");
	int k = 0;
	const char *upg = up_header(h, "Upgrade");
	hdr[k][0] = "Upgrade", hdr[k++][1] = upg ? upg : req_header(r, "Upgrade");
	hdr[k][0] = "Connection", hdr[k++][1] = "Upgrade";
	const char *gconn = up_header(h, "Connection");
	for (int i = 0; i < h->n; i++)
		if (up_answer_header_passes(gconn, h->h[i].name, h->h[i].value))
			hdr[k][0] = h->h[i].name, hdr[k++][1] = h->h[i].value;
	hostif_leave(p->api->hostif, &p->guest);
	r->proxy = NULL;
	int rc = reply_upgrade(r, (const char *const (*)[2])hdr, tunnel, p);
	free(hdr);
	return rc;
}

int h_proxy(struct req *r)
{
	struct proxy *p = r->proxy;
	struct up_head h;
	if (!p)
		return reply_error(r, 500, "internal", "proxy request without a guest connection");
	if (!p->err && p->chunked) {
		int rc = up_write(&p->up, "0\r\n\r\n", 5, PROXY_WAIT_MS);
		if (rc < 0) {
			p->err = rc;
			snprintf(p->errmsg, sizeof p->errmsg, "%s", errmsg());
		}
	}
	int rc = up_read_head(&p->up, p->head, PROXY_WAIT_MS, &h);
	if (rc < 0) {
		if (rc == -ECONNABORTED)
			return reply_abort(r);
		if (p->err)
			return reply_error(r, 502, "guest_error", "port %d of sandbox %s: %s", p->port, p->id,
					   p->errmsg);
		if (rc == -ETIMEDOUT)
			return reply_error(r, 504, "timeout", "port %d of sandbox %s: %s", p->port, p->id,
					   errmsg());
		return reply_error(r, 502, "guest_error", "port %d of sandbox %s: %s", p->port, p->id,
				   errmsg());
	}
	if (h.status == 101) {
		if (!p->upgrade) {
			up_head_free(&h);
			return reply_error(r, 502, "guest_error",
					   "port %d of sandbox %s switched protocols unasked", p->port, p->id);
		}
		rc = answer_upgrade(r, p, &h);
		up_head_free(&h);
		return rc;
	}
	const char *(*hdr)[2] = calloc((size_t)h.n + 3, sizeof *hdr);
	if (!hdr) {
		up_head_free(&h);
		return reply_error(r, 500, "internal", "out of memory");
	}
	int k = 0;
	const char *gconn = up_header(&h, "Connection");
	for (int i = 0; i < h.n; i++)
		if (up_answer_header_passes(gconn, h.h[i].name, h.h[i].value))
			hdr[k][0] = h.h[i].name, hdr[k++][1] = h.h[i].value;
	/* By path, the guest's pages share kilnd's origin with the dashboard:
	 * a sandboxed document gets an opaque origin of its own, so its
	 * scripts cannot call the API with the dashboard's session. (By host
	 * name, --domain, they are another origin already.) */
	if (r->route != &proxy_host_route)
		hdr[k][0] = "Content-Security-Policy", hdr[k++][1] = PROXY_PATH_CSP;
	if (p->set_cookie[0])
		hdr[k][0] = "Set-Cookie", hdr[k++][1] = p->set_cookie;
	uint64_t size = HTTP_SIZE_UNKNOWN;
	const char *cl = up_header(&h, "Content-Length");
	if (h.body == UP_BODY_LENGTH)
		size = h.length;
	else if (h.body == UP_BODY_NONE)
		size = p->head && cl ? strtoull(cl, NULL, 10) : 0;
	r->proxy = NULL;	/* the response owns it now */
	rc = reply_response(r, h.status, (const char *const (*)[2])hdr, size, body_read, body_done, p);
	free(hdr);
	up_head_free(&h);
	return rc;
}

static void proxy_done(struct req *r)
{
	proxy_free(r->proxy);
	r->proxy = NULL;
}

const struct route_hooks proxy_hooks = {
	.match_host = proxy_host_match,
	.admit = proxy_admit,
	.body = proxy_body,
	.done = proxy_done,
};
