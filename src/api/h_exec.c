/*
 * h_exec: run a command in a sandbox, either to completion (one JSON
 * answer with the output) or streamed as Server-Sent Events:
 *
 *   event: stdout   data: {"data":"text"}  or {"data_b64":"..."} when the
 *   event: stderr         chunk is not valid UTF-8 (bytes are never lost)
 *   event: exit     data: {"stdout":"","stderr":"","exit_code":0,"signal":null,
 *                          "timed_out":false,"duration_ms":12.5,"truncated":false}
 *   event: error    data: {"code":"...","message":"..."}
 *
 * The command runs while the request does: if the client goes away, the
 * agent connection closes and the agent kills the command's process group.
 */
#include "host/guest_conn.h"
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/event_log.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/inflight.h"
#include "api/render.h"
#include "api/sse.h"
#include "ops/fields.h"
#include "ops/ops.h"
#include "ops/validate.h"
#include "common/strbuf.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ARGV_MAX 4096

int exec_parse(struct req *r, struct exec_req *e)
{
	return exec_parse_json(r->json, r->api->cfg->max_json_bytes, e);
}

const struct field exec_fields[] = {
	{ .name = "cmd", .type = FIELD_STRING, .max = EXEC_CMD_MAX,
	  .description = "A shell command (/bin/sh -c); or argv." },
	{ .name = "argv", .type = FIELD_STRINGS, .min = 1, .max = ARGV_MAX, .item_max = 128 * 1024,
	  .description = "A program and its arguments, instead of cmd." },
	{ .name = "env", .type = FIELD_MAP, .env_names = true, .max = 1024, .key_max = 128, .item_max = 64 * 1024,
	  .description = "Environment over the sandbox's." },
	{ .name = "cwd", .type = FIELD_STRING, .max = 4095, .description = "Its working directory (absolute)." },
	{ .name = "user", .type = FIELD_STRING, .max = 64,
	  .description = "A user name, uid or uid:gid (default root)." },
	{ .name = "timeout_seconds", .type = FIELD_INTEGER, .min = 0, .max = EXEC_TIMEOUT_MAX,
	  .description = "Kill it after this long (default 0: never)." },
	{ .type = FIELD_END }
};

/* REST's body: the same and stdin, bounded by the server's body size. */
static const struct field exec_body_fields[] = {
	{ .type = FIELD_INCLUDE, .items = exec_fields },
	{ .name = "stdin", .type = FIELD_STRING },
	{ .type = FIELD_END }
};

int exec_parse_json(const json_t *body, size_t stdin_max, struct exec_req *e)
{
	const struct field *argv = fields_find(exec_fields, "argv");
	memset(e, 0, sizeof *e);
	int rc = fields_check(exec_body_fields, body, NULL);
	rc = rc ?: v_str_array(body, "argv", (size_t)argv->max, (size_t)argv->item_max, &e->argv);
	rc = rc ?: v_str(body, "stdin", false, stdin_max, &e->stdin_text);
	if (rc == 0) {
		e->cmd = field_str(body, "cmd", NULL);
		e->env = field_get(body, "env");
		e->cwd = field_str(body, "cwd", NULL);
		e->user = field_str(body, "user", NULL);
		e->timeout_s = field_int(body, "timeout_seconds", 0);
	}
	if (rc == 0 && !!e->cmd == !!e->argv)
		rc = errf(EINVAL, "give exactly one of 'cmd' (a shell command) and 'argv'");
	if (rc == 0 && e->cmd && !e->cmd[0])
		rc = errf(EINVAL, "field 'cmd' is empty");
	if (rc == 0 && e->cwd && e->cwd[0] != '/')
		rc = errf(EINVAL, "field 'cwd' must be an absolute path");
	if (rc == 0 && e->user && (!e->user[0] || strpbrk(e->user, " \t\n/")))
		rc = errf(EINVAL, "field 'user' must be a user name, a uid or uid:gid");
	if (rc < 0) {
		free(e->argv);
		e->argv = NULL;
	}
	return rc;
}

/* The command as the event stream shows it: its first EVENT_CMD_MAX
 * bytes (whole UTF-8 characters), argv joined by spaces. */
#define EVENT_CMD_MAX 200

