/*
 * h_code: the code interpreter's REST routes (docs/api.md "Code"; how it
 * runs: code.c).
 *
 *   POST   /v1/sandboxes/{id}/code                            run a cell
 *   POST   /v1/sandboxes/{id}/code/stream                     run a cell, its output as SSE
 *   POST   /v1/sandboxes/{id}/code/contexts                   a new context
 *   GET    /v1/sandboxes/{id}/code/contexts                   the contexts
 *   DELETE /v1/sandboxes/{id}/code/contexts/{context}
 *   POST   /v1/sandboxes/{id}/code/contexts/{context}/restart  its variables gone
 */
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/code.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "api/sse.h"
#include "ops/validate.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CONTEXT_WAIT_MS 30000

/* The status of the interpreter's refusal ({"t":"fail","code",...}):
 * "unsupported" is a language the sandbox lacks (javascript without node),
 * a 400 the caller fixes by its choice of template. */
static int reply_fail(struct req *r, json_t *fail)
{
	const char *code = code_str(fail, "code");
	int status = !strcmp(code, "not_found") ? 404
		   : !strcmp(code, "invalid_request") || !strcmp(code, "unsupported") ? 400 : 502;
	return reply_error(r, status, code, "%s", code_str(fail, "message"));
}

static int reply_code_errno(struct req *r, int rc)
{
	return rc == -ECONNABORTED ? reply_abort(r) : reply_errno(r, rc);
}

/* A language field: its canonical name in *lang (NULL stays NULL). */
static int language_ok(const char **lang)
{
	return *lang ? code_language(*lang, lang) : 0;
}

/* A cell's request from the body, after checking the sandbox is the
 * caller's: NULL with the answer sent. */
static json_t *cell_request(struct req *r, int64_t *wait_ms, int *answered)
{
	static const char *const keys[] = { "code", "language", "context", "timeout_seconds", "envs", NULL };
	const json_t *b = r->json ? r->json : json_object();
	const char *code = NULL, *lang = NULL, *context = NULL;
	json_t *envs = NULL;
	int64_t timeout = 0;
	int rc = v_known_keys(b, keys);
	rc = rc ?: v_str(b, "code", true, r->api->cfg->max_json_bytes, &code);
	rc = rc ?: v_str(b, "language", false, 16, &lang);
	rc = rc ?: v_str(b, "context", false, 64, &context);
	rc = rc ?: v_int(b, "timeout_seconds", false, 0, CODE_TIMEOUT_MAX, &timeout);
	rc = rc ?: code_envs(b, "envs", &envs);
	rc = rc ?: language_ok(&lang);
	if (rc == 0 && context && code_context_name(context) < 0)
		rc = errf(EINVAL, "field 'context': %s", errmsg());
	if (rc < 0) {
		*answered = reply_error(r, 400, "invalid_request", "%s", errmsg());
		return NULL;
	}
	if (req_sandbox(r, NULL, answered) < 0)
		return NULL;
	json_t *request;
	if (code_run_request(code, lang, context, timeout, r->api->cfg->max_exec_output, envs, wait_ms,
			     &request) < 0) {
		*answered = reply_errno(r, -ENOMEM);
		return NULL;
	}
	return request;
}

int h_code_run(struct req *r)
{
	int64_t wait;
	int answered;
	json_t *request = cell_request(r, &wait, &answered);
	if (!request)
		return answered;
	json_t *execution, *fail;
	int rc = code_cell(r->api->hostif, r->workspace, req_sandbox_id(r), request, req_socket(r), wait,
			   r->api->cfg->max_exec_output, &execution, &fail);
	if (rc < 0)
		return reply_code_errno(r, rc);
	if (fail) {
		int result = reply_fail(r, fail);
		json_decref(fail);
		return result;
	}
	return reply_json(r, 200, execution);
}

/* ---- a cell, streamed ------------------------------------------------------------------ */

/* POST .../code/stream: the same cell, its messages as Server-Sent Events
 * while it runs: stdout and stderr {"text"}, result (a Result), error
 * (the cell's exception), then end {"execution_count","duration_ms","truncated"}; a
 * failure of the platform is `fail` {"code","message"}. */
struct cstream {
	struct code_conn cc;
	struct sse_out out;
	bool done;
	int64_t t0;
	uint64_t text_left;		/* stdout and stderr bytes still sent */
	bool truncated;			/* some were not */
};

static void cs_message(struct cstream *s, json_t *m)
{
	const char *t = code_str(m, "t");
	if (!strcmp(t, "stdout") || !strcmp(t, "stderr")) {
		const char *text = code_str(m, "text");
		size_t n = strlen(text);
		if (n > s->text_left) {
			n = (size_t)s->text_left;
			s->truncated = true;
		}
		s->text_left -= n;
		if (n)
			sse_event(&s->out, t, json_pack("{s:o}", "text", render_text(text, n)));
	} else if (!strcmp(t, "result")) {
		json_t *data = json_object_get(m, "data");
		if (json_is_object(data))
			sse_event(&s->out, "result", code_result(data, json_is_true(json_object_get(m, "main"))));
	} else if (!strcmp(t, "error")) {
		sse_event(&s->out, "error", code_error(m));
	} else if (!strcmp(t, "end")) {
		sse_event(&s->out, "end", json_pack("{s:I,s:f,s:b}", "execution_count",
						    (json_int_t)json_integer_value(json_object_get(m, "count")),
						    "duration_ms", (double)(code_mono_ms() - s->t0), "truncated",
						    s->truncated || json_is_true(json_object_get(m, "truncated"))));
		s->done = true;
	} else if (!strcmp(t, "fail")) {
		sse_event(&s->out, "fail", json_pack("{s:s,s:s}", "code", code_str(m, "code"), "message",
						     code_str(m, "message")));
		s->done = true;
	}
}

