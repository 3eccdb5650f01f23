/*
 * code: the client side of the code interpreter kilnd runs in a sandbox
 * (code.h), shared by the REST handlers (h_code.c) and the MCP tool.
 *
 * The interpreter is a Python program (src/guest/interp/kiln_interp.py,
 * built into kilnd as interp_py) that runs inside the guest: the first
 * call writes it to INTERP_PATH and starts it in the background; it
 * listens on 127.0.0.1:INTERP_PORT in the guest, reached through the guest
 * agent's CONNECT like an exposed port, never from outside the VM. Each
 * context is its own worker process there, so contexts share nothing, a
 * crash or an interrupt touches one, and a snapshot or fork of the
 * sandbox carries every context's variables with it.
 *
 * What the guest sends back is untrusted: every line is bounded, parsed as
 * JSON, and only the fields named here are taken from it.
 */
#include "host/guest_conn.h"
#include "hostif/hostif.h"
#include "api/code.h"
#include "ops/validate.h"
#include "api/render.h"
#include "common/err.h"
#include "common/strbuf.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define INTERP_PORT 49999
#define INTERP_PATH "/run/kiln/interp.py"
#define TEMPLATE_INTERP_PATH "/usr/lib/kiln/kiln_interp.py"	/* Makefile, rootfs-code-interpreter */
/* python3 starting in a fresh guest: well under a second on a KVM host;
 * 20 s was missed in the emulated host under a CI's load (sessions 30
 * and 31: "did not start within 20 s" in the SDK tests). A bound, not a
 * pace: the cell goes as soon as the interpreter answers. */
#define START_WAIT_MS 60000
#define LINE_MAX_BYTES (48u << 20)	/* one message: a large PNG, base64 */
#define RESULTS_MAX_BYTES (64u << 20)	/* everything a cell answers, but stdout/stderr */

int64_t code_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- reaching the interpreter ------------------------------------------------------ */

/* Start the interpreter in the background: the template's own copy where
 * it has one (the code-interpreter template: its kiln_interp.preload
 * beside it, so a server that died comes back with the same modules
 * imported), else kilnd's, written into the guest first. -ENOTSUP: the
 * template has no python3. */
static int interp_start(struct hostif *hi, const char *ws, const char *id)
{
	struct hostif_guest hg;
	int rc = hostif_enter(hi, ws, id, &hg);
	if (rc < 0)
		return rc;
	struct guest_stat st;
	if (guest_stat(hg.g, TEMPLATE_INTERP_PATH, &st) == 0) {
		static const char *const argv[] = { "python3", "-u", TEMPLATE_INTERP_PATH, "serve", NULL };
		struct guest_cmd cmd = { .argv = argv, .background = true };
		if ((rc = guest_exec_start(hg.g, &cmd)) == 0)
			rc = guest_exec_detach(hg.g);
		hostif_leave(hi, &hg);
		if (rc == -ENOENT || rc == -EACCES)
			return errf(ENOTSUP, "this sandbox cannot run the code interpreter: %s", errmsg());
		return rc;
	}
	int fd = memfd_create("kiln-interp", MFD_CLOEXEC);
	if (fd < 0)
		rc = errf_sys("memfd_create");
	else if (write(fd, interp_py, interp_py_len) != (ssize_t)interp_py_len || lseek(fd, 0, SEEK_SET) < 0)
		rc = errf_sys("memfd write");
	uint64_t bytes;
	if (rc == 0)
		rc = guest_write_file(hg.g, INTERP_PATH, 0644, true, fd, &bytes);
	if (fd >= 0)
		close(fd);
	static const char *const argv[] = { "python3", "-u", INTERP_PATH, "serve", NULL };
	struct guest_cmd cmd = { .argv = argv, .background = true };
	if (rc == 0 && (rc = guest_exec_start(hg.g, &cmd)) == 0)
		rc = guest_exec_detach(hg.g);
	hostif_leave(hi, &hg);
	if (rc == -ENOENT || rc == -EACCES)
		return errf(ENOTSUP, "this sandbox cannot run the code interpreter: %s (it needs python3: "
			    "the base template has it)", errmsg());
	return rc;
}

