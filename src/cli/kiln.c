/*
 * kiln: the command-line client of kilnd's REST API (docs/api.md).
 * KILN_API_URL (default http://127.0.0.1:7070) and KILN_API_KEY say where
 * and who. Listings print a table, or the API's JSON with --json. `kiln
 * exec` streams the command's output and exits with its exit code.
 */
#include "cli/httpc.h"
#include "cli/shell.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <nettle/base64.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BODY_MAX (64u << 20)

static const char usage_text[] =
	"usage: kiln COMMAND [options]\n"
	"  create [--template T] [--from-snapshot S] [--ttl SECONDS] [--env K=V]... [--meta K=V]...\n"
	"  ls                          sandboxes of this workspace\n"
	"  get ID                      one sandbox\n"
	"  exec [-e K=V] [-w DIR] [-t SECONDS] [-i] ID [--] CMD [ARG...]\n"
	"                              run CMD; its output streams, kiln exits with its status\n"
	"                              (-i sends kiln's stdin; one argument is a shell command)\n"
	"  shell ID [CMD]              a terminal (the login shell, or CMD)\n"
	"  cp SRC DST                  copy a file; one side is ID:PATH, '-' is stdin/stdout\n"
	"  fork ID [-n N] [--tree]     N children of ID (--tree: all in one pause)\n"
	"  snapshot ID                 snapshot a sandbox (memory and disk)\n"
	"  snapshots                   snapshots of this workspace\n"
	"  hibernate ID | wake ID      stop billing for a sandbox, and bring it back\n"
	"  ttl ID SECONDS              set the idle timeout (0: none)\n"
	"  expose ID PORT [--public]   reach guest port PORT through kilnd; prints its URL\n"
	"  ports ID | unexpose ID PORT the exposed ports, and stop exposing one\n"
	"  rm ID...                    delete sandboxes (or snapshots: snap_...)\n"
	"  templates                   the templates and their state\n"
	"  usage                       this workspace's resource usage\n"
	"options: --json (listings and results as the API's JSON)\n"
	"environment: KILN_API_URL (default http://127.0.0.1:7070), KILN_API_KEY\n";

static struct httpc_target target;
static bool json_out;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("kiln: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* Report an error response and exit. */
static void die_response(int status, const char *body)
{
	json_t *j = body ? json_loads(body, 0, NULL) : NULL;
	json_t *e = json_object_get(j, "error");
	const char *m = json_string_value(json_object_get(e, "message"));
	const char *code = json_string_value(json_object_get(e, "code"));
	if (m)
		fprintf(stderr, "kiln: %s (%s, HTTP %d)\n", m, code ? code : "error", status);
	else
		fprintf(stderr, "kiln: HTTP %d\n", status);
	json_decref(j);
	exit(status == 404 ? 3 : status == 401 ? 4 : 1);
}

/* One request with a JSON answer (NULL for 204). Exits on errors. */
static json_t *call(const char *method, const char *path, json_t *body)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	struct httpc c;
	int rc = httpc_start(&c, &target, method, path, text ? "Content-Type: application/json\r\n" : NULL,
			     text, text ? strlen(text) : 0, -1, 0);
	free(text);
	char *resp = NULL;
	if (rc == 0)
		rc = httpc_read_all(&c, &resp, NULL, BODY_MAX);
	if (rc < 0)
		die("%s", c.error);
	httpc_close(&c);
	if (c.status >= 300)
		die_response(c.status, resp);
	json_t *j = c.status == 204 ? NULL : json_loads(resp, 0, NULL);
	if (c.status != 204 && !j)
		die("kilnd answered something that is not JSON");
	free(resp);
	return j;
}

static void print_json(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2));
	if (s)
		puts(s);
	free(s);
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "-";
}

