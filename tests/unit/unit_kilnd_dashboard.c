/* Unit tests for the dashboard's server side: the session cookie kept
 * from guests, the routes it adds, the event hook's subscribers. */
#include "host/host_events.h"
#include "api/http.h"
#include "api/routes.h"
#include "api/session.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

static void cookie_stripped(void)
{
	static const char *const cases[][2] = {
		{ "kiln_session=abc", "" },
		{ "a=1; kiln_session=abc; b=2", "a=1; b=2" },
		{ "kiln_session=abc;b=2", "b=2" },
		{ "a=1;kiln_session=x", "a=1" },
		{ "kiln_sessionx=1; a=2", "a=2" },	/* every kiln_ name is kilnd's */
		{ "kiln_preview=9.x; app=1", "app=1" },	/* a preview link's */
		{ "xkiln_session=1", "xkiln_session=1" },
		{ "", "" },
		{ "a=1; kiln_session=1; kiln_session=2", "a=1" },	/* every copy */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *out = cookie_without_session(cases[i][0]);
		CHECK(out && !strcmp(out, cases[i][1]));
		if (out && strcmp(out, cases[i][1]))
			printf("  '%s' -> '%s', want '%s'\n", cases[i][0], out, cases[i][1]);
		free(out);
	}
}

static void dashboard_routes(void)
{
	char *p[MAX_PATH_PARAMS];
	int n;
	bool known;
	const struct route *r = route_match("GET", "/dashboard/", p, MAX_PATH_PARAMS, &n, &known);
	CHECK(r && (r->flags & ROUTE_PUBLIC) && n == 1 && !strcmp(p[0], ""));
	while (n > 0)
		free(p[--n]);
	r = route_match("GET", "/dashboard/app-X.js", p, MAX_PATH_PARAMS, &n, &known);
	CHECK(r && n == 1 && !strcmp(p[0], "app-X.js"));
	while (n > 0)
		free(p[--n]);
	r = route_match("POST", "/v1/session", p, MAX_PATH_PARAMS, &n, &known);
	CHECK(r && (r->flags & ROUTE_PUBLIC));
	/* Only the sign-in itself is public: the rest needs a key or a session. */
	r = route_match("DELETE", "/v1/session", p, MAX_PATH_PARAMS, &n, &known);
	CHECK(r && !(r->flags & ROUTE_PUBLIC));
	r = route_match("GET", "/v1/events", p, MAX_PATH_PARAMS, &n, &known);
	CHECK(r && !(r->flags & ROUTE_PUBLIC));
	r = route_match("DELETE", "/v1/keys/key_x", p, MAX_PATH_PARAMS, &n, &known);
	CHECK(r && !(r->flags & ROUTE_PUBLIC) && n == 1);
	while (n > 0)
		free(p[--n]);
}

static int calls;
static char last[64];
static void on_ev(void *ctx, const struct host_event *e)
{
	(void)ctx;
	calls++;
	snprintf(last, sizeof last, "%s %s %s %.1f %lld", e->workspace, e->id, e->state, e->cpu_seconds,
		 (long long)e->rss_bytes);
}

static void events_subscribers(void)
{
	int a, b;
	CHECK(host_events_subscribe(on_ev, &a) == 0 && host_events_subscribe(on_ev, &b) == 0);
	struct host_event e = { "ws_1", "sbx_1", "running", 1.5, 4096 };
	host_events_emit(&e);
	CHECK(calls == 2 && !strcmp(last, "ws_1 sbx_1 running 1.5 4096"));
	host_events_unsubscribe(on_ev, &a);
	e.state = "deleted";
	host_events_emit(&e);
	CHECK(calls == 3);
	host_events_unsubscribe(on_ev, &b);
	host_events_emit(&e);
	CHECK(calls == 3);
}

int main(void)
{
	int failures = 0;
	RUN(cookie_stripped);
	RUN(dashboard_routes);
	RUN(events_subscribers);
	return failures ? 1 : 0;
}
