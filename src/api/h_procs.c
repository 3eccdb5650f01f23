/*
 * h_procs: background processes of a sandbox (docs/api.md "Processes").
 *
 *   POST /v1/sandboxes/{id}/processes                     start one
 *   GET  /v1/sandboxes/{id}/processes                     those the agent keeps
 *   POST /v1/sandboxes/{id}/processes/{process}/signal    {"signal":"TERM"}
 *   GET  /v1/sandboxes/{id}/processes/{process}/output    its kept output
 *                                           (?follow=true: then live, as SSE)
 *   POST /v1/sandboxes/{id}/processes/{process}/stdin     bytes for its stdin
 *
 * A process started here outlives the request: the guest agent (kiln-init)
 * keeps it, with a ring of its output, after the connection that started
 * it is gone. {process} is the agent's id for it ("id"), not the guest
 * pid, which the guest may reuse.
 */
#include "host/guest_conn.h"
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "api/sse.h"
#include "ops/validate.h"
#include "common/err.h"
#include "common/strbuf.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define QUIET_MS 200	/* wait=0: the kept output has come once the agent is this quiet */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int h_proc_start(struct req *r)
{
	/* "stdin": true keeps a pipe open for POST .../stdin; the exec
	 * form (text written, then closed) has no place in a process that
	 * outlives its request. */
	bool stdin_open = false;
	const json_t *sv = r->json ? json_object_get(r->json, "stdin") : NULL;
	if (sv && !json_is_boolean(sv))
		return reply_error(r, 400, "invalid_request",
				   "field 'stdin' of a process is true (stdin stays open for "
				   "POST .../processes/{process}/stdin) or false (no stdin)");
	if (sv) {
		stdin_open = json_is_true(sv);
		json_object_del(r->json, "stdin");
	}
	struct exec_req e;
	if (exec_parse(r, &e) < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	e.background = true;
	e.stdin_open = stdin_open;
	struct hostif_guest hg;
	int answered;
	int rc = exec_start(r, &e, &hg, &answered);
	free(e.argv);
	if (rc < 0)
		return answered;
	/* Closing the connection leaves a background process running. */
	req_guest_leave(r, &hg);
	return reply_json(r, 201, json_pack("{s:I,s:I,s:s,s:b}", "id", (json_int_t)e.id, "pid",
					    (json_int_t)e.pid, "status", "running", "stdin", stdin_open));
}

static json_t *proc_json(const struct guest_proc *p)
{
	return json_pack("{s:I,s:I,s:o,s:s,s:o,s:o,s:o,s:I}", "id", (json_int_t)p->id, "pid",
			 (json_int_t)p->pid, "command", render_text(p->cmd, strnlen(p->cmd, sizeof p->cmd)),
			 "status", p->exited ? "exited" : "running", "started_at",
			 render_time(p->start_ns / 1000000),
			 "exit_code", p->exited ? json_integer(p->code) : json_null(),
			 "signal", p->exited && p->signal ? json_integer(p->signal) : json_null(),
			 "output_dropped", (json_int_t)p->dropped);
}

static int add_proc(void *ctx, const struct guest_proc *p)
{
	return json_array_append_new(ctx, proc_json(p)) < 0 ? -ENOMEM : 0;
}

int proc_list(struct guest *g, json_t **out)
{
	json_t *a = json_array();
	int rc = a ? guest_procs(g, add_proc, a) : -ENOMEM;
	if (rc == -ENOMEM)
		rc = errf(ENOMEM, "out of memory");
	*out = rc < 0 ? NULL : json_pack("{s:o}", "processes", a);
	if (rc < 0)
		json_decref(a);
	return rc;
}

int h_proc_list(struct req *r)
{
	struct hostif_guest hg;
	int answered;
	json_t *j;
	if (req_guest_enter(r, &hg, &answered) < 0)
		return answered;
	int rc = proc_list(hg.g, &j);
	req_guest_leave(r, &hg);
	return rc < 0 ? reply_errno(r, rc) : reply_json(r, 200, j);
}

/* {process}: the agent's id, a positive decimal. */
static int process_id(struct req *r, uint32_t *id)
{
	const char *s = r->nparams > 1 ? r->params[1] : "";
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || s[0] == '-' || s[0] == '+' || v == 0 || v > UINT32_MAX)
		return errf(EINVAL, "'%.20s' is not a process id (the 'id' a start or the list gave)", s);
	*id = (uint32_t)v;
	return 0;
}

static const struct { const char *name; int sig; } signals[] = {
	{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "CONT", SIGCONT },
	{ "STOP", SIGSTOP }, { "TSTP", SIGTSTP }, { "WINCH", SIGWINCH }, { NULL, 0 },
};