static void exec_started_event(struct api *api, const char *ws, const char *id, struct exec_req *e)
{
	e->event = 0;
	if (!api->events)
		return;
	char cmd[EVENT_CMD_MAX + 1];
	size_t n = 0;
	if (e->cmd) {
		n = strlen(e->cmd);
		n = n > EVENT_CMD_MAX ? EVENT_CMD_MAX : n;
		memcpy(cmd, e->cmd, n);
	} else {
		for (int i = 0; e->argv[i] && n < EVENT_CMD_MAX; i++) {
			size_t k = strlen(e->argv[i]);
			if (i && n < EVENT_CMD_MAX)
				cmd[n++] = ' ';
			k = k > EVENT_CMD_MAX - n ? EVENT_CMD_MAX - n : k;
			memcpy(cmd + n, e->argv[i], k);
			n += k;
		}
	}
	while (n > 0 && !utf8_valid(cmd, n))
		n--;	/* a character cut at the end (or bytes not UTF-8: less) */
	cmd[n] = 0;
	json_t *o = json_pack("{s:s,s:b}", "cmd", cmd, "background", e->background);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (s && strlen(s) > 2 && strlen(s) < EVENT_DATA_MAX - 32) {
		s[0] = ',';
		s[strlen(s) - 1] = 0;
		e->event = event_log_add_numbered(api->events, ws, id, "exec",
						  "exec_started", "exec", s);
	}
	free(s);
}

int exec_launch(struct api *api, const char *ws, const char *id, struct guest *g, char **env,
		struct exec_req *e)
{
	struct guest_cmd cmd = {
		.argv = e->argv,
		.shell = e->cmd,
		.env = (const char *const *)env,
		.cwd = e->cwd,
		.user = e->user,
		.timeout_ms = (uint32_t)(e->timeout_s * 1000),
		.stdin_pipe = e->stdin_text != NULL || e->stdin_open,
		.background = e->background,
	};
	int rc = guest_exec_start(g, &cmd);
	e->id = cmd.id;
	e->pid = cmd.pid;
	if (rc == 0 && e->stdin_text) {
		rc = guest_exec_stdin(g, e->stdin_text, strlen(e->stdin_text));
		if (rc == 0)
			rc = guest_exec_eof(g);
	}
	if (rc == 0)
		exec_started_event(api, ws, id, e);
	return rc;
}

int exec_start(struct req *r, struct exec_req *e, struct hostif_guest *hg, int *answered)
{
	struct sbx_row row;
	if (req_sandbox(r, &row, answered) < 0)
		return -1;
	char **env = ops_env_merge(row.env, e->env);
	sbx_row_clear(&row);
	if (!env) {
		*answered = reply_error(r, 500, "internal", "out of memory");
		return -1;
	}
	int rc = hostif_enter(r->api->hostif, r->workspace, req_sandbox_id(r), hg);
	if (rc < 0) {
		free(env);
		*answered = reply_errno(r, rc);
		return -1;
	}
	rc = exec_launch(r->api, r->workspace, req_sandbox_id(r), hg->g, env, e);
	free(env);
	if (rc < 0) {
		int status;
		const char *code;
		/* The agent refusing to start it (no such program, bad cwd) is the
		 * request's fault; a broken connection is not. */
		if (rc == -ECONNRESET || rc == -EPIPE || rc == -EPROTO || rc == -ETIMEDOUT)
			status = errno_status(rc, &code);
		else
			status = 400, code = "invalid_request";
		*answered = reply_error(r, status, code, "%s", errmsg());
		req_guest_leave(r, hg);
		return -1;
	}
	return 0;
}

void exec_ended_event(struct api *api, const char *ws, const char *id, uint64_t event, int code, int sig,
		      double ms)
{
	if (!api->events || !event)
		return;
	char d[160];
	snprintf(d, sizeof d, ",\"exec\":%llu,\"exit_code\":%d%s%.0d,\"duration_ms\":%.1f", (unsigned long long)event,
		 code, sig ? ",\"signal\":" : "", sig, ms);
	event_log_add(api->events, ws, id, "exec", "exec_ended", d);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}


/* ---- to completion ---------------------------------------------------------------- */

struct out {
	struct strbuf b;
	bool truncated;
};

struct outputs {
	struct req *r;
	struct out out, err;
	uint64_t max;
	long long held;
};

/* Output is kept up to max per stream and, across the workspace's execs
 * under way, up to --max-exec-buffer in all (the rest is dropped and the
 * result says truncated): held is this request's part of that. */
static int take(void *ctx, const struct guest_ev *ev)
{
	struct outputs *t = ctx;
	struct out *o = ev->kind == GEV_STDOUT ? &t->out : &t->err;
	size_t room = o->b.len < t->max ? t->max - o->b.len : 0;
	size_t n = ev->len < room ? ev->len : room;
	bool counted;
	long long got = inflight_take(t->r->api->exec_buffer, t->r->workspace, (long long)n, &counted);
	if (counted)
		t->held += got;
	n = (size_t)got;
	strbuf_append(&o->b, ev->data, n);
	if (n < ev->len)
		o->truncated = true;
	return 0;
}

