/*
 * session: browser sessions of the dashboard (docs/dashboard.md).
 *
 * A browser never keeps an API key: POST /v1/session exchanges one for a
 * session, a random token in an HttpOnly, SameSite=Strict cookie (Secure
 * under TLS), and a CSRF token the page keeps in memory. Sessions live in
 * kilnd's memory only (a restart signs everyone out), end on logout, after
 * SESSION_IDLE_S without a request or SESSION_MAX_S in all, and with the
 * key they came from: a revoked key ends its sessions at their next
 * request.
 *
 * A request authenticated by the cookie (and not by an Authorization
 * header) must also come from the dashboard's own origin when it says
 * where it comes from (Origin), must say so on a WebSocket, and must carry
 * the CSRF token in X-CSRF-Token on every method but GET and HEAD.
 */
#ifndef KILN_API_SESSION_H
#define KILN_API_SESSION_H

#include <stdbool.h>

struct req;

#define SESSION_COOKIE "kiln_session"
#define SESSION_IDLE_S (2 * 3600)
#define SESSION_MAX_S  (12 * 3600)
#define SESSION_MAX    4096

/* Authenticate r (the Authorization header, else the session cookie):
 * 0 with r->workspace set; -EACCES with a message (401) for no or a bad
 * key or session; -EPERM with a message (403) for a cookie request that
 * lacks its CSRF token or comes from another origin; other -errno when the
 * store fails. */
int auth_http(struct req *r);

/* A Cookie header's value without kilnd's own cookies, every kiln_* one
 * (the session, preview links) (malloc'd; "" when nothing is left, NULL
 * when out of memory): what a sandbox's exposed port is sent. */
char *cookie_without_session(const char *value);

/* What a guest's pages served by path (/v1/sandboxes/ID/proxy/PORT/) are
 * confined by: scripts, forms and popups work, but in an opaque origin,
 * not kilnd's, so they cannot use a dashboard session. */
#define PROXY_PATH_CSP "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

/* Whether r came over TLS (directly, or by a proxy's X-Forwarded-Proto). */
bool req_is_tls(struct req *r);

#endif