static bool is_id(const char *s, const char *prefix)
{
	size_t n = strlen(prefix);
	if (strncmp(s, prefix, n) != 0 || !s[n] || strlen(s) > 40)
		return false;
	for (s += n; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

static const char *need_id(int argc, char **argv, int i)
{
	if (i >= argc)
		die("a sandbox id is missing (see kiln --help)");
	if (!is_id(argv[i], "sbx_"))
		die("'%s' is not a sandbox id (sbx_...)", argv[i]);
	return argv[i];
}

/* Add "K=V" to an object (env, metadata), made on first use. */
static void add_kv(json_t **obj, const char *kv, const char *what)
{
	const char *eq = strchr(kv, '=');
	if (!eq || eq == kv)
		die("%s wants KEY=VALUE, not '%s'", what, kv);
	if (!*obj && !(*obj = json_object()))
		die("out of memory");
	char *k = strndup(kv, eq - kv);
	json_object_set_new(*obj, k, json_string(eq + 1));
	free(k);
}

/* Options shared by the commands: -n N, --tree, -e, -w, -t, -i, --json... */
struct opts {
	const char *template, *snapshot;
	long ttl, count, timeout;
	bool tree, in, public;
	const char *cwd;
	json_t *env, *meta;		/* from -e and --meta, or NULL */
};

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "template", required_argument, 0, 'T' }, { "from-snapshot", required_argument, 0, 'S' },
		{ "ttl", required_argument, 0, 'l' }, { "env", required_argument, 0, 'e' },
		{ "meta", required_argument, 0, 'm' }, { "json", no_argument, 0, 'j' },
		{ "tree", no_argument, 0, 'r' }, { "public", no_argument, 0, 'P' },
		{ "help", no_argument, 0, 'h' }, { 0 },
	};
	o->ttl = -1;
	o->count = 1;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+n:e:w:t:ijT:", lo, NULL)) != -1) {
		switch (c) {
		case 'T': o->template = optarg; break;
		case 'S': o->snapshot = optarg; break;
		case 'l': o->ttl = strtol(optarg, NULL, 10); break;
		case 'n': o->count = strtol(optarg, NULL, 10); break;
		case 'e': add_kv(&o->env, optarg, "-e"); break;
		case 'm': add_kv(&o->meta, optarg, "--meta"); break;
		case 'w': o->cwd = optarg; break;
		case 't': o->timeout = strtol(optarg, NULL, 10); break;
		case 'i': o->in = true; break;
		case 'j': json_out = true; break;
		case 'r': o->tree = true; break;
		case 'P': o->public = true; break;
		case 'h': fputs(usage_text, stdout); exit(0);
		default: fputs(usage_text, stderr); exit(2);
		}
	}
	return optind;
}

/* ---- commands ------------------------------------------------------------------ */

static int cmd_create(int argc, char **argv)
{
	struct opts o = { 0 };
	parse_opts(argc, argv, &o);
	json_t *body = json_object();
	if (o.snapshot)
		json_object_set_new(body, "from_snapshot", json_string(o.snapshot));
	else if (o.template)
		json_object_set_new(body, "template", json_string(o.template));
	if (o.ttl >= 0)
		json_object_set_new(body, "ttl_seconds", json_integer(o.ttl));
	if (o.env)
		json_object_set_new(body, "env", o.env);
	if (o.meta)
		json_object_set_new(body, "metadata", o.meta);
	json_t *r = call("POST", "/v1/sandboxes", body);
	if (json_out)
		print_json(r);
	else
		printf("%s\n", str(r, "id"));
	json_decref(r);
	return 0;
}

static void row(json_t *s)
{
	json_t *ready = json_object_get(s, "ready_ms");
	char rm[32] = "-";
	if (json_is_number(ready))
		snprintf(rm, sizeof rm, "%.0f", json_number_value(ready));
	printf("%-26s %-11s %-9s %-25s %8s\n", str(s, "id"), str(s, "status"), str(s, "template"),
	       str(s, "created_at"), rm);
}

