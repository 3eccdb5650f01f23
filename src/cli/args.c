/*
 * args: option parsing for the kiln CLI (see args.h). One table holds every
 * option kiln knows; a command lists the long names of those it takes.
 */
#include "cli/args.h"
#include "cli/cli.h"

#include <errno.h>
#include <limits.h>
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
	{ "csv", 0, NONE }, { "name", 0, VALUE }, { "scope", 0, VALUE }, { "expires", 0, VALUE },
	{ "plan", 0, VALUE }, { "limits", 0, VALUE }, { "key", 0, VALUE }, { "all", 0, NONE },
	{ "persistent", 0, NONE }, { "idle-pause", 0, VALUE }, { "volume", 0, VALUE }, { "size", 0, VALUE },
	{ "port", 0, VALUE }, { "command", 0, VALUE }, { "restart", 0, VALUE },
	{ "idle-seconds", 0, VALUE }, { "ready-timeout", 0, VALUE }, { "tail", 0, VALUE },
	{ "user", 'u', VALUE }, { "replace", 0, NONE }, { "file", 0, VALUE }, { "build-arg", 0, VALUE },
	{ "backup-interval", 0, VALUE }, { "backups-kept", 0, VALUE }, { "force", 0, NONE },
	{ "external", 0, NONE }, { "disk", 0, VALUE }, { "build-net", 0, VALUE },
	{ "vcpus", 0, VALUE }, { "memory", 0, VALUE }, { "last-event-id", 0, VALUE },
};

/* What POST /v1/keys takes as expires_in_seconds: about ten years. */
#define EXPIRES_MAX 316224000LL

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

/* Whether the space-separated list names name as a whole word. */
static bool listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && (p = strstr(p, name)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0))
			return true;
	return false;
}

/* Whether cmd takes the option called name ("count", "lines"...). */
static bool takes(const struct command *cmd, const char *name)
{
	return listed(cmd->opts, name) || !strcmp(name, "help") || !strcmp(name, "json");
}

void args_only(const struct command *cmd, const struct opts *o, const char *sub, const char *allowed)
{
	for (int i = 0; i < o->ngiven; i++)
		if (strcmp(o->given[i], "json") && strcmp(o->given[i], "help") && !listed(allowed, o->given[i]))
			usage_error(cmd, "%s does not take the option --%s", sub, o->given[i]);
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

json_t *volume_spec(const struct command *cmd, const char *what, const char *v)
{
	const char *colon = strchr(v, ':');
	if (!colon || colon == v || colon[1] != '/')
		usage_error(cmd, "%s wants NAME:/PATH[:ro], not '%s'", what, v);
	char *path = strdup(colon + 1);
	size_t n = strlen(path);
	bool ro = n > 3 && !strcmp(path + n - 3, ":ro");
	if (ro)
		path[n - 3] = 0;
	json_t *j = json_pack("{s:s%,s:s,s:b}", "name", v, (size_t)(colon - v), "path", path, "read_only", ro);
	free(path);
	return j;
}

/* --volume NAME:/PATH[:ro] (repeatable) as create's volumes entries;
 * kilnd checks the name and path. */
static void add_volume(const struct command *cmd, json_t **arr, const char *v)
{
	if (!*arr)
		*arr = json_array();
	json_array_append_new(*arr, volume_spec(cmd, "--volume", v));
}

/* --limits LIMIT=N[,LIMIT=N] (repeatable) as an object of integers, or
 * "none": {}, which drops a workspace's own limits. kilnd knows the limits'
 * names and refuses others, naming them. */
static void add_limits(const struct command *cmd, json_t **obj, const char *list)
{
	if (!*obj && !(*obj = json_object()))
		die("out of memory");
	if (!strcmp(list, "none"))
		return;
	if (!*list)
		usage_error(cmd, "--limits wants LIMIT=N[,LIMIT=N] or none, not ''");
	char *dup = strdup(list), *save = NULL;
	if (!dup)
		die("out of memory");
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		if (!eq || eq == t)
			usage_error(cmd, "--limits wants LIMIT=N[,LIMIT=N] or none, not '%s'", t);
		*eq = 0;
		char what[96];
		snprintf(what, sizeof what, "--limits %s", t);
		json_object_set_new(*obj, t, json_integer(args_number(what, eq + 1, 0, LLONG_MAX)));
	}
	free(dup);
}

/* A key's scope: the two POST /v1/keys knows. */
static const char *scope_arg(const struct command *cmd, const char *v)
{
	if (strcmp(v, "full") && strcmp(v, "read"))
		usage_error(cmd, "--scope is full or read, not '%s'", v);
	return v;
}

/* audit's --key: a key's id or the prefix that lists show, a workspace's
 * (key_, kiln_) or an operator's (op_, kilnop_). Checked here because a
 * name, the likely slip, would match nothing and look like an empty log;
 * a whole key is refused rather than sent in a URL, which logs keep. */
static const char *key_filter_arg(const struct command *cmd, const char *v)
{
	if ((is_id(v, "kiln_") && strlen(v) == 5 + 32) || (is_id(v, "kilnop_") && strlen(v) == 7 + 32))
		usage_error(cmd, "--key: that is a whole key, a secret: give its id (key_...) or its prefix "
				 "(what kiln keys list shows)");
	if (!is_id(v, "key_") && !is_id(v, "kiln_") && !is_id(v, "op_") && !is_id(v, "kilnop_"))
		usage_error(cmd, "--key wants a key's id (key_...) or prefix (kiln_...; an operator "
				 "credential's: op_... or kilnop_...), not '%s'", v);
	return v;
}

