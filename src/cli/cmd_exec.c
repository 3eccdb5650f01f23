/*
 * cmd_exec: `kiln exec` (POST .../exec/stream, its output streamed as it
 * comes and kiln exiting with the command's status), `kiln shell` (the PTY
 * WebSocket, shell.c) and `kiln logs` (GET .../logs, tail or follow). The
 * Server-Sent Events reader here serves exec and logs.
 */
#include "cli/cli.h"
#include "cli/out.h"
#include "cli/shell.h"

#include <errno.h>
#include <nettle/base64.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BODY_MAX (64u << 20)

static char event_id[64];	/* the id: line of the event being read */

const char *sse_event_id(void)
{
	return event_id;
}

/* Read Server-Sent Events until on() returns nonzero or the stream ends.
 * Returns on()'s value, 0 at the end of the stream, -1 on an error. */
int sse_read(struct httpc *c, int (*on)(const char *event, const char *data, void *arg), void *arg)
{
	size_t cap = 4u << 20, len = 0;	/* a 64 KiB chunk as JSON is far less */
	char *line = malloc(cap), event[32] = "message", *data = NULL;
	char buf[16384];
	long n;
	int rc = 0;
	if (!line)
		die("out of memory");
	event_id[0] = 0;
	while (!rc && (n = httpc_read(c, buf, sizeof buf)) > 0) {
		for (long k = 0; k < n && !rc; k++) {
			char ch = buf[k];
			if (ch != '\n') {
				if (len + 1 < cap)
					line[len++] = ch;
				continue;
			}
			if (len && line[len - 1] == '\r')
				len--;
			line[len] = 0;
			if (len == 0) {
				if (data)
					rc = on(event, data, arg);
				free(data);
				data = NULL;
				snprintf(event, sizeof event, "message");
				event_id[0] = 0;
			} else if (!strncmp(line, "id: ", 4)) {
				snprintf(event_id, sizeof event_id, "%s", line + 4);
			} else if (!strncmp(line, "event: ", 7)) {
				snprintf(event, sizeof event, "%s", line + 7);
			} else if (!strncmp(line, "data: ", 6)) {
				free(data);
				data = strdup(line + 6);
			}
			len = 0;
		}
		if (n < 0)
			rc = -1;
	}
	free(line);
	free(data);
	return rc;
}

static int exec_event(const char *event, const char *data, void *arg)
{
	int *exit_code = arg;
	json_t *j = json_loads(data, 0, NULL);
	if (!j)
		return 0;
	if (!strcmp(event, "stdout") || !strcmp(event, "stderr")) {
		int fd = event[3] == 'o' ? 1 : 2;
		json_t *d = json_object_get(j, "data");
		const char *b64 = json_string_value(json_object_get(j, "data_b64"));
		if (d)
			write_all(fd, json_string_value(d), json_string_length(d));
		if (b64) {
			struct base64_decode_ctx ctx;
			size_t in = strlen(b64), out = BASE64_DECODE_LENGTH(in);
			uint8_t *raw = malloc(out + 1);
			base64_decode_init(&ctx);
			if (raw && base64_decode_update(&ctx, &out, raw, in, b64) && base64_decode_final(&ctx))
				write_all(fd, raw, out);
			free(raw);
		}
	} else if (!strcmp(event, "exit")) {
		json_int_t code = json_integer_value(json_object_get(j, "exit_code"));
		*exit_code = code < 0 || code > 255 ? EXIT_KILN : (int)code;
		if (json_is_true(json_object_get(j, "timed_out")))
			fprintf(stderr, "kiln: the command timed out\n");
	} else if (!strcmp(event, "error")) {
		fprintf(stderr, "kiln: %s\n", str(j, "message"));
		*exit_code = EXIT_KILN;
	}
	json_decref(j);
	return *exit_code >= 0;
}

