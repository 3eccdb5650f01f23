/*
 * proxy: HTTP requests to a port a sandbox exposed (POST .../ports), by
 * path, /v1/sandboxes/{id}/proxy/{port}/{path}, or, with --domain, by
 * Host, {port}-{id}.{domain}. Each request gets its own connection to the
 * guest port, made by the guest agent (CONNECT over vsock, so the guest's
 * network plays no part), and is forwarded as HTTP/1.1 with the path prefix
 * cut, hop-by-hop headers dropped and X-Forwarded-* added; bodies stream
 * both ways. A WebSocket (any Upgrade the guest accepts with 101) becomes
 * a byte tunnel.
 *
 * Who may: anyone for a public port; otherwise an API key of the
 * sandbox's workspace (401 without a valid key, 404 with another
 * workspace's). A kiln key (Bearer kiln_..., valid or not) is never
 * passed to the guest; nor do headers the guest names in its Connection
 * header, or cookies it sets with a Domain or under kilnd's kiln_ names,
 * reach the client (up_answer_header_passes).
 *
 * The hooks below are called by http.c at the request's stages; h_proxy
 * (handlers.h) answers once the request body has been passed on.
 */
#ifndef KILN_PROXY_PROXY_H
#define KILN_PROXY_PROXY_H

#include <stdbool.h>
#include <stddef.h>

struct proxy;
struct req;
struct route_hooks;

/* The hooks of the proxy's routes (src/api/routes.c): the functions below. */
extern const struct route_hooks proxy_hooks;

/* With a domain configured, does the Host header name PORT-ID.DOMAIN
 * (ID may be written with '-' for '_', as DNS names want)? Sets the
 * request's params (id, port, path) when it does. */
bool proxy_host_match(struct req *r);
/* Where a client reaches port of sandbox id, then path (which starts with
 * '/'): through this server's address as the client named it (Host), and
 * with --domain by host name, PORT-ID.DOMAIN with the client's port kept
 * (out is "" without a domain). */
void proxy_path_url(struct req *r, const char *id, int port, const char *path, char *out, size_t len);
void proxy_host_url(struct req *r, const char *id, int port, const char *path, char *out, size_t len);
/* An app's URL, "SCHEME://app-RAND.DOMAIN[:PORT]/" (ops/app.h), or ""
 * without --domain: apps are served on their own origin only. */
void proxy_app_url(struct req *r, const char *app_id, char *out, size_t len);
/* The headers are in: check who may, reach the guest port and send the
 * request head. -1 to go on (the body follows), or the MHD result of an
 * answer already sent. */
int proxy_admit(struct req *r);
/* A piece of the request body. */
void proxy_body(struct req *r, const char *data, size_t n);
void proxy_free(struct proxy *p);

#endif