static int cmd_ls(int argc, char **argv)
{
	struct opts o = { 0 };
	parse_opts(argc, argv, &o);
	json_t *r = call("GET", "/v1/sandboxes", NULL);
	if (json_out) {
		print_json(r);
	} else {
		printf("%-26s %-11s %-9s %-25s %8s\n", "ID", "STATUS", "TEMPLATE", "CREATED", "READY_MS");
		size_t i;
		json_t *s;
		json_array_foreach(json_object_get(r, "sandboxes"), i, s)
			row(s);
	}
	json_decref(r);
	return 0;
}

static int cmd_get(int argc, char **argv)
{
	struct opts o = { 0 };
	int i = parse_opts(argc, argv, &o);
	char path[128];
	snprintf(path, sizeof path, "/v1/sandboxes/%s", need_id(argc, argv, i));
	json_t *r = call("GET", path, NULL);
	print_json(r);
	json_decref(r);
	return 0;
}

/* Server-Sent Events from exec/stream: output to our stdout/stderr. */
static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w, n -= (size_t)w;
	}
	return 0;
}

static int sse_event(const char *event, const char *data, int *exit_code)
{
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
		*exit_code = (int)json_integer_value(json_object_get(j, "exit_code"));
		if (json_is_true(json_object_get(j, "timed_out")))
			fprintf(stderr, "kiln: the command timed out\n");
	} else if (!strcmp(event, "error")) {
		fprintf(stderr, "kiln: %s\n", str(j, "message"));
		*exit_code = 255;
	}
	json_decref(j);
	return 0;
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
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	b[n] = 0;
	if (strlen(b) != n)
		die("stdin holds NUL bytes; use kiln cp for binary data");
	return b;
}

static int cmd_exec(int argc, char **argv)
{
	struct opts o = { 0 };
	int i = parse_opts(argc, argv, &o);
	const char *id = need_id(argc, argv, i++);
	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	if (i >= argc)
		die("exec: no command given");
	json_t *body = json_object();
	if (argc - i == 1) {
		json_object_set_new(body, "cmd", json_string(argv[i]));
	} else {
		json_t *a = json_array();
		for (; i < argc; i++)
			json_array_append_new(a, json_string(argv[i]));
		json_object_set_new(body, "argv", a);
	}
	if (o.env)
		json_object_set_new(body, "env", o.env);
	if (o.cwd)
		json_object_set_new(body, "cwd", json_string(o.cwd));
	if (o.timeout > 0)
		json_object_set_new(body, "timeout_seconds", json_integer(o.timeout));
	if (o.in) {
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
		die_response(c.status, resp);
	}
	/* Lines of at most 4 MiB (a 64 KiB chunk as JSON is far less). */
	size_t cap = 4u << 20, len = 0;
	char *line = malloc(cap), event[32] = "message", *data = NULL;
	int exit_code = -1;
	char buf[16384];
	long n;
	if (!line)
		die("out of memory");
	while (exit_code < 0 && (n = httpc_read(&c, buf, sizeof buf)) > 0) {
		for (long k = 0; k < n; k++) {
			char ch = buf[k];
			if (ch != '\n') {
				if (len + 1 < cap)
					line[len++] = ch;
				continue;
			}
			line[len] = 0;
			if (len == 0) {
				if (data)
					sse_event(event, data, &exit_code);
				free(data);
				data = NULL;
				snprintf(event, sizeof event, "message");
			} else if (!strncmp(line, "event: ", 7)) {
				snprintf(event, sizeof event, "%s", line + 7);
			} else if (!strncmp(line, "data: ", 6)) {
				free(data);
				data = strdup(line + 6);
			}
			len = 0;
		}
	}
	free(line);
	free(data);
	httpc_close(&c);
	if (exit_code < 0)
		die("the stream ended before the command did%s%s", c.error[0] ? ": " : "", c.error);
	return exit_code;
}

