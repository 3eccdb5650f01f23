/*
 * util: the kiln CLI's shared helpers: failing with the documented exit
 * statuses (docs/cli.md), one JSON request to kilnd, ids, printing.
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BODY_MAX (64u << 20)

void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("kiln: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(EXIT_KILN);
}

void die_response(int status, const char *body)
{
	json_t *j = body ? json_loads(body, 0, NULL) : NULL;
	json_t *e = json_object_get(j, "error");
	const char *m = json_string_value(json_object_get(e, "message"));
	const char *code = json_string_value(json_object_get(e, "code"));
	if (status == 401 && !target.key[0])
		fprintf(stderr, "kiln: no API key: set KILN_API_KEY (make one with: kilnd keys create --workspace NAME)\n");
	else if (status == 401)
		fprintf(stderr, "kiln: kilnd refused the %s in %s: %s\n", target.key_what, target.key_env,
			m ? m : "unauthorized");
	else if (m)
		fprintf(stderr, "kiln: %s (%s, HTTP %d)\n", m, code ? code : "error", status);
	else
		fprintf(stderr, "kiln: HTTP %d\n", status);
	json_decref(j);
	exit(EXIT_KILN);
}
char *finish(struct httpc *c, int rc)
{
	char *resp = NULL;
	if (rc == 0)
		rc = httpc_read_all(c, &resp, NULL, BODY_MAX);
	if (rc < 0)
		die("%s", c->error);
	httpc_close(c);
	if (c->status >= 300)
		die_response(c->status, resp);
	return resp;
}

void get_stream(struct httpc *c, char *path, const char *header)
{
	if (httpc_start(c, &target, "GET", path, header, NULL, 0, -1, 0) < 0)
		die("%s", c->error);
	free(path);
	if (c->status != 200) {
		char *resp = NULL;
		httpc_read_all(c, &resp, NULL, BODY_MAX);
		die_response(c->status, resp);
	}
}

json_t *call(const char *method, const char *path, json_t *body)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	struct httpc c;
	int rc = httpc_start(&c, &target, method, path, text ? "Content-Type: application/json\r\n" : NULL,
			     text, text ? strlen(text) : 0, -1, 0);
	free(text);
	char *resp = finish(&c, rc);
	json_t *j = c.status == 204 ? NULL : json_loads(resp, 0, NULL);
	if (c.status != 204 && !j)
		die("kilnd answered something that is not JSON");
	free(resp);
	return j;
}

void print_json(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2));
	if (s)
		puts(s);
	free(s);
}

json_t *print_or_keep(const struct opts *o, json_t *r)
{
	if (!o->json)
		return r;
	print_json(r);
	json_decref(r);
	return NULL;
}

json_t *get_or_print(const struct opts *o, const char *path)
{
	return print_or_keep(o, call("GET", path, NULL));
}

void print_json_line(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	if (s)
		puts(s);
	free(s);
}

const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "-";
}

bool is_id(const char *s, const char *prefix)
{
	size_t n = strlen(prefix);
	if (strncmp(s, prefix, n) != 0 || !s[n] || strlen(s) > 40)
		return false;
	for (s += n; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

void need_args(const struct command *cmd, struct opts *o, int min, int max)
{
	if (o->npos < min)
		usage_error(cmd, "%s wants %d argument%s, got %d", cmd->name, min, min == 1 ? "" : "s", o->npos);
	if (max >= 0 && o->npos > max)
		usage_error(cmd, "%s: unexpected argument '%s'", cmd->name, o->pos[max]);
}

const char *need_id(const struct command *cmd, struct opts *o, int i)
{
	if (i >= o->npos)
		usage_error(cmd, "a sandbox id is missing");
	if (!is_id(o->pos[i], "sbx_"))
		usage_error(cmd, "'%s' is not a sandbox id (sbx_...)", o->pos[i]);
	return o->pos[i];
}

int write_all(int fd, const void *p, size_t n)
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

json_t *text_arg(const struct command *cmd, const char *what, const char *s)
{
	json_t *j = json_string(s);
	if (!j)
		usage_error(cmd, "%s is not UTF-8 text", what);
	return j;
}

int subcommand_run(const struct command *cmd, struct opts *o, const char *group, int i,
		   const struct subcommand *subs, size_t n)
{
	char names[256];
	size_t len = 0;
	names[0] = 0;
	for (size_t k = 0; k < n && len < sizeof names; k++)
		len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", k ? ", " : "", subs[k].name);
	if (i >= o->npos)
		usage_error(cmd, "%s wants one of: %s", group, names);
	for (size_t k = 0; k < n; k++) {
		if (strcmp(o->pos[i], subs[k].name))
			continue;
		if (subs[k].opts) {
			char label[128];
			snprintf(label, sizeof label, "%s %s", group, subs[k].name);
			args_only(cmd, o, label, subs[k].opts);
		}
		return subs[k].run(cmd, o);
	}
	usage_error(cmd, "%s: unknown subcommand '%s' (%s)", group, o->pos[i], names);
}
