/*
 * h_apps: apps (docs/api.md "Apps", ops/app.h), turned into HTTP.
 *
 *   POST   /v1/apps                 deploy one (or make a running sandbox one)
 *   GET    /v1/apps                 the workspace's
 *   GET    /v1/apps/{app}           by id or name
 *   DELETE /v1/apps/{app}
 *   POST   /v1/apps/{app}/deploy    a new version, switched to once ready
 *   GET    /v1/apps/{app}/logs      ?tail=N&follow=true
 *
 * An app is served on its own origin (APP.DOMAIN), never under this API's,
 * so a server without --domain refuses to make one.
 */
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "api/sse.h"
#include "host/guest_conn.h"
#include "ops/app.h"
#include "proxy/proxy.h"
#include "common/err.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAIL_DEFAULT 100
#define LINE_MAX_BYTES 8192
#define KEEPALIVE_MS 15000
#define POLL_MS 250

/* The app as JSON, with its URL and the API's times. */
static json_t *app_json(struct req *r, const struct ops_caller *c, const struct app_row *a)
{
	char url[400];
	proxy_app_url(r, a->id, url, sizeof url);
	return render_app(c, a, url);
}

static int reply_app(struct req *r, const struct ops_caller *c, int rc, const struct app_row *a, int status)
{
	if (rc < 0)
		return reply_errno(r, rc);
	json_t *j = app_json(r, c, a);
	return j ? reply_json(r, status, j) : reply_error(r, 500, "internal", "out of memory");
}

/* A row is 21 KiB: on the heap, not the MHD thread's stack. */
static struct app_row *row_new(struct req *r, int *answered)
{
	struct app_row *a = malloc(sizeof *a);
	if (!a)
		*answered = reply_error(r, 500, "internal", "out of memory");
	return a;
}

int h_app_create(struct req *r)
{
	if (!r->api->cfg->domain[0])
		return reply_error(r, 400, "invalid_request", "%s", APP_NO_DOMAIN);
	struct ops_caller c;
	struct ops_quota q;
	req_caller_quota(r, &c, &q);
	int answered;
	struct app_row *a = row_new(r, &answered);
	if (!a)
		return answered;
	int rc = ops_app_create(&c, r->json, a);
	answered = rc == -EDQUOT ? reply_limit(r, &q) : reply_app(r, &c, rc, a, 201);
	free(a);
	return answered;
}

struct list_ctx {
	struct req *r;
	const struct ops_caller *c;
	json_t *a;
};

static int list_one(void *ctx, const struct app_row *a)
{
	struct list_ctx *l = ctx;
	json_t *j = app_json(l->r, l->c, a);
	return j && json_array_append_new(l->a, j) == 0 ? 0 : errf(ENOMEM, "out of memory");
}

int h_app_list(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	struct list_ctx l = { r, &c, json_array() };
	if (!l.a)
		return reply_error(r, 500, "internal", "out of memory");
	int rc = store_app_each(r->api->store, r->workspace, list_one, &l);
	if (rc < 0) {
		json_decref(l.a);
		return reply_errno(r, rc);
	}
	return reply_json(r, 200, json_pack("{s:o}", "apps", l.a));
}

int h_app_get(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	int answered;
	struct app_row *a = row_new(r, &answered);
	if (!a)
		return answered;
	answered = reply_app(r, &c, ops_app_get(&c, r->params[0], a), a, 200);
	free(a);
	return answered;
}

int h_app_delete(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	int rc = ops_app_delete(&c, r->params[0]);
	return rc < 0 ? reply_errno(r, rc) : reply_empty(r, 204);
}

int h_app_deploy(struct req *r)
{
	struct ops_caller c;
	struct ops_quota q;
	req_caller_quota(r, &c, &q);
	int answered;
	struct app_row *a = row_new(r, &answered);
	if (!a)
		return answered;
	int rc = ops_app_deploy(&c, r->params[0], r->json, a);
	answered = rc == -EDQUOT ? reply_limit(r, &q) : reply_app(r, &c, rc, a, 200);
	free(a);
	return answered;
}

/* ---- logs ------------------------------------------------------------------------------ */

static int add_event(void *ctx, int64_t ts_ms, const char *text)
{
	return json_array_append_new(ctx, json_pack("{s:o,s:s}", "at", render_time(ts_ms), "text", text));
}

static void lines_of(json_t *a, const char *p, size_t n)
{
	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t len = nl ? (size_t)(nl - p) : n;
		json_array_append_new(a, render_text(p, len < LINE_MAX_BYTES ? len : LINE_MAX_BYTES));
		p += len + (nl != NULL);
		n -= len + (nl != NULL);
	}
}

struct follow {
	struct api *api;
	struct hostif_guest hg;
	int sock;
	struct sse_out out;
	char part[LINE_MAX_BYTES];
	size_t npart;
	bool done;
	int quiet_ms;
};

static void flush_line(struct follow *f)
{
	sse_event(&f->out, "line", json_pack("{s:o}", "text", render_text(f->part, f->npart)));
	f->npart = 0;
}

