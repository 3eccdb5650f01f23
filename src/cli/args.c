/*
 * args: option parsing for the kiln CLI (see args.h). One table holds every
 * option kiln knows; a command lists the long names of those it takes.
 */
#include "cli/args.h"
#include "cli/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum arg { NONE, VALUE };

struct optdef {
	const char *name;	/* long name, without -- */
	char short_name;	/* or 0 */
	enum arg arg;
};

static const struct optdef optdefs[] = {
	{ "template", 0, VALUE }, { "from-snapshot", 0, VALUE }, { "ttl", 0, VALUE },
	{ "env", 'e', VALUE }, { "meta", 0, VALUE }, { "json", 0, NONE },
	{ "tree", 0, NONE }, { "public", 0, NONE }, { "count", 'n', VALUE },
	{ "lines", 'n', VALUE }, { "cwd", 'w', VALUE }, { "timeout", 't', VALUE },
	{ "stdin", 'i', NONE }, { "recursive", 'r', NONE }, { "follow", 'f', NONE },
	{ "allow-out", 0, VALUE }, { "deny-out", 0, VALUE }, { "no-internet", 0, NONE },
	{ "internet", 0, NONE }, { "status", 0, VALUE }, { "limit", 0, VALUE },
	{ "cursor", 0, VALUE }, { "help", 'h', NONE }, { "delete-parent", 0, NONE },
	{ "signal", 's', VALUE }, { "wait", 0, VALUE }, { "close", 0, NONE },
	{ "by", 0, VALUE }, { "from", 0, VALUE }, { "to", 0, VALUE }, { "sandbox", 0, VALUE },
	{ "csv", 0, NONE },
};

void usage_error(const struct command *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("kiln: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (cmd)
		fprintf(stderr, "\nusage: kiln %s\n(kiln help %s for more)\n", cmd->synopsis, cmd->name);
	else
		fputs("\n(kiln help for the commands)\n", stderr);
	exit(EXIT_USAGE);
}

long long args_number(const char *what, const char *value, long long min, long long max)
{
	char *end;
	errno = 0;
	long long v = strtoll(value, &end, 10);
	if (!*value || *end || errno || value[0] == ' ' || value[0] == '+' || v < min || v > max) {
		fprintf(stderr, "kiln: %s: '%s' is not a number from %lld to %lld\n", what, value, min, max);
		exit(EXIT_USAGE);
	}
	return v;
}

/* Whether cmd takes the option called name ("count", "lines"...). */
static bool takes(const struct command *cmd, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = cmd->opts; p && (p = strstr(p, name)); p += n)
		if ((p == cmd->opts || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0))
			return true;
	return !strcmp(name, "help") || !strcmp(name, "json");
}

static const struct optdef *find_long(const struct command *cmd, const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof optdefs / sizeof optdefs[0]; i++)
		if (strlen(optdefs[i].name) == len && !strncmp(optdefs[i].name, name, len) &&
		    takes(cmd, optdefs[i].name))
			return &optdefs[i];
	return NULL;
}

static const struct optdef *find_short(const struct command *cmd, char c)
{
	for (size_t i = 0; i < sizeof optdefs / sizeof optdefs[0]; i++)
		if (optdefs[i].short_name == c && takes(cmd, optdefs[i].name))
			return &optdefs[i];
	return NULL;
}

static void add_kv(const struct command *cmd, json_t **obj, const char *kv, const char *what)
{
	const char *eq = strchr(kv, '=');
	if (!eq || eq == kv)
		usage_error(cmd, "%s wants KEY=VALUE, not '%s'", what, kv);
	if (!*obj)
		*obj = json_object();
	char *k = strndup(kv, (size_t)(eq - kv));
	if (!*obj || !k || json_object_set_new(*obj, k, json_string(eq + 1)) < 0)
		die("out of memory");
	free(k);
}

static void add_cidrs(json_t **arr, const char *list)
{
	if (!*arr)
		*arr = json_array();
	/* "a,b" and repeated options both add */
	char *dup = strdup(list), *save = NULL;
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save))
		json_array_append_new(*arr, json_string(t));
	free(dup);
}