static long cs_read(void *ctx, char *buf, size_t max)
{
	struct cstream *s = ctx;
	while (sse_drained(&s->out)) {
		if (s->done)
			return HTTP_STREAM_END;
		/* Wake every 15 s with a comment, so proxies keep the stream. */
		int64_t deadline = s->cc.deadline;
		if (deadline > code_mono_ms() + 15000)
			s->cc.deadline = code_mono_ms() + 15000;
		json_t *m = NULL;
		int rc = code_next(&s->cc, &m);
		s->cc.deadline = deadline;
		if (rc == -ETIMEDOUT && code_mono_ms() < deadline) {
			sse_comment(&s->out, "keepalive");
		} else if (rc < 0) {
			const char *code;
			errno_status(rc, &code);
			sse_event(&s->out, "fail", json_pack("{s:s,s:s}", "code", code, "message", errmsg()));
			s->done = true;
		} else {
			cs_message(s, m);
			json_decref(m);
		}
	}
	return sse_take(&s->out, buf, max);
}

static void cs_done(void *ctx)
{
	struct cstream *s = ctx;
	code_close(&s->cc);
	sse_free(&s->out);
	free(s);
}

int h_code_stream(struct req *r)
{
	int64_t wait;
	int answered;
	json_t *request = cell_request(r, &wait, &answered);
	if (!request)
		return answered;
	struct cstream *s = calloc(1, sizeof *s);
	if (!s) {
		json_decref(request);
		return reply_error(r, 500, "internal", "out of memory");
	}
	int rc = code_open(r->api->hostif, r->workspace, req_sandbox_id(r), request, req_socket(r), wait, &s->cc);
	if (rc < 0) {
		free(s);
		return reply_code_errno(r, rc);
	}
	s->t0 = code_mono_ms();
	s->text_left = 2 * r->api->cfg->max_exec_output;
	sse_init(&s->out);
	return reply_stream(r, 200, "text/event-stream", cs_read, cs_done, s);
}

/* ---- contexts ---------------------------------------------------------------------- */

/* One request, one answer: the answer (yours), or NULL with the reply sent. */
static json_t *ask(struct req *r, json_t *request, int *answered)
{
	if (req_sandbox(r, NULL, answered) < 0) {
		json_decref(request);
		return NULL;
	}
	struct code_conn cc;
	int rc = code_open(r->api->hostif, r->workspace, req_sandbox_id(r), request, req_socket(r),
			   CONTEXT_WAIT_MS, &cc);
	json_t *m = NULL;
	if (rc == 0) {
		rc = code_next(&cc, &m);
		code_close(&cc);
	}
	if (rc < 0) {
		*answered = reply_code_errno(r, rc);
		return NULL;
	}
	if (!strcmp(code_str(m, "t"), "fail")) {
		*answered = reply_fail(r, m);
		json_decref(m);
		return NULL;
	}
	return m;
}

/* A context as the API shows it; the guest's words taken only when known. */
static json_t *context_json(json_t *c)
{
	json_t *cwd = json_object_get(c, "cwd");
	const char *lang = code_str(c, "language");
	if (code_language(lang, &lang) < 0)
		lang = "python";
	return json_pack("{s:s%,s:s,s:O}", "id", code_str(c, "id"), strnlen(code_str(c, "id"), 64), "language", lang,
			 "cwd", json_is_string(cwd) ? cwd : json_null());
}

int h_code_context_create(struct req *r)
{
	static const char *const keys[] = { "language", "cwd", NULL };
	const json_t *b = r->json ? r->json : json_object();
	const char *lang = NULL, *cwd = NULL;
	int rc = v_known_keys(b, keys);
	rc = rc ?: v_str(b, "language", false, 16, &lang);
	rc = rc ?: v_str(b, "cwd", false, 4095, &cwd);
	rc = rc ?: language_ok(&lang);
	if (rc == 0 && cwd)
		rc = v_guest_path(cwd, "cwd");
	if (rc < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	int answered;
	json_t *a = ask(r, json_pack("{s:s,s:s,s:s?}", "op", "create", "language", lang ? lang : "python", "cwd", cwd),
			&answered);
	if (!a)
		return answered;
	json_t *c = context_json(a);
	json_decref(a);
	return reply_json(r, 201, c);
}

int h_code_context_list(struct req *r)
{
	int answered;
	json_t *a = ask(r, json_pack("{s:s}", "op", "list"), &answered);
	if (!a)
		return answered;
	json_t *list = json_array();
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(a, "contexts"), i, c)
		if (json_is_object(c) && i < 1024)
			json_array_append_new(list, context_json(c));
	json_decref(a);
	return reply_json(r, 200, json_pack("{s:o}", "contexts", list));
}

static int context_op(struct req *r, const char *op, int status)
{
	const char *id = r->nparams > 1 ? r->params[1] : "";
	if (code_context_name(id) < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	int answered;
	json_t *a = ask(r, json_pack("{s:s,s:s}", "op", op, "id", id), &answered);
	if (!a)
		return answered;
	json_decref(a);
	return status == 204 ? reply_empty(r, 204)
			     : reply_json(r, status, json_pack("{s:s,s:s}", "id", id, "status", "restarted"));
}

int h_code_context_delete(struct req *r)
{
	return context_op(r, "delete", 204);
}

int h_code_context_restart(struct req *r)
{
	return context_op(r, "restart", 200);
}
