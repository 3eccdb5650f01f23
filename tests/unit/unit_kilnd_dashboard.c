/* Unit tests for the dashboard's server side: the session cookie kept
 * from guests, the routes it adds, the event hook's subscribers. */
#include "host/host_events.h"
#include "api/http.h"
#include "api/routes.h"
#include "api/session.h"
#include "api/event_log.h"
#include "hostif/hostif.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	struct host_event e = { .workspace = "ws_1", .id = "sbx_1", .state = "running", .cpu_seconds = 1.5,
				.rss_bytes = 4096 };
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

/* The event log (api/event_log.h) over host_events, as a cluster's API
 * has it: a host interface whose subscribe is host_events_subscribe and
 * that reads no records at start. */
static int t_subscribe(void *ctx, host_event_fn *fn, void *fctx)
{
	(void)ctx;
	return host_events_subscribe(fn, fctx);
}

static void t_unsubscribe(void *ctx, host_event_fn *fn, void *fctx)
{
	(void)ctx;
	host_events_unsubscribe(fn, fctx);
}

static const struct hostif_ops t_ops = { .name = "test", .subscribe = t_subscribe, .unsubscribe = t_unsubscribe };

static void save(const char *ws, const char *id, const char *state, const char *parent, const char *error)
{
	struct host_event e = { .workspace = ws, .id = id, .state = state, .rss_bytes = 4096, .parent = parent,
				.error = error, .ended = !strcmp(state, "deleted") ? "ttl" : "" };
	host_events_emit(&e);
}

/* The types told to a reader of ws (sandbox: "" for all), space-separated. */
static void read_all(struct event_log *l, struct event_cursor *c, const char *ws, const char *sbx, char *out,
		     size_t cap)
{
	struct event_rec e;
	out[0] = 0;
	size_t n = 0;
	while (event_log_next(l, c, ws, sbx, 0, &e) == 1)
		n += snprintf(out + n, n < cap ? cap - n : 0, "%s%s:%s", n ? " " : "", e.sandbox, e.type);
}

static void event_log_names_moves(void)
{
	struct hostif hi = { &t_ops, NULL };
	struct event_log *l = event_log_new(&hi);
	CHECK(l != NULL);
	struct event_cursor c, all;
	event_log_cursor(l, &c);
	event_log_cursor(l, &all);
	save("ws_a", "sbx_1", "creating", "", "");
	save("ws_a", "sbx_1", "running", "", "");
	save("ws_a", "sbx_1", "running", "", "");	/* a sample: usage, no move */
	save("ws_b", "sbx_9", "creating", "", "");	/* another workspace's */
	save("ws_a", "sbx_2", "creating", "sbx_1", "");	/* a fork's child */
	save("ws_a", "sbx_1", "paused", "", "");
	save("ws_a", "sbx_1", "running", "", "");
	save("ws_a", "sbx_1", "hibernated", "", "");
	save("ws_a", "sbx_1", "running", "", "");
	save("ws_a", "sbx_2", "failed", "sbx_1", "the VMM exited \"badly\"");
	save("ws_a", "sbx_3", "running", "", "");	/* never seen made: its state */
	save("ws_a", "sbx_1", "deleted", "", "");
	char got[1024];
	read_all(l, &c, "ws_a", "", got, sizeof got);
	const char *want = "sbx_1:created sbx_1:ready sbx_2:created sbx_1:forked sbx_1:paused sbx_1:resumed "
			   "sbx_1:hibernated sbx_1:woken sbx_2:failed sbx_3:running sbx_1:deleted sbx_1:usage";
	if (strcmp(got, want))
		printf("  got  %s\n  want %s\n", got, want);
	CHECK(!strcmp(got, want));
	/* One sandbox's reader; the failure's reason and the fork's child. */
	event_log_cursor(l, &c);
	uint64_t after;
	char id[48];
	event_log_id(l, 1, id, sizeof id);
	CHECK(event_log_resume(l, id, &after) == 0 && after == 1);
	c.life = after;
	c.usage = 1;	/* the one usage sample: already read */
	struct event_rec e;
	int found = 0;
	while (event_log_next(l, &c, "ws_a", "sbx_2", 0, &e) == 1) {
		found++;
		if (!strcmp(e.type, "failed"))
			CHECK(strstr(e.data, "\"error\":\"the VMM exited \\\"badly\\\"\"") != NULL);
	}
	CHECK(found == 2);
	/* Ids: another process's, malformed, in the future: outside. */
	CHECK(event_log_resume(l, "zz-1", &after) < 0);
	CHECK(event_log_resume(l, "", &after) < 0 && event_log_resume(l, NULL, &after) < 0);
	event_log_id(l, 999999, id, sizeof id);
	CHECK(event_log_resume(l, id, &after) < 0);
	/* Past the window: an early id is out, a reader that kept it is lost. */
	for (int i = 0; i < EVENT_LOG_KEEP + 10; i++)
		event_log_add(l, "ws_a", "sbx_4", "exec", "exec_started", ",\"exec\":1");
	event_log_id(l, 2, id, sizeof id);
	CHECK(event_log_resume(l, id, &after) < 0);
	all.life = 2;
	CHECK(event_log_next(l, &all, "ws_a", "", 0, &e) == -1 && all.lost);
	CHECK(event_log_next(l, &all, "ws_a", "", 0, &e) == 0);	/* from now on */
	/* An exec's start carries its own number first. */
	uint64_t n = event_log_add_numbered(l, "ws_a", "sbx_6", "exec", "exec_started", "exec", ",\"cmd\":\"x\"");
	char want_data[64];
	snprintf(want_data, sizeof want_data, ",\"exec\":%llu,\"cmd\":\"x\"", (unsigned long long)n);
	CHECK(event_log_next(l, &all, "ws_a", "sbx_6", 0, &e) == 1 && e.seq == n && !strcmp(e.data, want_data));
	event_log_free(l);
	host_events_emit(&(struct host_event){ .workspace = "ws_a", .id = "sbx_5", .state = "creating" });
}