static void apply(const struct command *cmd, const struct optdef *d, const char *v, struct opts *o)
{
	const char *n = d->name;
	if (!strcmp(n, "template")) o->template = v;
	else if (!strcmp(n, "from-snapshot")) o->snapshot = v;
	else if (!strcmp(n, "ttl")) o->ttl = args_number("--ttl", v, 0, 604800);
	else if (!strcmp(n, "env")) add_kv(cmd, &o->env, v, "-e/--env");
	else if (!strcmp(n, "meta")) add_kv(cmd, &o->meta, v, "--meta");
	else if (!strcmp(n, "json")) o->json = true;
	else if (!strcmp(n, "tree")) o->tree = true;
	else if (!strcmp(n, "delete-parent")) o->delete_parent = true;
	else if (!strcmp(n, "public")) o->public = true;
	else if (!strcmp(n, "count")) o->n = args_number("-n/--count", v, 1, 64);
	else if (!strcmp(n, "lines")) o->n = args_number("-n/--lines", v, 1, 10000);
	else if (!strcmp(n, "cwd")) o->cwd = v;
	else if (!strcmp(n, "timeout")) o->timeout = args_number("-t/--timeout", v, 1, 86400);
	else if (!strcmp(n, "stdin")) o->in = true;
	else if (!strcmp(n, "recursive")) o->recursive = true;
	else if (!strcmp(n, "follow")) o->follow = true;
	else if (!strcmp(n, "allow-out")) add_cidrs(&o->allow_out, v);
	else if (!strcmp(n, "deny-out")) add_cidrs(&o->deny_out, v);
	else if (!strcmp(n, "no-internet")) o->no_internet = true;
	else if (!strcmp(n, "internet")) o->internet = true;
	else if (!strcmp(n, "status")) o->status = v;
	else if (!strcmp(n, "limit")) o->limit = args_number("--limit", v, 1, 1000);
	else if (!strcmp(n, "cursor")) o->cursor = v;
	else if (!strcmp(n, "help")) o->help = true;
	else if (!strcmp(n, "signal")) o->signal = v;
	else if (!strcmp(n, "wait")) o->wait = args_number("--wait", v, 0, 3600);
	else if (!strcmp(n, "close")) o->close = true;
	else if (!strcmp(n, "by")) o->by = v;
	else if (!strcmp(n, "from")) o->from = v;
	else if (!strcmp(n, "to")) o->to = v;
	else if (!strcmp(n, "sandbox")) o->sandbox = v;
	else if (!strcmp(n, "csv")) o->csv = true;
}

void args_parse(const struct command *cmd, int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof *o);
	o->ttl = -1;
	o->n = -1;
	o->limit = -1;
	o->dashdash = -1;
	o->pos = calloc((size_t)argc + 1, sizeof *o->pos);
	if (!o->pos)
		die("out of memory");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (o->dashdash >= 0 || a[0] != '-' || !a[1]) {	/* "-" is a name (stdin/stdout) */
			o->pos[o->npos++] = argv[i];
			continue;
		}
		if (!strcmp(a, "--")) {
			o->dashdash = o->npos;
			continue;
		}
		if (a[1] == '-') {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t len = eq ? (size_t)(eq - name) : strlen(name);
			const struct optdef *d = find_long(cmd, name, len);
			if (!d)
				usage_error(cmd, "%s does not take the option --%.*s%s", cmd->name, (int)len, name,
					    cmd->passes_argv ? " (put the command after --)" : "");
			const char *v = NULL;
			if (d->arg == VALUE) {
				if (eq)
					v = eq + 1;
				else if (i + 1 < argc)
					v = argv[++i];
				else
					usage_error(cmd, "--%s wants a value", d->name);
			} else if (eq) {
				usage_error(cmd, "--%s takes no value", d->name);
			}
			apply(cmd, d, v, o);
			continue;
		}
		for (const char *s = a + 1; *s; s++) {		/* -ab, -n2, -n 2 */
			const struct optdef *d = find_short(cmd, *s);
			if (!d)
				usage_error(cmd, "%s does not take the option -%c%s", cmd->name, *s,
					    cmd->passes_argv ? " (put the command after --)" : "");
			if (d->arg == NONE) {
				apply(cmd, d, NULL, o);
				continue;
			}
			const char *v = s[1] ? s + 1 : i + 1 < argc ? argv[++i] : NULL;
			if (!v)
				usage_error(cmd, "-%c wants a value", *s);
			apply(cmd, d, v, o);
			break;
		}
	}
	if (o->help) {
		command_help(cmd, stdout);
		exit(0);
	}
	if (o->internet && o->no_internet)
		usage_error(cmd, "--internet and --no-internet exclude each other");
}