static void apply(const struct command *cmd, const struct optdef *d, const char *v, struct opts *o)
{
	const char *n = d->name;
	/* Recorded once each (fewer than optdefs), for args_only. */
	int g = 0;
	while (g < o->ngiven && strcmp(o->given[g], n))
		g++;
	if (g == o->ngiven && g < (int)(sizeof o->given / sizeof o->given[0]))
		o->given[o->ngiven++] = n;
	if (!strcmp(n, "template")) o->template = v;
	else if (!strcmp(n, "from-snapshot")) o->snapshot = v;
	else if (!strcmp(n, "ttl")) o->ttl = args_number("--ttl", v, 0, 604800);
	else if (!strcmp(n, "env")) add_kv(cmd, &o->env, v, "-e/--env");
	else if (!strcmp(n, "meta")) add_kv(cmd, &o->meta, v, "--meta");
	else if (!strcmp(n, "json")) o->json = true;
	else if (!strcmp(n, "tree")) o->tree = true;
	else if (!strcmp(n, "persistent")) o->persistent = true;
	else if (!strcmp(n, "idle-pause")) o->idle_pause = args_number("--idle-pause", v, 0, 604800);
	else if (!strcmp(n, "delete-parent")) o->delete_parent = true;
	else if (!strcmp(n, "public")) o->public = true;
	else if (!strcmp(n, "count")) o->n = args_number("-n/--count", v, 1, 64);
	else if (!strcmp(n, "lines")) o->n = args_number("-n/--lines", v, 1, 10000);
	else if (!strcmp(n, "cwd")) o->cwd = v;
	else if (!strcmp(n, "user")) o->user = v;
	else if (!strcmp(n, "replace")) o->replace = true;
	else if (!strcmp(n, "file")) o->file = v;
	else if (!strcmp(n, "build-arg")) {
		if (!strchr(v, '=') || v[0] == '=')
			usage_error(cmd, "--build-arg wants NAME=VALUE, not '%s'", v);
		if (!o->build_args)
			o->build_args = json_array();
		json_array_append_new(o->build_args, json_string(v));
	}
	else if (!strcmp(n, "disk"))
		o->disk = args_number("--disk", v, CLI_TEMPLATE_DISK_MIN_MIB, CLI_TEMPLATE_DISK_MAX_MIB);
	else if (!strcmp(n, "vcpus"))
		o->vcpus = args_number("--vcpus", v, 1, CLI_TEMPLATE_VCPUS_MAX);
	else if (!strcmp(n, "memory"))
		o->memory = args_number("--memory", v, CLI_TEMPLATE_MEMORY_MIN_MIB, CLI_TEMPLATE_MEMORY_MAX_MIB);
	else if (!strcmp(n, "build-net")) {
		/* The syntax of a CIDR is kilnd's to check (its 400 names the bad one). */
		if (!v[0] || v[0] == ',' || v[strlen(v) - 1] == ',' || strstr(v, ",,"))
			usage_error(cmd, "--build-net wants none, internet or CIDR[,CIDR...], not '%s'", v);
		o->build_net = v;
	}
	else if (!strcmp(n, "timeout")) o->timeout = args_number("-t/--timeout", v, 1, 86400);
	else if (!strcmp(n, "stdin")) o->in = true;
	else if (!strcmp(n, "recursive")) o->recursive = true;
	else if (!strcmp(n, "follow")) o->follow = true;
	else if (!strcmp(n, "force")) o->force = true;
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
	else if (!strcmp(n, "last-event-id")) o->last_event_id = v;
	else if (!strcmp(n, "csv")) o->csv = true;
	else if (!strcmp(n, "name")) o->name = v;
	else if (!strcmp(n, "scope")) o->scope = scope_arg(cmd, v);
	else if (!strcmp(n, "expires")) o->expires = args_number("--expires", v, 1, EXPIRES_MAX);
	else if (!strcmp(n, "plan")) o->plan = v;
	else if (!strcmp(n, "limits")) add_limits(cmd, &o->limits, v);
	else if (!strcmp(n, "key")) o->key = key_filter_arg(cmd, v);
	else if (!strcmp(n, "all")) o->all = true;
	else if (!strcmp(n, "external")) o->external = true;
	else if (!strcmp(n, "volume")) add_volume(cmd, &o->volumes, v);
	else if (!strcmp(n, "size")) o->size = args_number("--size", v, 1, 65536);
	else if (!strcmp(n, "port")) o->port = args_number("--port", v, 1, 65535);
	else if (!strcmp(n, "command")) o->command = v;
	else if (!strcmp(n, "restart")) o->restart = v;	/* kilnd names the three it takes */
	else if (!strcmp(n, "idle-seconds")) o->idle = args_number("--idle-seconds", v, 0, LLONG_MAX);
	else if (!strcmp(n, "backup-interval")) o->backup_interval = args_number("--backup-interval", v, 0, LLONG_MAX);
	else if (!strcmp(n, "backups-kept")) o->backups_kept = args_number("--backups-kept", v, 1, 100);
	else if (!strcmp(n, "ready-timeout")) o->ready = args_number("--ready-timeout", v, 1, 600);
	else if (!strcmp(n, "tail")) o->tail = args_number("--tail", v, 0, 10000);
}

void args_parse(const struct command *cmd, int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof *o);
	o->ttl = -1;
	o->idle_pause = -1;
	o->n = -1;
	o->limit = -1;
	o->idle = -1;
	o->tail = -1;
	o->backup_interval = -1;
	o->backups_kept = -1;
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