/* A connection to the interpreter, started if it is not running yet. */
static int interp_connect(struct code_conn *c, const char *ws, const char *id)
{
	bool started = false;
	int64_t deadline = 0;
	for (;;) {
		int rc = hostif_enter(c->hi, ws, id, &c->hg);
		if (rc < 0)
			return rc;
		void *early = NULL;
		size_t n = 0;
		rc = guest_tcp_connect(c->hg.g, INTERP_PORT, &c->fd, &early, &n);
		free(early);	/* the interpreter speaks only when asked */
		if (rc == 0)
			return 0;
		hostif_leave(c->hi, &c->hg);
		if (rc != -ECONNREFUSED)
			return rc;
		if (!started) {
			if ((rc = interp_start(c->hi, ws, id)) < 0)
				return rc;
			started = true;
			deadline = code_mono_ms() + START_WAIT_MS;
		} else if (code_mono_ms() > deadline) {
			return errf(ETIMEDOUT, "the code interpreter did not start within %d s", START_WAIT_MS / 1000);
		}
		usleep(100 * 1000);
	}
}

int code_open(struct hostif *hi, const char *ws, const char *id, json_t *request, int client_fd,
	      int64_t wait_ms, struct code_conn *c)
{
	memset(c, 0, sizeof *c);
	c->hi = hi;
	c->fd = -1;
	int rc = interp_connect(c, ws, id);
	char *text = rc == 0 ? json_dumps(request, JSON_COMPACT) : NULL;
	json_decref(request);
	if (rc < 0)
		return rc;
	size_t n = text ? strlen(text) : 0;
	if (!text)
		rc = errf(ENOMEM, "out of memory");
	for (size_t off = 0; rc == 0 && off < n;) {
		ssize_t w = write(c->fd, text + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			rc = errf_sys("writing to the code interpreter");
		else
			off += (size_t)w;
	}
	if (rc == 0 && write(c->fd, "\n", 1) != 1)
		rc = errf_sys("writing to the code interpreter");
	free(text);
	c->client = client_fd;
	c->deadline = code_mono_ms() + wait_ms;
	if (rc < 0)
		code_close(c);
	return rc;
}

void code_close(struct code_conn *c)
{
	if (c->fd >= 0) {
		close(c->fd);	/* mid-cell, this interrupts it */
		hostif_leave(c->hi, &c->hg);
	}
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
}

/* The next line (NUL-terminated in c->buf, its length in *len): 1, 0 at
 * the end, or -errno (-ECONNABORTED: the client went away). */
static int next_line(struct code_conn *c, size_t *len)
{
	for (;;) {
		char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
		if (nl) {
			*nl = 0;
			*len = (size_t)(nl - c->buf);
			return 1;
		}
		if (c->len >= LINE_MAX_BYTES)
			return errf(EMSGSIZE, "the code interpreter sent a message over %u MiB", LINE_MAX_BYTES >> 20);
		if (c->cap - c->len < 65536) {
			size_t cap = c->cap ? c->cap * 2 : 262144;
			char *b = realloc(c->buf, cap + 1);
			if (!b)
				return errf(ENOMEM, "out of memory");
			c->buf = b;
			c->cap = cap;
		}
		struct pollfd p[2] = { { .fd = c->fd, .events = POLLIN }, { .fd = c->client, .events = POLLRDHUP } };
		int left = (int)(c->deadline - code_mono_ms());
		if (left <= 0)
			return errf(ETIMEDOUT, "the code interpreter did not answer in time");
		int n = poll(p, c->client >= 0 ? 2 : 1, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errf_sys("poll");
		if (n == 0)
			continue;
		if (c->client >= 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
			return errf(ECONNABORTED, "the client went away");
		ssize_t got = read(c->fd, c->buf + c->len, c->cap - c->len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return errf_sys("reading from the code interpreter");
		if (got == 0)
			return 0;
		c->len += (size_t)got;
	}
}

int code_next(struct code_conn *c, json_t **msg)
{
	size_t len = 0;
	int got = next_line(c, &len);
	if (got <= 0)
		return got ? got : errf(EPROTO, "the code interpreter closed the connection before answering");
	*msg = json_loadb(c->buf, len, 0, NULL);
	memmove(c->buf, c->buf + len + 1, c->len - len - 1);
	c->len -= len + 1;
	if (!json_is_object(*msg)) {
		json_decref(*msg);
		*msg = NULL;
		return errf(EPROTO, "the code interpreter sent something that is not a JSON object");
	}
	return 1;
}

const char *code_str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

/* ---- a cell ---------------------------------------------------------------------------- */

json_t *code_result(json_t *data, bool main)
{
	static const struct { const char *mime, *key; } kinds[] = {
		{ "text/plain", "text" }, { "text/html", "html" }, { "text/markdown", "markdown" },
		{ "image/png", "png" }, { "image/svg+xml", "svg" }, { "application/json", "json" },
	};
	json_t *o = json_object();
	for (size_t i = 0; o && i < sizeof kinds / sizeof kinds[0]; i++) {
		json_t *v = json_object_get(data, kinds[i].mime);
		if (!v)
			continue;
		if (!strcmp(kinds[i].key, "json"))
			json_object_set(o, "json", v);
		else if (json_is_string(v))
			json_object_set(o, kinds[i].key, v);
	}
	if (o)
		json_object_set_new(o, "is_main_result", json_boolean(main));
	return o;
}

json_t *code_error(json_t *m)
{
	return json_pack("{s:s,s:s,s:s}", "name", code_str(m, "name"), "value", code_str(m, "value"), "traceback",
			 code_str(m, "traceback"));
}

struct cell {
	struct strbuf out, err;
	uint64_t max;			/* stdout and stderr, each */
	bool truncated;
	json_t *results;		/* Result objects */
	size_t results_bytes;
	json_t *error;			/* or NULL */
	int64_t count;
};

static void keep_text(struct cell *c, struct strbuf *b, const char *s)
{
	size_t n = strlen(s), room = b->len < c->max ? c->max - b->len : 0;
	if (n > room) {
		n = room;
		c->truncated = true;
	}
	strbuf_append(b, s, n);
}

/* One message of a cell: 1 at its end, 0 to go on. */
static int on_cell(struct cell *c, json_t *m)
{
	const char *t = code_str(m, "t");
	if (!strcmp(t, "stdout") || !strcmp(t, "stderr")) {
		keep_text(c, !strcmp(t, "stdout") ? &c->out : &c->err, code_str(m, "text"));
	} else if (!strcmp(t, "result")) {
		json_t *data = json_object_get(m, "data");
		char *s = json_is_object(data) ? json_dumps(data, JSON_COMPACT) : NULL;
		size_t n = s ? strlen(s) : 0;
		free(s);
		if (!json_is_object(data) || c->results_bytes + n > RESULTS_MAX_BYTES) {
			c->truncated = true;
			return 0;
		}
		c->results_bytes += n;
		json_array_append_new(c->results, code_result(data, json_is_true(json_object_get(m, "main"))));
	} else if (!strcmp(t, "error")) {
		json_decref(c->error);
		c->error = code_error(m);
	} else if (!strcmp(t, "end")) {
		c->count = json_integer_value(json_object_get(m, "count"));
		if (json_is_true(json_object_get(m, "truncated")))
			c->truncated = true;	/* the interpreter's own bound */
		return 1;
	}
	return 0;
}

int code_cell(struct hostif *hi, const char *ws, const char *id, json_t *request, int client_fd,
	      int64_t wait_ms, uint64_t max_text, json_t **execution, json_t **fail)
{
	*execution = *fail = NULL;
	int64_t t0 = code_mono_ms();
	struct code_conn cc;
	int rc = code_open(hi, ws, id, request, client_fd, wait_ms, &cc);
	if (rc < 0)
		return rc;
	struct cell c = { .max = max_text, .results = json_array() };
	strbuf_init(&c.out);
	strbuf_init(&c.err);
	for (;;) {
		json_t *m = NULL;
		if ((rc = code_next(&cc, &m)) < 0)
			break;
		if (!strcmp(code_str(m, "t"), "fail")) {
			*fail = m;
			break;
		}
		int done = on_cell(&c, m);
		json_decref(m);
		if (done)
			break;
	}
	code_close(&cc);
	if (rc > 0)
		rc = 0;		/* code_next's 1: the loop ended at the cell's end */
	if (rc == 0 && !*fail && (strbuf_failed(&c.out) || strbuf_failed(&c.err)))
		rc = errf(ENOMEM, "out of memory holding the output");
	if (rc == 0 && !*fail)
		*execution = json_pack("{s:o,s:o,s:O,s:o,s:I,s:b,s:f}",
			"stdout", render_text(c.out.data ? c.out.data : "", c.out.len),
			"stderr", render_text(c.err.data ? c.err.data : "", c.err.len),
			"results", c.results, "error", c.error ? json_incref(c.error) : json_null(),
			"execution_count", (json_int_t)c.count, "truncated", c.truncated,
			"duration_ms", (double)(code_mono_ms() - t0));
	json_decref(c.results);
	json_decref(c.error);
	strbuf_free(&c.out);
	strbuf_free(&c.err);
	if (rc == 0 && !*fail && !*execution)
		rc = errf(ENOMEM, "out of memory");
	return rc;
}

int code_run_request(const char *code, const char *language, const char *context, int64_t timeout_s,
		     uint64_t max_output, json_t *envs, int64_t *wait_ms, json_t **out)
{
	*wait_ms = timeout_s ? timeout_s * 1000 + CODE_REPLY_GRACE_MS : (int64_t)CODE_TIMEOUT_MAX * 1000;
	*out = json_pack("{s:s,s:s?,s:s?,s:s,s:I}", "op", "run", "language", language, "context", context, "code", code,
			 "timeout", (json_int_t)timeout_s);
	if (*out && max_output)
		json_object_set_new(*out, "max_output", json_integer((json_int_t)max_output));
	if (*out && envs && json_object_size(envs))
		json_object_set(*out, "envs", envs);
	return *out ? 0 : errf(ENOMEM, "out of memory");
}

int code_envs(const json_t *obj, const char *key, json_t **out)
{
	json_t *envs = NULL;
	int rc = v_str_map(obj, key, CODE_ENVS_MAX, CODE_ENV_NAME_MAX, CODE_ENV_VALUE_MAX, true, &envs);
	if (rc < 0 || !envs)
		return rc;
	const char *k;
	json_t *v;
	json_object_foreach(envs, k, v)
		if (strlen(json_string_value(v)) != json_string_length(v))
			return errf(EINVAL, "field '%s': '%.64s' has a NUL byte, which no environment variable can hold",
				    key, k);
	*out = envs;
	return 0;
}

int code_language(const char *s, const char **canonical)
{
	static const struct { const char *name, *canonical; } langs[] = {
		{ "python", "python" }, { "python3", "python" }, { "bash", "bash" }, { "sh", "sh" },
		{ "javascript", "javascript" }, { "js", "javascript" }, { "node", "javascript" },
	};
	for (size_t i = 0; i < sizeof langs / sizeof langs[0]; i++)
		if (!strcmp(s, langs[i].name)) {
			*canonical = langs[i].canonical;
			return 0;
		}
	return errf(EINVAL, "language '%.20s': the code interpreter runs python, bash, sh and javascript", s);
}

int code_context_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64)
		return errf(EINVAL, "a context id has 1 to 64 characters");
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return errf(EINVAL, "a context id is made of [a-z0-9-]");
	return 0;
}
