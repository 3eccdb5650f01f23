/*
 * h_ports: exposed ports of a sandbox.
 *
 *   POST   /v1/sandboxes/{id}/ports          {"port":8080,"public":false}
 *   GET    /v1/sandboxes/{id}/ports
 *   DELETE /v1/sandboxes/{id}/ports/{port}
 *
 * An exposure is only a record (the store's ports table): requests reach
 * the guest through proxy.c, which reads it. Exposing does not need the
 * guest, so a hibernated sandbox stays asleep until a request comes.
 */
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "ops/validate.h"
#include "proxy/preview.h"
#include "proxy/proxy.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Where a client reaches the port: through this server's address as the
 * client named it (Host), and, with a domain, by host name. */
static json_t *port_json(struct req *r, const struct port_row *pr)
{
	char url[512], host_url[512];
	proxy_path_url(r, pr->sandbox, pr->port, "/", url, sizeof url);
	proxy_host_url(r, pr->sandbox, pr->port, "/", host_url, sizeof host_url);
	return json_pack("{s:i,s:b,s:s,s:s?,s:o}", "port", pr->port, "public", pr->public, "url", url,
			 "host_url", host_url[0] ? host_url : NULL, "created_at",
			 render_time(pr->created_ms));
}

struct list_ctx {
	json_t *a;
	struct req *r;
};

static int list_port(void *ctx, const struct port_row *pr)
{
	struct list_ctx *c = ctx;
	if (json_array_append_new(c->a, port_json(c->r, pr)) < 0)
		return errf(ENOMEM, "out of memory");
	return 0;
}

/* The path's sandbox is the caller's (else a 404 was sent). Exposures
 * need nothing more of it: the guest is not involved. */
static bool caller_owns(struct req *r, int *answered)
{
	return req_sandbox(r, NULL, answered) == 0;
}

int port_expose(struct req *r, const char *sandbox, int port, bool public, bool *existed, json_t **out)
{
	/* Counted and added in one transaction: two replicas cannot both
	 * add the last port allowed. */
	struct port_row pr = { .port = port, .public = public, .created_ms = wall_ms() };
	snprintf(pr.sandbox, sizeof pr.sandbox, "%s", sandbox);
	snprintf(pr.workspace, sizeof pr.workspace, "%s", r->workspace);
	int rc = store_port_add(r->api->store, &pr, PORTS_MAX, existed);
	if (rc == -ENOSPC)
		return errf(ENOSPC, "sandbox %s already exposes %d ports, the most it may", sandbox, PORTS_MAX);
	rc = rc ?: store_port_load(r->api->store, pr.sandbox, pr.port, &pr);
	if (rc < 0)
		return rc;
	*out = port_json(r, &pr);
	return *out ? 0 : errf(ENOMEM, "out of memory");
}

int h_port_expose(struct req *r)
{
	static const char *const keys[] = { "port", "public", NULL };
	int64_t port = 0;
	bool public = false;
	int rc = v_known_keys(r->json, keys);
	rc = rc ?: v_int(r->json, "port", true, 1, 65535, &port);
	rc = rc ?: v_bool(r->json, "public", &public);
	if (rc < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	int answered;
	if (!caller_owns(r, &answered))
		return answered;
	bool existed = false;
	json_t *j;
	rc = port_expose(r, r->params[0], (int)port, public, &existed, &j);
	if (rc == -ENOSPC)
		return reply_error(r, 409, "conflict", "%s", errmsg());
	return rc < 0 ? reply_errno(r, rc) : reply_json(r, existed ? 200 : 201, j);
}

int port_list(struct req *r, const char *sandbox, json_t **out)
{
	struct list_ctx c = { .a = json_array(), .r = r };
	int rc = c.a ? store_port_each(r->api->store, sandbox, list_port, &c) : errf(ENOMEM, "out of memory");
	*out = rc < 0 ? NULL : json_pack("{s:o}", "ports", c.a);
	if (rc < 0)
		json_decref(c.a);
	return rc;
}

int h_port_list(struct req *r)
{
	int answered;
	json_t *j;
	if (!caller_owns(r, &answered))
		return answered;
	int rc = port_list(r, r->params[0], &j);
	return rc < 0 ? reply_errno(r, rc) : reply_json(r, 200, j);
}

int h_port_delete(struct req *r)
{
	int answered;
	if (!caller_owns(r, &answered))
		return answered;
	int port = v_port(r->params[1]);
	if (!port)
		return reply_error(r, 400, "invalid_request", "'%.20s' is not a TCP port (1 to 65535)",
				   r->params[1]);
	int rc = store_port_delete(r->api->store, r->params[0], port);
	if (rc < 0)
		return reply_errno(r, rc);
	return reply_empty(r, 204);
}

#define PREVIEW_TTL_DEFAULT 3600
#define PREVIEW_TTL_MAX (7 * 24 * 3600)

/* POST .../ports/{port}/preview {"ttl_seconds":3600}: a link into an
 * exposed (private or public) port that needs no key until it expires. */
int h_port_preview(struct req *r)
{
	static const char *const keys[] = { "ttl_seconds", NULL };
	int64_t ttl = PREVIEW_TTL_DEFAULT;
	const json_t *body = r->json ? r->json : NULL;
	int rc = body ? v_known_keys(body, keys) : 0;
	if (rc == 0 && body && json_object_get(body, "ttl_seconds"))
		rc = v_int(body, "ttl_seconds", true, 60, PREVIEW_TTL_MAX, &ttl);
	int port = v_port(r->params[1]);
	if (rc == 0 && !port)
		rc = errf(EINVAL, "'%.20s' is not a TCP port (1 to 65535)", r->params[1]);
	if (rc < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	int answered;
	if (!caller_owns(r, &answered))
		return answered;
	struct port_row pr;
	rc = store_port_load(r->api->store, r->params[0], port, &pr);
	if (rc == -ENOENT)
		return reply_error(r, 404, "not_found", "port %d of sandbox %s is not exposed (POST .../ports first)",
				   port, r->params[0]);
	if (rc < 0)
		return reply_errno(r, rc);
	int64_t expiry = wall_ms() / 1000 + ttl;
	char token[PREVIEW_TOKEN_MAX], q[PREVIEW_TOKEN_MAX + 32], url[700], host_url[700];
	preview_token(r->api->preview_key, pr.sandbox, port, expiry, token);
	snprintf(q, sizeof q, "/?" PREVIEW_PARAM "=%s", token);
	proxy_path_url(r, pr.sandbox, port, q, url, sizeof url);
	proxy_host_url(r, pr.sandbox, port, q, host_url, sizeof host_url);
	return reply_json(r, 201, json_pack("{s:i,s:s,s:s?,s:o,s:I}", "port", port, "url", url, "host_url",
					    host_url[0] ? host_url : NULL, "expires_at", render_time(expiry * 1000),
					    "ttl_seconds", (json_int_t)ttl));
}
