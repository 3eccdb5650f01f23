/*
 * cmd_app: apps (docs/api.md "Apps"): a long-running service in a sandbox
 * kiln keeps for it, at a stable URL. kiln apps lists them; kiln app
 * create, get, deploy, logs and rm act on one, by its name or its id.
 */
#include "cli/cli.h"
#include "cli/out.h"

#include <stdlib.h>
#include <string.h>

#define BODY_MAX (64u << 20)	/* an answer read whole, as cmd_exec.c */

/* An app's name or id, for a URL path: kilnd's names are [a-z0-9-] and its
 * ids [a-z0-9_]; anything else could not name one, and must not change the
 * path. */
static const char *app_key(const struct command *cmd, struct opts *o, int i)
{
	if (i >= o->npos)
		usage_error(cmd, "which app? give its name or id (kiln apps lists them)");
	const char *k = o->pos[i];
	if (!*k || strlen(k) > 64 || k[strspn(k, "abcdefghijklmnopqrstuvwxyz0123456789-_")])
		usage_error(cmd, "'%s' is not an app's name or id (kiln apps lists them)", k);
	return k;
}

/* The fields create and deploy share, from the options given. */
static json_t *app_body(const struct command *cmd, struct opts *o)
{
	json_t *body = json_object();
	if (!body)
		die("out of memory");
	if (o->template && o->snapshot)
		usage_error(cmd, "a template and a snapshot exclude each other");
	if (o->port > 0)
		json_object_set_new(body, "port", json_integer(o->port));
	if (o->command)
		json_object_set_new(body, "command", text_arg(cmd, "--command", o->command));
	if (o->template)
		json_object_set_new(body, "template", json_string(o->template));
	if (o->snapshot)
		json_object_set_new(body, "from_snapshot", json_string(o->snapshot));
	if (o->env)
		json_object_set_new(body, "env", o->env);
	o->env = NULL;
	if (o->restart)
		json_object_set_new(body, "restart", json_string(o->restart));
	if (o->idle >= 0)
		json_object_set_new(body, "idle_seconds", json_integer(o->idle));
	if (o->ready > 0)
		json_object_set_new(body, "ready_timeout_seconds", json_integer(o->ready));
	return body;
}

/* create and deploy answer the app: its URL (what one opens), or the JSON. */
static void print_app(struct opts *o, json_t *r)
{
	if (o->json)
		print_json(r);
	else
		printf("%s\n", json_is_string(json_object_get(r, "url")) ? str(r, "url") : str(r, "id"));
}

static int app_create(const struct command *cmd, struct opts *o)
{
	const char *name = app_key(cmd, o, 1);
	need_args(cmd, o, 2, 2);
	if (o->port <= 0)
		usage_error(cmd, "app create wants --port, the port the command listens on");
	if (o->sandbox && (o->template || o->snapshot))
		usage_error(cmd, "--sandbox makes a running sandbox the app: no --template or --from-snapshot with it");
	if (o->sandbox && !is_id(o->sandbox, "sbx_"))
		usage_error(cmd, "--sandbox wants a sandbox id (sbx_...), not '%s'", o->sandbox);
	json_t *body = app_body(cmd, o);
	json_object_set_new(body, "name", json_string(name));
	if (o->sandbox)
		json_object_set_new(body, "sandbox_id", json_string(o->sandbox));
	progress_start(o, "deploying the app (until its command listens)");
	json_t *r = call("POST", "/v1/apps", body);
	progress_end();
	print_app(o, r);
	json_decref(r);
	return 0;
}

static int app_deploy(const struct command *cmd, struct opts *o)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/apps/%s/deploy", app_key(cmd, o, 1));
	need_args(cmd, o, 2, 2);
	progress_start(o, "deploying a new version (until its command listens)");
	json_t *r = call("POST", path, app_body(cmd, o));
	progress_end();
	print_app(o, r);
	json_decref(r);
	return 0;
}

static int app_get(const struct command *cmd, struct opts *o)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/apps/%s", app_key(cmd, o, 1));
	need_args(cmd, o, 2, 2);
	json_t *r = call("GET", path, NULL);
	print_json(r);
	json_decref(r);
	return 0;
}

