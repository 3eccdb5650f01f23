/*
 * routes: the table of every HTTP route kilnd serves, and the matcher.
 * docs/api.md documents exactly these (`kilnd routes` prints the table;
 * tests/e2e/60-kilnd-docs.sh compares the two both ways).
 */
#ifndef KILN_API_ROUTES_H
#define KILN_API_ROUTES_H

#include <stdbool.h>
#include <stddef.h>

struct req;

enum body_kind {
	BODY_NONE,	/* a body is read and ignored, up to the JSON limit */
	BODY_JSON,	/* optional JSON object, up to max_json_bytes */
	BODY_FILE,	/* raw bytes, up to max_file_bytes, spooled to a file */
	BODY_RAW,	/* raw bytes in memory, up to max_json_bytes (MCP parses its own) */
	BODY_STREAM,	/* passed on as it arrives, no limit (the proxy) */
};

enum {
	ROUTE_PUBLIC = 1,	/* no API key needed */
	ROUTE_PROXY = 2,	/* to a sandbox's exposed port; its hooks authenticate */
	/* A key of scope "read" may call it: it changes nothing and opens no
	 * session that could (GETs but the PTY). The rest are refused to
	 * such keys with 403, and each call of them by a key is audited. */
	ROUTE_READ = 4,
	/* The operator's (/v1/admin): an operator credential, not a
	 * workspace's key (403) or session (401); see api/auth.h. */
	ROUTE_ADMIN = 8,
	/* The cluster's API calling this host agent (h_host.c): the key it
	 * was given at the join, nothing else; 404 on a kilnd that is not a
	 * joined agent. */
	ROUTE_HOST = 16,
};

typedef int handler_fn(struct req *r);

/* What a route does at the request's stages besides its handler, for
 * front ends that take the request over early (the port proxy): http.c
 * calls these, and so names no front end. Any may be NULL. */
struct route_hooks {
	/* For host_routes: does the request belong to this route whatever its
	 * path (by its Host header)? Sets the request's params when it does. */
	bool (*match_host)(struct req *r);
	/* The headers are in: the route checks who may itself, instead of
	 * the API key, rate and size checks. -1 to go on (the body follows),
	 * or the MHD result of an answer already sent. */
	int (*admit)(struct req *r);
	/* The caller is admitted (key, rate, declared size) and the body has
	 * not been read: checks that need no body (the sandbox exists, the
	 * query is valid), so that a request bound to fail is answered before
	 * a byte of its body is taken. -1 to go on, or the MHD result. */
	int (*before_body)(struct req *r);
	/* A piece of a BODY_STREAM body. */
	void (*body)(struct req *r, const char *data, size_t n);
	/* The request is over: free what admit attached to it. */
	void (*done)(struct req *r);
};

struct route {
	const char *method;
	const char *pattern;	/* segments; "{name}" captures one */
	handler_fn *fn;
	enum body_kind body;
	unsigned flags;
	const struct route_hooks *hooks;	/* or NULL */
};

extern const struct route routes[];
extern const size_t nroutes;

/* Routes chosen by the Host header, tried before the table: they match
 * no path (the exposed ports' PORT-ID.DOMAIN, src/proxy/proxy.c). */
extern const struct route proxy_host_route;
extern const struct route *const host_routes[];
extern const size_t nhost_routes;

/* The route for method and path. A "{path}" at the end of a pattern
 * captures the rest of the path, slashes included (possibly empty). Captured segments are copied (the caller
 * frees params[i]). NULL when none matches; *path_known then says whether
 * the path exists with another method (405 rather than 404). */
const struct route *route_match(const char *method, const char *path, char *params[],
				int maxparams, int *nparams, bool *path_known);

#endif