static int cmd_shell(int argc, char **argv)
{
	struct opts o = { 0 };
	int i = parse_opts(argc, argv, &o);
	const char *id = need_id(argc, argv, i);
	return shell_run(&target, id, i + 1 < argc ? argv[i + 1] : NULL);
}

/* ID:PATH, or NULL for a local path. */
static const char *remote(const char *arg, char id[48])
{
	const char *colon = strchr(arg, ':');
	if (!colon || colon - arg >= 48)
		return NULL;
	memcpy(id, arg, colon - arg);
	id[colon - arg] = 0;
	return is_id(id, "sbx_") ? colon + 1 : NULL;
}

static int cmd_cp(int argc, char **argv)
{
	struct opts o = { 0 };
	int i = parse_opts(argc, argv, &o);
	if (argc - i != 2)
		die("cp wants SRC DST (one of them ID:PATH)");
	char sid[48], did[48], path[8192];
	const char *src = remote(argv[i], sid), *dst = remote(argv[i + 1], did);
	if (!!src == !!dst)
		die("cp: exactly one side must be ID:PATH");
	struct httpc c;
	if (dst) {
		int fd = strcmp(argv[i], "-") ? open(argv[i], O_RDONLY | O_CLOEXEC) : 0;
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0)
			die("%s: %s", argv[i], strerror(errno));
		char *in = NULL, *esc = httpc_escape(dst);
		size_t inlen = 0;
		if (!S_ISREG(st.st_mode)) {	/* a pipe: read it whole to know the length */
			in = read_stdin(1u << 30);
			inlen = strlen(in);
		}
		snprintf(path, sizeof path, "/v1/sandboxes/%s/files?path=%s&mode=%04o", did, esc,
			 S_ISREG(st.st_mode) ? (unsigned)(st.st_mode & 07777) : 0644u);
		free(esc);
		int rc = in ? httpc_start(&c, &target, "PUT", path, NULL, in, inlen, -1, 0)
			    : httpc_start(&c, &target, "PUT", path, NULL, NULL, 0, fd, st.st_size);
		free(in);
		char *resp = NULL;
		if (rc == 0)
			rc = httpc_read_all(&c, &resp, NULL, BODY_MAX);
		if (rc < 0)
			die("%s", c.error);
		if (c.status >= 300)
			die_response(c.status, resp);
		free(resp);
		httpc_close(&c);
		return 0;
	}
	char *esc = httpc_escape(src);
	snprintf(path, sizeof path, "/v1/sandboxes/%s/files?path=%s", sid, esc);
	free(esc);
	if (httpc_start(&c, &target, "GET", path, NULL, NULL, 0, -1, 0) < 0)
		die("%s", c.error);
	if (c.status != 200) {
		char *resp = NULL;
		httpc_read_all(&c, &resp, NULL, BODY_MAX);
		die_response(c.status, resp);
	}
	int fd = strcmp(argv[i + 1], "-") ? open(argv[i + 1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : 1;
	if (fd < 0)
		die("%s: %s", argv[i + 1], strerror(errno));
	char buf[65536];
	long n;
	while ((n = httpc_read(&c, buf, sizeof buf)) > 0)
		if (write_all(fd, buf, (size_t)n) < 0)
			die("%s: %s", argv[i + 1], strerror(errno));
	if (n < 0)
		die("%s", c.error);
	httpc_close(&c);
	return fd != 1 && close(fd) < 0 ? 1 : 0;
}

static int cmd_fork(int argc, char **argv)
{
	struct opts o = { 0 };
	int i = parse_opts(argc, argv, &o);
	const char *id = need_id(argc, argv, i);
	char path[128];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/%s", id, o.tree ? "fork_tree" : "fork");
	json_t *r = call("POST", path, json_pack("{s:i}", "count", (int)o.count));
	if (json_out) {
		print_json(r);
	} else {
		size_t k;
		json_t *s;
		json_array_foreach(json_object_get(r, "sandboxes"), k, s)
			printf("%s\n", str(s, "id"));
		if (json_object_get(r, "error"))
			fprintf(stderr, "kiln: %s\n", str(r, "error"));
	}
	int failed = json_object_get(r, "error") != NULL;
	json_decref(r);
	return failed;
}

/* POST /v1/sandboxes/ID/ACTION with an empty object; prints the result. */
static int simple(int argc, char **argv, const char *action, const char *key)
{
	struct opts o = { 0 };
	int i = parse_opts(argc, argv, &o);
	char path[128];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/%s", need_id(argc, argv, i), action);
	json_t *r = call("POST", path, json_object());
	if (json_out)
		print_json(r);
	else
		printf("%s\n", str(r, key));
	json_decref(r);
	return 0;
}

static int cmd_ttl(int argc, char **argv)
{
	struct opts o = { 0 };
	int i = parse_opts(argc, argv, &o);
	const char *id = need_id(argc, argv, i);
	if (i + 1 >= argc)
		die("ttl wants ID SECONDS");
	char path[128];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/lifecycle", id);
	json_t *r = call("PATCH", path, json_pack("{s:I}", "ttl_seconds",
						  (json_int_t)strtoll(argv[i + 1], NULL, 10)));
	if (json_out)
		print_json(r);
	json_decref(r);
	return 0;
}

/* expose ID PORT [--public], unexpose ID PORT, ports ID */
static int cmd_ports(int argc, char **argv, const char *what)
{
	struct opts o = { 0 };
	int i = parse_opts(argc, argv, &o);
	const char *id = need_id(argc, argv, i);
	bool list = !strcmp(what, "ports");
	if (!list && i + 1 >= argc)
		die("%s wants ID PORT", what);
	char path[160];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/ports", id);
	json_t *r;
	if (list) {
		r = call("GET", path, NULL);
	} else if (!strcmp(what, "unexpose")) {
		size_t n = strlen(path);
		snprintf(path + n, sizeof path - n, "/%s", argv[i + 1]);
		call("DELETE", path, NULL);
		return 0;
	} else {
		char *end;
		long port = strtol(argv[i + 1], &end, 10);
		if (*end || port < 1 || port > 65535)
			die("'%s' is not a TCP port (1 to 65535)", argv[i + 1]);
		r = call("POST", path, json_pack("{s:i,s:b}", "port", (int)port, "public", o.public));
	}
	if (json_out) {
		print_json(r);
	} else if (list) {
		size_t k;
		json_t *p;
		printf("%-6s %-7s %s\n", "PORT", "PUBLIC", "URL");
		json_array_foreach(json_object_get(r, "ports"), k, p)
			printf("%-6lld %-7s %s\n", (long long)json_integer_value(json_object_get(p, "port")),
			       json_is_true(json_object_get(p, "public")) ? "yes" : "no", str(p, "url"));
	} else {
		printf("%s\n", str(r, "url"));
	}
	json_decref(r);
	return 0;
}

static int cmd_rm(int argc, char **argv)
{
	struct opts o = { 0 };
	int i = parse_opts(argc, argv, &o);
	if (i >= argc)
		die("rm wants one or more ids");
	for (; i < argc; i++) {
		char path[128];
		bool snap = is_id(argv[i], "snap_");
		if (!snap)
			need_id(argc, argv, i);
		snprintf(path, sizeof path, "/v1/%s/%s", snap ? "snapshots" : "sandboxes", argv[i]);
		call("DELETE", path, NULL);
	}
	return 0;
}

static int cmd_list(int argc, char **argv, const char *path, const char *key)
{
	struct opts o = { 0 };
	parse_opts(argc, argv, &o);
	json_t *r = call("GET", path, NULL);
	if (json_out) {
		print_json(r);
		json_decref(r);
		return 0;
	}
	size_t i;
	json_t *s;
	if (!strcmp(key, "templates")) {
		printf("%-10s %-10s %-8s %5s %7s  %s\n", "NAME", "STATUS", "VERSION", "VCPUS", "MEM_MIB", "DESCRIPTION");
		json_array_foreach(json_object_get(r, key), i, s) {
			json_t *v = json_object_get(s, "version");
			char ver[16] = "-";
			if (json_is_integer(v))
				snprintf(ver, sizeof ver, "v%lld", (long long)json_integer_value(v));
			printf("%-10s %-10s %-8s %5lld %7lld  %s\n", str(s, "name"), str(s, "status"), ver,
			       (long long)json_integer_value(json_object_get(s, "vcpus")),
			       (long long)json_integer_value(json_object_get(s, "memory_mib")), str(s, "description"));
		}
	} else {
		printf("%-26s %-26s %-9s %s\n", "ID", "SANDBOX", "TEMPLATE", "CREATED");
		json_array_foreach(json_object_get(r, key), i, s)
			printf("%-26s %-26s %-9s %s\n", str(s, "id"), str(s, "sandbox_id"), str(s, "template"),
			       str(s, "created_at"));
	}
	json_decref(r);
	return 0;
}

static int cmd_usage(int argc, char **argv)
{
	struct opts o = { 0 };
	parse_opts(argc, argv, &o);
	json_t *r = call("GET", "/v1/usage", NULL);
	if (json_out) {
		print_json(r);
	} else {
		printf("cpu_seconds        %.3f\n", json_number_value(json_object_get(r, "cpu_seconds")));
		printf("memory_gib_hours   %.6f\n", json_number_value(json_object_get(r, "memory_gib_hours")));
		printf("running_seconds    %.1f\n", json_number_value(json_object_get(r, "running_seconds")));
		printf("sandboxes          %lld (%lld live)\n",
		       (long long)json_integer_value(json_object_get(r, "sandboxes")),
		       (long long)json_integer_value(json_object_get(r, "live_sandboxes")));
	}
	json_decref(r);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	char err[256];
	if (httpc_target_env(&target, err, sizeof err) < 0)
		die("%s", err);
	const char *cmd = argv[1];
	argc--, argv++;
	if (!strcmp(cmd, "create")) return cmd_create(argc, argv);
	if (!strcmp(cmd, "ls")) return cmd_ls(argc, argv);
	if (!strcmp(cmd, "get")) return cmd_get(argc, argv);
	if (!strcmp(cmd, "exec")) return cmd_exec(argc, argv);
	if (!strcmp(cmd, "shell")) return cmd_shell(argc, argv);
	if (!strcmp(cmd, "cp")) return cmd_cp(argc, argv);
	if (!strcmp(cmd, "fork")) return cmd_fork(argc, argv);
	if (!strcmp(cmd, "snapshot")) return simple(argc, argv, "snapshot", "id");
	if (!strcmp(cmd, "hibernate")) return simple(argc, argv, "hibernate", "status");
	if (!strcmp(cmd, "wake")) return simple(argc, argv, "wake", "status");
	if (!strcmp(cmd, "ttl")) return cmd_ttl(argc, argv);
	if (!strcmp(cmd, "rm")) return cmd_rm(argc, argv);
	if (!strcmp(cmd, "expose") || !strcmp(cmd, "unexpose") || !strcmp(cmd, "ports"))
		return cmd_ports(argc, argv, cmd);
	if (!strcmp(cmd, "snapshots")) return cmd_list(argc, argv, "/v1/snapshots", "snapshots");
	if (!strcmp(cmd, "templates")) return cmd_list(argc, argv, "/v1/templates", "templates");
	if (!strcmp(cmd, "usage")) return cmd_usage(argc, argv);
	fprintf(stderr, "kiln: unknown command '%s'\n%s", cmd, usage_text);
	return 2;
}