/* Events older than the window expire; first_kept goes on from where it
 * stopped, and must neither lag (an expired id resumes) nor run ahead
 * (a kept event is called lost). The window is half a second here. */
static void event_log_expires(void)
{
	struct hostif hi = { &t_ops, NULL };
	struct event_log *l = event_log_new(&hi);
	CHECK(l != NULL);
	event_log_set_keep_ms(l, 500);
	struct event_cursor start, c;
	event_log_cursor(l, &start);
	uint64_t a[3], b[2], after;
	for (int i = 0; i < 3; i++)
		a[i] = event_log_add(l, "ws_a", "sbx_1", "exec", "exec_started", NULL);
	char id[48];
	struct event_rec e;
	event_log_id(l, a[0], id, sizeof id);
	CHECK(event_log_resume(l, id, &after) == 0 && after == a[0]);
	usleep(600 * 1000);	/* the a's expire */
	for (int i = 0; i < 2; i++)
		b[i] = event_log_add(l, "ws_a", "sbx_1", "exec", "exec_started", NULL);
	/* Asked again and again (each read moves first_kept): the same answers. */
	for (int i = 0; i < 3; i++) {
		/* After a[2] everything is kept; after a[1], a[2] is gone. */
		event_log_id(l, a[2], id, sizeof id);
		CHECK(event_log_resume(l, id, &after) == 0 && after == a[2]);
		event_log_id(l, a[1], id, sizeof id);
		CHECK(event_log_resume(l, id, &after) < 0);
		c = start, c.life = a[2];
		CHECK(event_log_next(l, &c, "ws_a", "", 0, &e) == 1 && e.seq == b[0] && !c.lost);
		c = start, c.life = a[1];
		CHECK(event_log_next(l, &c, "ws_a", "", 0, &e) == -1 && c.lost);
	}
	/* A reader that read b[0] and then waited too long missed b[1]. */
	c = start, c.life = b[0];
	usleep(600 * 1000);	/* all expire; none new */
	CHECK(event_log_next(l, &c, "ws_a", "", 0, &e) == -1 && c.lost);
	/* The newest id still resumes (nothing after it was missed); one
	 * before it does not; a reader from now waits for the next. */
	event_log_id(l, b[1], id, sizeof id);
	CHECK(event_log_resume(l, id, &after) == 0 && after == b[1]);
	event_log_id(l, b[0], id, sizeof id);
	CHECK(event_log_resume(l, id, &after) < 0);
	event_log_cursor(l, &c);
	CHECK(event_log_next(l, &c, "ws_a", "", 0, &e) == 0 && !c.lost);
	uint64_t n = event_log_add(l, "ws_a", "sbx_1", "exec", "exec_started", NULL);
	CHECK(event_log_next(l, &c, "ws_a", "", 0, &e) == 1 && e.seq == n);
	event_log_id(l, b[1], id, sizeof id);
	CHECK(event_log_resume(l, id, &after) == 0 && after == b[1]);
	event_log_free(l);
}

int main(void)
{
	int failures = 0;
	RUN(cookie_stripped);
	RUN(dashboard_routes);
	RUN(events_subscribers);
	RUN(event_log_names_moves);
	RUN(event_log_expires);
	return failures ? 1 : 0;
}
