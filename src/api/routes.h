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
	ROUTE_PROXY = 2,	/* to a sandbox's exposed port; proxy.c authenticates */
};

typedef int handler_fn(struct req *r);

struct route {
	const char *method;
	const char *pattern;	/* segments; "{name}" captures one */
	handler_fn *fn;
	enum body_kind body;
	unsigned flags;
};

extern const struct route routes[];
extern const size_t nroutes;

/* The route of requests that a Host header sends to an exposed port
 * (proxy.c); it is not in the table, as it matches no path. */
extern const struct route proxy_host_route;

/* The route for method and path. A "{path}" at the end of a pattern
 * captures the rest of the path, slashes included (possibly empty). Captured segments are copied (the caller
 * frees params[i]). NULL when none matches; *path_known then says whether
 * the path exists with another method (405 rather than 404). */
const struct route *route_match(const char *method, const char *path, char *params[],
				int maxparams, int *nparams, bool *path_known);

#endif