static long follow_read(void *ctx, char *buf, size_t max)
{
	struct follow *f = ctx;
	while (sse_drained(&f->out)) {
		if (f->done)
			return HTTP_STREAM_END;
		struct guest_ev ev;
		int rc = guest_exec_next(f->hg.g, &ev, f->sock, POLL_MS);
		if (rc == -ECONNABORTED)
			return HTTP_STREAM_END;	/* the client went */
		if (rc < 0 || (rc == 1 && ev.kind == GEV_EXIT)) {
			if (f->npart)
				flush_line(f);
			sse_event(&f->out, "end", json_pack("{s:s}", "reason", rc < 0 ? errmsg() :
							    "the app's sandbox stopped sending its log"));
			f->done = true;
			continue;
		}
		if (rc == 0) {
			f->quiet_ms += POLL_MS;
			if (f->quiet_ms >= KEEPALIVE_MS) {
				sse_comment(&f->out, "keepalive");
				f->quiet_ms = 0;
			}
			continue;
		}
		f->quiet_ms = 0;
		if (ev.kind != GEV_STDOUT)
			continue;
		for (size_t i = 0; i < ev.len; i++) {
			if (ev.data[i] == '\n')
				flush_line(f);
			else if (f->npart < sizeof f->part)
				f->part[f->npart++] = (char)ev.data[i];
		}
	}
	return sse_take(&f->out, buf, max);
}

static void follow_done(void *ctx)
{
	struct follow *f = ctx;
	hostif_leave(f->api->hostif, &f->hg);
	sse_free(&f->out);
	free(f);
}

/* Follow: the kept events, then the last `tail` lines of its log as GET
 * answers them (those of its earlier sandboxes the current one's leave
 * room for, then the current one's: `tail -F` of the app's log in its
 * sandbox), then its new lines as they come, as "line" events, until the
 * client goes. A follower is activity: the
 * app is not hibernated while someone watches it. */
static int follow(struct req *r, const struct app_row *a, long tail, json_t *events)
{
	struct follow *f = calloc(1, sizeof *f);
	if (!f) {
		json_decref(events);
		return reply_error(r, 500, "internal", "out of memory");
	}
	f->api = r->api;
	f->sock = req_socket(r);
	sse_init(&f->out);
	struct ops_caller c;
	req_caller(r, &c);
	/* The current sandbox's lines counted before its tail starts: the
	 * earlier sandboxes' fill the rest of `tail` (a line written in
	 * between makes the start one longer, never repeated). */
	int current = 0;
	int rc = a->sandbox[0] ? ops_app_log_current(&c, a, (int)tail, &current)
			       : errf(EHOSTDOWN, "app %s has no sandbox now", a->id);
	rc = rc ?: hostif_enter(r->api->hostif, a->workspace, a->sandbox, &f->hg);
	char n[16];
	snprintf(n, sizeof n, "%ld", tail);
	const char *const argv[] = { "tail", "-n", n, "-F", APP_LOG, NULL };
	struct guest_cmd cmd = { .argv = argv };
	if (rc == 0 && (rc = guest_exec_start(f->hg.g, &cmd)) < 0)
		hostif_leave(r->api->hostif, &f->hg);
	if (rc < 0) {
		sse_free(&f->out);
		free(f);
		json_decref(events);
		return reply_errno(r, rc);
	}
	size_t i;
	json_t *e;
	json_array_foreach(events, i, e)
		sse_event(&f->out, "event", json_incref(e));
	json_decref(events);
	char *earlier = NULL;
	size_t ne = 0;
	if (tail > current && ops_app_log_earlier(&c, a, (int)tail - current, &earlier, &ne) == 0) {
		json_t *lines = json_array();
		if (lines)
			lines_of(lines, earlier, ne);
		json_array_foreach(lines, i, e)
			sse_event(&f->out, "line", json_pack("{s:O}", "text", e));
		json_decref(lines);
	}
	free(earlier);
	return reply_stream(r, 200, "text/event-stream", follow_read, follow_done, f);
}

int h_app_logs(struct req *r)
{
	struct logq q;
	if (req_log_query(r, TAIL_DEFAULT, &q) < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct ops_caller c;
	req_caller(r, &c);
	int answered;
	struct app_row *a = row_new(r, &answered);
	if (!a)
		return answered;
	json_t *events = json_array();
	int rc = events ? ops_app_get(&c, r->params[0], a) : errf(ENOMEM, "out of memory");
	rc = rc ?: store_app_events(r->api->store, a->id, add_event, events);
	if (rc == 0 && q.follow) {
		answered = follow(r, a, q.tail, events);
		free(a);
		return answered;
	}
	char *text = NULL;
	size_t n = 0;
	rc = rc ?: ops_app_log_tail(&c, a, (int)q.tail, &text, &n);
	json_t *lines = rc == 0 ? json_array() : NULL;
	if (lines)
		lines_of(lines, text, n);
	free(text);
	free(a);
	if (rc < 0) {
		json_decref(events);
		return reply_errno(r, rc);
	}
	return reply_json(r, 200, json_pack("{s:o,s:o}", "events", events, "lines", lines));
}