static int app_rm(const struct command *cmd, struct opts *o)
{
	if (o->npos < 2)
		app_key(cmd, o, 1);		/* the usage error */
	for (int i = 1; i < o->npos; i++)	/* all checked before any is deleted */
		app_key(cmd, o, i);
	for (int i = 1; i < o->npos; i++) {
		char path[128];
		snprintf(path, sizeof path, "/v1/apps/%s", o->pos[i]);
		json_decref(call("DELETE", path, NULL));
	}
	return 0;
}

/* kiln apps, kiln app ls: a table, or the API's JSON. */
int cmd_apps(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, !strcmp(cmd->name, "app"), !strcmp(cmd->name, "app"));
	json_t *r = get_or_print(o, "/v1/apps");
	if (!r)
		return 0;
	struct table t;
	table_init(&t, "NAME ID STATUS VERSION PORT URL CREATED");
	size_t i;
	json_t *a;
	json_array_foreach(json_object_get(r, "apps"), i, a) {
		char created[32], ver[24], port[16];
		snprintf(ver, sizeof ver, "v%lld", (long long)json_integer_value(json_object_get(a, "version")));
		snprintf(port, sizeof port, "%lld", (long long)json_integer_value(json_object_get(a, "port")));
		table_row(&t, str(a, "name"), str(a, "id"), status_word(str(a, "status")), ver, port, str(a, "url"),
			  ago(str(a, "created_at"), created, sizeof created), NULL);
	}
	table_print(&t, stdout);
	json_decref(r);
	return 0;
}

/* ---- logs ------------------------------------------------------------------------------ */

/* What kiln did with the app, dimmed, then the lines of its log as they are. */
static void app_event(json_t *e)
{
	bool colour = use_colour(1);
	printf("%s%s kiln: %s%s\n", colour ? "\033[2m" : "", str(e, "at"), str(e, "text"), colour ? "\033[0m" : "");
}

static int follow_event(const char *event, const char *data, void *arg)
{
	struct opts *o = arg;
	json_t *j = json_loads(data, 0, NULL);
	if (!j)
		return 0;
	if (!strcmp(event, "end")) {
		/* why the stream ended: the app's sandbox stopped (deleted,
		 * replaced by a deploy) */
		if (!o->json)
			fprintf(stderr, "kiln: %s\n", str(j, "reason"));
		json_decref(j);
		return 1;
	}
	if (o->json) {
		json_object_set_new(j, "kind", json_string(event));
		print_json_line(j);
	} else if (!strcmp(event, "event")) {
		app_event(j);
	} else if (!strcmp(event, "line")) {
		printf("%s\n", str(j, "text"));
	}
	fflush(stdout);
	json_decref(j);
	return 0;
}

static int app_logs(const struct command *cmd, struct opts *o)
{
	char base[128], tail[24];
	snprintf(base, sizeof base, "/v1/apps/%s/logs", app_key(cmd, o, 1));
	need_args(cmd, o, 2, 2);
	snprintf(tail, sizeof tail, "%lld", o->tail >= 0 ? o->tail : 100);
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
			json_array_foreach(json_object_get(r, "events"), k, l)
				app_event(l);
			json_array_foreach(json_object_get(r, "lines"), k, l)
				printf("%s\n", json_string_value(l) ? json_string_value(l) : "");
		}
		json_decref(r);
		return 0;
	}
	struct httpc c;
	get_stream(&c, path, "Accept: text/event-stream\r\n");
	int rc = sse_read(&c, follow_event, o);
	httpc_close(&c);
	if (rc < 0)
		die("the log stream broke: %s", c.error);
	return 0;
}

int cmd_app(const struct command *cmd, struct opts *o)
{
	static const struct subcommand subs[] = {
		{ "create", "port command template from-snapshot sandbox env restart idle-seconds ready-timeout",
		  app_create },
		{ "ls", "", cmd_apps },
		{ "get", "", app_get },
		{ "deploy", "port command template from-snapshot env restart idle-seconds ready-timeout", app_deploy },
		{ "logs", "tail follow", app_logs },
		{ "rm", "", app_rm },
	};
	return subcommand_run(cmd, o, "app", 0, subs, sizeof subs / sizeof subs[0]);
}