int h_exec(struct req *r)
{
	struct exec_req e;
	if (exec_parse(r, &e) < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	double t0 = now_ms();
	struct hostif_guest hg;
	int answered;
	if (exec_start(r, &e, &hg, &answered) < 0) {
		free(e.argv);
		return answered;
	}
	free(e.argv);
	struct outputs t = { .r = r, .max = r->api->cfg->max_exec_output };
	struct out *out = &t.out, *err = &t.err;
	strbuf_init(&out->b);
	strbuf_init(&err->b);
	struct guest_ev ev;
	int rc = guest_exec_wait(hg.g, take, &t, req_socket(r), -1, &ev);
	double ms = now_ms() - t0;
	if (rc >= 0)
		exec_ended_event(r->api, r->workspace, req_sandbox_id(r), e.event, ev.code, ev.signal, ms);
	int result;
	if (rc < 0) {
		result = reply_errno(r, rc);
	} else if (strbuf_failed(&out->b) || strbuf_failed(&err->b)) {
		result = reply_error(r, 503, "no_capacity", "out of memory holding the output");
	} else {
		result = reply_json(r, 200, render_exec_result(out->b.data, out->b.len, err->b.data, err->b.len,
							       ev.code, ev.signal, ev.timed_out, ms,
							       out->truncated || err->truncated));
	}
	strbuf_free(&out->b);
	strbuf_free(&err->b);
	inflight_give(r->api->exec_buffer, r->workspace, t.held);
	req_guest_leave(r, &hg);
	return result;
}

/* ---- streamed -------------------------------------------------------------------------- */

struct stream {
	struct api *api;
	struct hostif_guest hg;		/* the command's: hg.g */
	int sock;			/* the client's: its hangup ends the command */
	struct sse_out out;		/* formatted, not yet handed to MHD */
	bool done;
	double t0;
	uint64_t event;			/* its exec_started event */
};

static void stream_chunk(struct stream *s, const struct guest_ev *ev)
{
	sse_event(&s->out, ev->kind == GEV_STDOUT ? "stdout" : "stderr", render_chunk(ev->data, ev->len));
}

static long stream_read(void *ctx, char *buf, size_t max)
{
	struct stream *s = ctx;
	while (sse_drained(&s->out)) {
		if (s->done)
			return HTTP_STREAM_END;
		struct guest_ev ev;
		/* Wake every 15 s with a comment, so proxies keep the stream; a
		 * client that hangs up is noticed at once (its socket), and the
		 * command killed. */
		int rc = guest_exec_next(s->hg.g, &ev, s->sock, 15000);
		if (rc == 0) {
			sse_comment(&s->out, "keepalive");
		} else if (rc < 0) {
			const char *code;
			errno_status(rc, &code);
			sse_event(&s->out, "error", json_pack("{s:s,s:s}", "code", code, "message", errmsg()));
			s->done = true;
		} else if (ev.kind == GEV_EXIT) {
			/* The whole ExecResult: the output came as events. */
			sse_event(&s->out, "exit", render_exec_result(NULL, 0, NULL, 0, ev.code, ev.signal,
								      ev.timed_out, now_ms() - s->t0, false));
			exec_ended_event(s->api, s->hg.workspace, s->hg.id, s->event, ev.code, ev.signal,
					 now_ms() - s->t0);
			s->done = true;
		} else {
			stream_chunk(s, &ev);
		}
	}
	return sse_take(&s->out, buf, max);
}

static void stream_done(void *ctx)
{
	struct stream *s = ctx;
	/* Closing the connection kills a command still running. */
	hostif_leave(s->api->hostif, &s->hg);
	sse_free(&s->out);
	free(s);
}

int h_exec_stream(struct req *r)
{
	struct exec_req e;
	if (exec_parse(r, &e) < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct stream *s = calloc(1, sizeof *s);
	if (!s) {
		free(e.argv);
		return reply_error(r, 500, "internal", "out of memory");
	}
	s->api = r->api;
	s->sock = req_socket(r);
	s->t0 = now_ms();
	sse_init(&s->out);
	int answered;
	if (exec_start(r, &e, &s->hg, &answered) < 0) {
		free(e.argv);
		free(s);
		return answered;
	}
	free(e.argv);
	s->event = e.event;
	return reply_stream(r, 200, "text/event-stream", stream_read, stream_done, s);
}
