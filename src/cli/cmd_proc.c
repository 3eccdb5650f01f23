/*
 * kiln proc: background processes of a sandbox (docs/api.md "Processes").
 *
 *   kiln proc start [--stdin] [-e K=V]... [-w DIR] [-t S] ID [--] CMD...
 *   kiln proc ls ID
 *   kiln proc output [--wait S] ID PROC
 *   kiln proc stdin [--close] ID PROC      kiln's stdin, all of it, to PROC
 *   kiln proc kill [-s SIG] ID PROC
 *
 * PROC is the number `proc start` printed (the agent's id, not the guest
 * pid). `proc output` prints the process's stdout and stderr to kiln's and
 * exits with its status once it has ended (0, with a note, while it runs).
 */
#include "cli/cli.h"
#include "cli/out.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What one stdin request carries: kilnd's JSON body limit (1 MiB). */
#define STDIN_CHUNK (1u << 20)

static const char *proc_arg(const struct command *cmd, struct opts *o, int i)
{
	if (i >= o->npos)
		usage_error(cmd, "a process id (the number proc start printed) is missing");
	args_number("PROC", o->pos[i], 1, 4294967295LL);
	return o->pos[i];
}

static void proc_start(const struct command *cmd, struct opts *o)
{
	const char *id = need_id(cmd, o, 1);
	if (o->dashdash > 2)
		usage_error(cmd, "unexpected argument '%s' before --", o->pos[2]);
	json_t *body = command_body(cmd, o, o->dashdash >= 0 ? o->dashdash : 2);
	if (o->in)
		json_object_set_new(body, "stdin", json_true());
	char path[128];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/processes", id);
	json_t *r = call("POST", path, body);
	if (o->json)
		print_json(r);
	else
		printf("%lld\n", (long long)json_integer_value(json_object_get(r, "id")));
	json_decref(r);
}

static void proc_ls(const struct command *cmd, struct opts *o)
{
	const char *id = need_id(cmd, o, 1);
	need_args(cmd, o, 2, 2);
	char path[128];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/processes", id);
	json_t *r = call("GET", path, NULL);
	if (o->json) {
		print_json(r);
		json_decref(r);
		return;
	}
	struct table t;
	table_init(&t, "PROC PID STATUS EXIT STARTED COMMAND");
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(r, "processes"), i, p) {
		char proc[24], pid[24], code[24], when[32];
		snprintf(proc, sizeof proc, "%lld", (long long)json_integer_value(json_object_get(p, "id")));
		snprintf(pid, sizeof pid, "%lld", (long long)json_integer_value(json_object_get(p, "pid")));
		json_t *c = json_object_get(p, "exit_code");
		if (json_is_integer(c))
			snprintf(code, sizeof code, "%lld", (long long)json_integer_value(c));
		else
			snprintf(code, sizeof code, "-");
		table_row(&t, proc, pid, str(p, "status"), code, ago(str(p, "started_at"), when, sizeof when),
			  str(p, "command"), NULL);
	}
	table_print(&t, stdout);
	json_decref(r);
}

static int proc_output(const struct command *cmd, struct opts *o)
{
	const char *id = need_id(cmd, o, 1);
	const char *proc = proc_arg(cmd, o, 2);
	need_args(cmd, o, 3, 3);
	char path[192];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/processes/%s/output?wait_seconds=%lld", id, proc, o->wait);
	json_t *r = call("GET", path, NULL);
	if (o->json) {
		print_json(r);
		json_decref(r);
		return 0;
	}
	const char *out = json_string_value(json_object_get(r, "stdout"));
	const char *err = json_string_value(json_object_get(r, "stderr"));
	fflush(stdout);
	if (out)
		write_all(1, out, strlen(out));
	if (err)
		write_all(2, err, strlen(err));
	if (json_integer_value(json_object_get(r, "output_dropped")) > 0)
		fprintf(stderr, "kiln: the first %lld bytes of its output were not kept\n",
			(long long)json_integer_value(json_object_get(r, "output_dropped")));
	int status = 0;
	if (!strcmp(str(r, "status"), "running")) {
		fprintf(stderr, "kiln: process %s is still running\n", proc);
	} else {
		json_int_t code = json_integer_value(json_object_get(r, "exit_code"));
		status = code < 0 || code > 255 ? EXIT_KILN : (int)code;
	}
	json_decref(r);
	return status;
}

static void send_stdin(const char *path, const void *p, size_t n, bool close)
{
	char url[224];
	snprintf(url, sizeof url, "%s%s", path, close ? "?close=true" : "");
	struct httpc c;
	int rc = httpc_start(&c, &target, "POST", url, "Content-Type: application/octet-stream\r\n", p, n, -1, 0);
	free(finish(&c, rc));
}

/* All of kiln's stdin, a request per chunk, then the end of it if asked
 * (with the last chunk, so that the process sees both at once). */
static void proc_stdin(const struct command *cmd, struct opts *o)
{
	const char *id = need_id(cmd, o, 1);
	const char *proc = proc_arg(cmd, o, 2);
	need_args(cmd, o, 3, 3);
	char path[192];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/processes/%s/stdin", id, proc);
	char *b = malloc(STDIN_CHUNK);
	if (!b)
		die("out of memory");
	size_t n = 0;
	for (;;) {
		ssize_t r = read(0, b + n, STDIN_CHUNK - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("reading stdin: %s", strerror(errno));
		n += (size_t)r;
		if (r == 0) {
			if (n || o->close)
				send_stdin(path, b, n, o->close);
			break;
		}
		if (n == STDIN_CHUNK) {
			send_stdin(path, b, n, false);
			n = 0;
		}
	}
	free(b);
}

static void proc_kill(const struct command *cmd, struct opts *o)
{
	const char *id = need_id(cmd, o, 1);
	const char *proc = proc_arg(cmd, o, 2);
	need_args(cmd, o, 3, 3);
	char path[192];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/processes/%s/signal", id, proc);
	json_t *body = json_pack("{s:s}", "signal", o->signal ? o->signal : "KILL");
	json_decref(call("POST", path, body));
}

int cmd_proc(const struct command *cmd, struct opts *o)
{
	if (o->npos < 1)
		usage_error(cmd, "proc wants start, ls, output, stdin or kill");
	const char *what = o->pos[0];
	bool starts = !strcmp(what, "start");
	if (o->dashdash >= 0 && !starts)
		usage_error(cmd, "proc %s takes no command (-- is for proc start)", what);
	if (!starts && (o->in || o->env || o->cwd || o->user || o->timeout))
		usage_error(cmd, "--stdin, -e, -w, -u and -t are for proc start");
	if (strcmp(what, "output") && o->wait)
		usage_error(cmd, "--wait is for proc output");
	if (strcmp(what, "stdin") && o->close)
		usage_error(cmd, "--close is for proc stdin");
	if (strcmp(what, "kill") && o->signal)
		usage_error(cmd, "-s/--signal is for proc kill");
	if (starts)
		proc_start(cmd, o);
	else if (!strcmp(what, "ls"))
		proc_ls(cmd, o);
	else if (!strcmp(what, "output"))
		return proc_output(cmd, o);
	else if (!strcmp(what, "stdin"))
		proc_stdin(cmd, o);
	else if (!strcmp(what, "kill"))
		proc_kill(cmd, o);
	else
		usage_error(cmd, "proc: unknown subcommand '%s' (start, ls, output, stdin, kill)", what);
	return 0;
}