static char *read_stdin(size_t max)
{
	size_t cap = 65536, n = 0;
	char *b = malloc(cap + 1);
	for (;;) {
		if (!b)
			die("out of memory");
		if (n == cap) {
			if (cap >= max)
				die("stdin is larger than %zu bytes", max);
			cap *= 2;
			b = realloc(b, cap + 1);
			continue;
		}
		ssize_t r = read(0, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("reading stdin: %s", strerror(errno));
		if (r == 0)
			break;
		n += (size_t)r;
	}
	b[n] = 0;
	if (strlen(b) != n)
		die("stdin holds NUL bytes; use kiln cp for binary data");
	return b;
}

/* The remote command: pos[first..] where first is after the id; with --,
 * only what follows it (nothing may stand between the id and --). */
static int command_start(const struct command *cmd, struct opts *o)
{
	if (o->dashdash >= 0 && o->dashdash > 1)
		usage_error(cmd, "unexpected argument '%s' before --", o->pos[1]);
	return o->dashdash >= 0 ? o->dashdash : 1;
}

json_t *command_body(const struct command *cmd, struct opts *o, int i)
{
	if (i >= o->npos)
		usage_error(cmd, "%s: no command given", cmd->name);
	json_t *body = json_object();
	if (o->npos - i == 1) {
		json_object_set_new(body, "cmd", json_string(o->pos[i]));
	} else {
		json_t *a = json_array();
		for (; i < o->npos; i++)
			json_array_append_new(a, json_string(o->pos[i]));
		json_object_set_new(body, "argv", a);
	}
	if (o->env)
		json_object_set_new(body, "env", o->env);
	o->env = NULL;
	if (o->cwd)
		json_object_set_new(body, "cwd", json_string(o->cwd));
	if (o->user)
		json_object_set_new(body, "user", json_string(o->user));
	if (o->timeout > 0)
		json_object_set_new(body, "timeout_seconds", json_integer(o->timeout));
	return body;
}

int cmd_exec(const struct command *cmd, struct opts *o)
{
	const char *id = need_id(cmd, o, 0);
	json_t *body = command_body(cmd, o, command_start(cmd, o));
	if (o->in) {
		char *in = read_stdin(1u << 20);
		json_object_set_new(body, "stdin", json_string(in));
		free(in);
	}
	char path[128], *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	snprintf(path, sizeof path, "/v1/sandboxes/%s/exec/stream", id);
	struct httpc c;
	if (httpc_start(&c, &target, "POST", path, "Content-Type: application/json\r\nAccept: text/event-stream\r\n",
			text, strlen(text), -1, 0) < 0)
		die("%s", c.error);
	free(text);
	if (c.status != 200) {
		char *resp = NULL;
		httpc_read_all(&c, &resp, NULL, BODY_MAX);
		/* The guest could not start it (its execve failed): 127 when
		 * there is no such program, 126 otherwise, as a shell says. */
		json_t *j = c.status == 400 && resp ? json_loads(resp, 0, NULL) : NULL;
		const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
		if (m && strstr(m, "execve")) {
			fprintf(stderr, "kiln: %s: %s\n", o->pos[command_start(cmd, o)], m);
			return strstr(m, "No such file") ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
		}
		json_decref(j);
		die_response(c.status, resp);
	}
	int exit_code = -1;
	sse_read(&c, exec_event, &exit_code);
	httpc_close(&c);
	if (exit_code < 0)
		die("the stream ended before the command did%s%s", c.error[0] ? ": " : "", c.error);
	return exit_code;
}

int cmd_shell(const struct command *cmd, struct opts *o)
{
	const char *id = need_id(cmd, o, 0);
	int i = command_start(cmd, o);
	char *line = NULL;
	size_t len = 0;
	for (; i < o->npos; i++) {	/* CMD [ARG...] is one shell command line */
		size_t n = strlen(o->pos[i]);
		line = realloc(line, len + n + 2);
		if (!line)
			die("out of memory");
		if (len)
			line[len++] = ' ';
		memcpy(line + len, o->pos[i], n + 1);
		len += n;
	}
	int rc = shell_run(&target, id, line);
	free(line);
	return rc;
}

/* logs: one line as "[source] text". */
static void log_line(json_t *l)
{
	const char *src = str(l, "source"), *text = str(l, "text");
	bool colour = use_colour(1);
	printf("%s%-7s%s %s\n", colour ? "\033[2m" : "", src, colour ? "\033[0m" : "", text);
}

static int logs_event(const char *event, const char *data, void *arg)
{
	struct opts *o = arg;
	if (!strcmp(event, "end"))
		return 1;
	if (strcmp(event, "line"))
		return 0;
	json_t *j = json_loads(data, 0, NULL);
	if (j) {
		if (o->json) {
			print_json_line(j);
		} else {
			log_line(j);
		}
		fflush(stdout);
	}
	json_decref(j);
	return 0;
}

int cmd_logs(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 1, 1);
	const char *id = need_id(cmd, o, 0);
	char base[128], tail[24];
	snprintf(base, sizeof base, "/v1/sandboxes/%s/logs", id);
	snprintf(tail, sizeof tail, "%lld", o->n > 0 ? o->n : 200);
	struct query q = { 0 };
	query_add(&q, "tail", tail);
	if (o->follow)
		query_add(&q, "follow", "true");
	char *path = query_path(base, &q);
	if (!o->follow) {
		json_t *r = call("GET", path, NULL);
		free(path);
		if (o->json) {
			print_json(r);
		} else {
			size_t k;
			json_t *l;
			json_array_foreach(json_object_get(r, "lines"), k, l)
				log_line(l);
		}
		json_decref(r);
		return 0;
	}
	struct httpc c;
	get_stream(&c, path, "Accept: text/event-stream\r\n");
	int rc = sse_read(&c, logs_event, o);
	httpc_close(&c);
	if (rc < 0)
		die("the log stream broke: %s", c.error);
	return 0;
}