int proc_signal_of(const json_t *v, int *sig)
{
	if (json_is_integer(v)) {
		json_int_t n = json_integer_value(v);
		if (n < 1 || n > 64)
			return errf(EINVAL, "field 'signal' must be 1 to 64, or a name such as TERM");
		*sig = (int)n;
		return 0;
	}
	if (!json_is_string(v))
		return errf(EINVAL, "field 'signal' is required: a name such as TERM or KILL, or a number");
	const char *name = json_string_value(v);
	if (!strncasecmp(name, "SIG", 3))
		name += 3;
	for (int i = 0; signals[i].name; i++)
		if (!strcasecmp(name, signals[i].name)) {
			*sig = signals[i].sig;
			return 0;
		}
	return errf(EINVAL, "unknown signal '%.20s' (known: HUP, INT, QUIT, KILL, USR1, USR2, TERM, "
		    "CONT, STOP, TSTP, WINCH, or a number)", json_string_value(v));
}

int h_proc_signal(struct req *r)
{
	uint32_t id;
	int sig = 0;
	int rc = process_id(r, &id);
	static const char *const keys[] = { "signal", NULL };
	rc = rc ?: v_known_keys(r->json, keys);
	rc = rc ?: proc_signal_of(r->json ? json_object_get(r->json, "signal") : NULL, &sig);
	if (rc < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct hostif_guest hg;
	int answered;
	if (req_guest_enter(r, &hg, &answered) < 0)
		return answered;
	rc = guest_signal(hg.g, id, sig);
	req_guest_leave(r, &hg);
	return rc < 0 ? reply_errno(r, rc) : reply_empty(r, 204);
}

struct collected {
	struct strbuf out, err;
	uint64_t max;
	bool truncated;
};

static void collect(struct collected *c, const struct guest_ev *ev)
{
	struct strbuf *b = ev->kind == GEV_STDOUT ? &c->out : &c->err;
	size_t room = b->len < c->max ? c->max - b->len : 0;
	size_t n = ev->len < room ? ev->len : room;
	strbuf_append(b, ev->data, n);
	if (n < ev->len)
		c->truncated = true;
}

/* ---- follow: the output as it comes ----------------------------------------------------- */

struct follow {
	struct api *api;
	struct hostif_guest hg;		/* attached to the process */
	int sock;			/* the client's: its hangup ends the stream, not the process */
	struct sse_out out;
	bool done;
};

static long follow_read(void *ctx, char *buf, size_t max)
{
	struct follow *f = ctx;
	while (sse_drained(&f->out)) {
		if (f->done)
			return HTTP_STREAM_END;
		struct guest_ev ev;
		int rc = guest_exec_next(f->hg.g, &ev, f->sock, 15000);
		if (rc == -ECONNABORTED)
			return HTTP_STREAM_END;
		if (rc == 0) {
			sse_comment(&f->out, "keepalive");
		} else if (rc < 0) {
			const char *code;
			errno_status(rc, &code);
			sse_event(&f->out, "error", json_pack("{s:s,s:s}", "code", code, "message", errmsg()));
			f->done = true;
		} else if (ev.kind == GEV_EXIT) {
			sse_event(&f->out, "exit", json_pack("{s:i,s:o}", "exit_code", ev.code, "signal",
							     ev.signal ? json_integer(ev.signal) : json_null()));
			f->done = true;
		} else {
			sse_event(&f->out, ev.kind == GEV_STDOUT ? "stdout" : "stderr", render_chunk(ev.data, ev.len));
		}
	}
	return sse_take(&f->out, buf, max);
}

static void follow_done(void *ctx)
{
	struct follow *f = ctx;
	hostif_leave(f->api->hostif, &f->hg);	/* a background process runs on */
	sse_free(&f->out);
	free(f);
}

/* An "attached" event ({id, pid, output_dropped}), the kept output, then
 * the output as it comes, as exec/stream has them (stdout, stderr), and
 * "exit" {exit_code, signal} when it ends. The client going away leaves
 * the process running. */
static int follow(struct req *r, struct hostif_guest *hg, uint32_t id, uint32_t pid, uint64_t dropped)
{
	struct follow *f = calloc(1, sizeof *f);
	if (!f) {
		req_guest_leave(r, hg);
		return reply_error(r, 500, "internal", "out of memory");
	}
	f->api = r->api;
	f->hg = *hg;
	f->sock = req_socket(r);
	sse_init(&f->out);
	sse_event(&f->out, "attached", json_pack("{s:I,s:I,s:I}", "id", (json_int_t)id, "pid", (json_int_t)pid,
						 "output_dropped", (json_int_t)dropped));
	return reply_stream(r, 200, "text/event-stream", follow_read, follow_done, f);
}

int proc_output(struct guest *g, uint32_t id, int64_t wait_s, uint64_t max, int sock, json_t **out)
{
	uint32_t pid = 0;
	uint64_t dropped = 0;
	*out = NULL;
	int rc = guest_attach(g, id, &pid, &dropped);
	if (rc < 0)
		return rc;
	struct collected c = { .max = max };
	strbuf_init(&c.out);
	strbuf_init(&c.err);
	struct guest_ev ev = { 0 };
	bool ended = false;
	int64_t deadline = now_ms() + wait_s * 1000;
	for (;;) {
		int64_t left = deadline - now_ms();
		int step = (int)(left > QUIET_MS ? left : QUIET_MS);
		rc = guest_exec_next(g, &ev, sock, step);
		if (rc <= 0)
			break;		/* quiet for the step (0), or an error */
		if (ev.kind == GEV_EXIT) {
			ended = true;
			break;
		}
		collect(&c, &ev);
	}
	if (rc >= 0 && (strbuf_failed(&c.out) || strbuf_failed(&c.err)))
		rc = errf(ENOMEM, "out of memory holding the output");
	if (rc >= 0)
		*out = json_pack("{s:I,s:I,s:s,s:o,s:o,s:o,s:o,s:I,s:b}",
			"id", (json_int_t)id, "pid", (json_int_t)pid, "status", ended ? "exited" : "running",
			"stdout", render_text(c.out.data ? c.out.data : "", c.out.len),
			"stderr", render_text(c.err.data ? c.err.data : "", c.err.len),
			"exit_code", ended ? json_integer(ev.code) : json_null(),
			"signal", ended && ev.signal ? json_integer(ev.signal) : json_null(),
			"output_dropped", (json_int_t)dropped, "truncated", c.truncated);
	strbuf_free(&c.out);
	strbuf_free(&c.err);
	return rc < 0 ? rc : 0;
}

/* What the process printed that the agent kept, then more until it ends
 * or wait_seconds pass; "running" says whether it had ended. With
 * follow=true, an SSE stream instead (follow above). */
int h_proc_output(struct req *r)
{
	uint32_t id;
	int64_t wait_s = 0;
	bool live = false;
	const char *w = req_query(r, "wait_seconds");
	int rc = process_id(r, &id);
	rc = rc ?: req_query_bool(r, "follow", &live);
	if (rc == 0 && live && w)
		rc = errf(EINVAL, "follow=true streams until the process ends: no wait_seconds with it");
	if (rc == 0 && w) {
		char *end;
		wait_s = strtoll(w, &end, 10);
		if (!*w || *end || wait_s < 0 || wait_s > PROC_WAIT_MAX)
			rc = errf(EINVAL, "query parameter 'wait_seconds' must be from 0 to %d", PROC_WAIT_MAX);
	}
	if (rc < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct hostif_guest hg;
	int answered;
	if (req_guest_enter(r, &hg, &answered) < 0)
		return answered;
	if (live) {
		uint32_t pid = 0;
		uint64_t dropped = 0;
		rc = guest_attach(hg.g, id, &pid, &dropped);
		if (rc < 0) {
			req_guest_leave(r, &hg);
			return reply_errno(r, rc);
		}
		return follow(r, &hg, id, pid, dropped);
	}
	json_t *j;
	rc = proc_output(hg.g, id, wait_s, r->api->cfg->max_exec_output, req_socket(r), &j);
	req_guest_leave(r, &hg);	/* a process still running stays so (background) */
	return rc < 0 ? reply_errno(r, rc) : reply_json(r, 200, j);
}

/* The body's bytes (any, up to the JSON limit) go to the process's stdin;
 * ?close=true closes it after them. Answered once the agent holds them:
 * written to the pipe or queued for it (a process that reads nothing
 * gets 409 once 2 MiB wait, rather than the agent growing). */
int h_proc_stdin(struct req *r)
{
	uint32_t id;
	bool close = false;
	int rc = process_id(r, &id);
	rc = rc ?: req_query_bool(r, "close", &close);
	if (rc == 0 && r->body_len == 0 && !close)
		rc = errf(EINVAL, "empty body: send the bytes for stdin, or ?close=true to close it");
	if (rc < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct hostif_guest hg;
	int answered;
	if (req_guest_enter(r, &hg, &answered) < 0)
		return answered;
	rc = guest_proc_input(hg.g, id, r->body, r->body_len, close);
	req_guest_leave(r, &hg);
	if (rc == -EPIPE)
		return reply_error(r, 409, "stdin_closed", "%s", errmsg());
	if (rc == -EAGAIN)
		return reply_error(r, 409, "stdin_full", "%s", errmsg());
	if (rc == -EOPNOTSUPP)
		return reply_error(r, 501, "not_implemented",
				   "this sandbox's guest agent predates process stdin: %s", errmsg());
	if (rc < 0)
		return reply_errno(r, rc);
	return reply_json(r, 200, json_pack("{s:I,s:I,s:b}", "id", (json_int_t)id, "bytes",
					    (json_int_t)r->body_len, "closed", close));
}
