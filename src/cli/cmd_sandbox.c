/*
 * cmd_sandbox: the commands about sandboxes as a whole: create, ls, get,
 * fork, snapshot, hibernate, wake, ttl, rm; and the workspace's listings
 * (snapshots, templates, usage).
 */
#include "cli/cli.h"
#include "cli/out.h"

#include <stdlib.h>
#include <string.h>

/* The egress fields of create and network, from the options. */
static void put_policy(json_t *body, struct opts *o)
{
	if (o->allow_out)
		json_object_set_new(body, "allow_out", o->allow_out);
	if (o->deny_out)
		json_object_set_new(body, "deny_out", o->deny_out);
	if (o->no_internet)
		json_object_set_new(body, "allow_internet", json_false());
	else if (o->internet)
		json_object_set_new(body, "allow_internet", json_true());
	o->allow_out = o->deny_out = NULL;
}

int cmd_create(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 0, 1);
	const char *t = o->template, *snap = o->snapshot;
	if (o->npos == 1) {
		const char *p = o->pos[0];
		const char **slot = is_id(p, "snap_") ? &snap : &t;
		if (*slot && strcmp(*slot, p))
			usage_error(cmd, "'%s' and '%s' both name what to create from", p, *slot);
		*slot = p;
	}
	if (t && snap)
		usage_error(cmd, "a template and a snapshot exclude each other");
	json_t *body = json_object();
	if (snap)
		json_object_set_new(body, "from_snapshot", json_string(snap));
	else if (t)
		json_object_set_new(body, "template", json_string(t));
	if (o->ttl >= 0)
		json_object_set_new(body, "ttl_seconds", json_integer(o->ttl));
	if (o->persistent)
		json_object_set_new(body, "persistent", json_true());
	if (o->idle_pause >= 0)
		json_object_set_new(body, "idle_pause_seconds", json_integer(o->idle_pause));
	if (o->disk)
		json_object_set_new(body, "disk_mib", json_integer(o->disk));
	if (o->env)
		json_object_set_new(body, "env", o->env);
	if (o->meta)
		json_object_set_new(body, "metadata", o->meta);
	if (o->volumes)
		json_object_set_new(body, "volumes", o->volumes);
	o->env = o->meta = o->volumes = NULL;
	put_policy(body, o);
	progress_start(o, "creating a sandbox");
	json_t *r = call("POST", "/v1/sandboxes", body);
	progress_end();
	if (o->json)
		print_json(r);
	else
		printf("%s\n", str(r, "id"));
	json_decref(r);
	return 0;
}

/* GET /v1/sandboxes with the filters; every page unless --limit. */
int cmd_ls(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 0, 0);
	json_t *all = json_array(), *next = json_null();
	char *cursor = o->cursor ? strdup(o->cursor) : NULL;
	for (;;) {
		struct query q = { 0 };
		query_add(&q, "status", o->status);
		query_add(&q, "template", o->template);
		const char *k;
		json_t *v;
		json_object_foreach(o->meta, k, v) {
			char name[300];
			snprintf(name, sizeof name, "metadata.%s", k);
			query_add(&q, name, json_string_value(v));
		}
		char lim[24];
		snprintf(lim, sizeof lim, "%lld", o->limit > 0 ? o->limit : 1000);
		query_add(&q, "limit", lim);
		query_add(&q, "cursor", cursor);
		char *path = query_path("/v1/sandboxes", &q);
		json_t *r = call("GET", path, NULL);
		free(path);
		json_array_extend(all, json_object_get(r, "sandboxes"));
		const char *nc = json_string_value(json_object_get(r, "next_cursor"));
		free(cursor);
		cursor = nc ? strdup(nc) : NULL;
		json_decref(r);
		if (!cursor || o->limit > 0)
			break;
	}
	if (cursor) {
		json_decref(next);
		next = json_string(cursor);
	}
	if (o->json) {
		json_t *r = json_pack("{s:o,s:o}", "sandboxes", all, "next_cursor", next);
		print_json(r);
		json_decref(r);
	} else {
		struct table t;
		table_init(&t, "ID STATUS TEMPLATE CREATED READY_MS EXPIRES");
		size_t i;
		json_t *s;
		json_array_foreach(all, i, s) {
			char ready[32] = "-";
			json_t *rm = json_object_get(s, "ready_ms");
			if (json_is_number(rm))
				snprintf(ready, sizeof ready, "%.0f", json_number_value(rm));
			char created[32], expires[32];
			table_row(&t, str(s, "id"), status_word(str(s, "status")), str(s, "template"),
				  ago(str(s, "created_at"), created, sizeof created), ready,
				  ago(str(s, "expires_at"), expires, sizeof expires), NULL);
		}
		table_print(&t, stdout);
		if (cursor)
			fprintf(stderr, "more: kiln ls --limit %lld --cursor %s\n", o->limit, cursor);
		json_decref(all);
		json_decref(next);
	}
	free(cursor);
	return 0;
}

int cmd_get(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 1, 1);
	char path[128];
	snprintf(path, sizeof path, "/v1/sandboxes/%s", need_id(cmd, o, 0));
	json_t *r = call("GET", path, NULL);
	print_json(r);
	json_decref(r);
	return 0;
}

int cmd_fork(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 1, 1);
	const char *id = need_id(cmd, o, 0);
	char path[128];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/%s", id, o->tree ? "fork_tree" : "fork");
	progress_start(o, "forking");
	json_t *r = call("POST", path, json_pack("{s:I}", "count", (json_int_t)(o->n > 0 ? o->n : 1)));
	progress_end();
	if (o->json) {
		print_json(r);
	} else {
		size_t k;
		json_t *s;
		json_array_foreach(json_object_get(r, "sandboxes"), k, s)
			printf("%s\n", str(s, "id"));
	}
	int failed = json_object_get(r, "error") != NULL;
	if (failed)
		fprintf(stderr, "kiln: %s\n", str(r, "error"));
	json_decref(r);
	return failed ? EXIT_KILN : 0;
}

int cmd_promote(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 1, 1);
	char path[128];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/promote", need_id(cmd, o, 0));
	json_t *r = call("POST", path, json_pack("{s:b}", "delete_parent", o->delete_parent));
	if (o->json) {
		print_json(r);
	} else {
		size_t k;
		json_t *s;
		json_array_foreach(json_object_get(r, "deleted"), k, s)
			printf("%s\n", json_string_value(s));
		if (json_is_true(json_object_get(r, "parent_deleted")))
			printf("%s\n", str(r, "parent"));
	}
	json_t *failed = json_object_get(r, "failed");
	size_t k;
	json_t *f;
	json_array_foreach(failed, k, f)
		fprintf(stderr, "kiln: %s was not deleted: %s\n", str(f, "id"), str(f, "error"));
	int rc = json_array_size(failed) ? EXIT_KILN : 0;
	json_decref(r);
	return rc;
}

/* POST /v1/sandboxes/ID/ACTION with an empty object; prints one field. */
static int simple(const struct command *cmd, struct opts *o, const char *action, const char *key)
{
	need_args(cmd, o, 1, 1);
	char path[128];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/%s", need_id(cmd, o, 0), action);
	progress_start(o, action);
	json_t *r = call("POST", path, json_object());
	progress_end();
	if (o->json)
		print_json(r);
	else
		printf("%s\n", str(r, key));
	json_decref(r);
	return 0;
}

int cmd_snapshot(const struct command *cmd, struct opts *o) { return simple(cmd, o, "snapshot", "id"); }
int cmd_hibernate(const struct command *cmd, struct opts *o) { return simple(cmd, o, "hibernate", "status"); }
int cmd_wake(const struct command *cmd, struct opts *o) { return simple(cmd, o, "wake", "status"); }
int cmd_pause(const struct command *cmd, struct opts *o) { return simple(cmd, o, "pause", "status"); }
int cmd_resume(const struct command *cmd, struct opts *o) { return simple(cmd, o, "resume", "status"); }

/* PATCH /v1/sandboxes/ID/lifecycle with one field (kiln persistent, ttl,
 * idle-pause): the answer to print, or NULL when --json printed it. */
static json_t *lifecycle_set(struct opts *o, const char *id, const char *field, json_t *value)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/lifecycle", id);
	json_t *body = json_object();
	if (!body || json_object_set_new(body, field, value) < 0)
		die("out of memory");
	return print_or_keep(o, call("PATCH", path, body));
}

/* kiln ttl|idle-pause ID SECONDS: what sets field (usage names it). */
static json_t *lifecycle_seconds(const struct command *cmd, struct opts *o, const char *usage, const char *field,
				 const char **id, long long *secs)
{
	need_args(cmd, o, 2, 2);
	*id = need_id(cmd, o, 0);
	*secs = args_number(usage, o->pos[1], 0, 604800);
	return lifecycle_set(o, *id, field, json_integer((json_int_t)*secs));
}

int cmd_persistent(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 2, 2);
	const char *id = need_id(cmd, o, 0), *v = o->pos[1];
	if (strcmp(v, "on") && strcmp(v, "off"))
		usage_error(cmd, "persistent takes on or off, not '%s'", v);
	json_t *r = lifecycle_set(o, id, "persistent", json_boolean(!strcmp(v, "on")));
	if (r)
		printf("%s persistent %s, when idle %s\n", id, json_is_true(json_object_get(r, "persistent")) ? "on" : "off",
		       str(json_object_get(r, "ttl_rule"), "when_idle"));
	json_decref(r);
	return 0;
}

int cmd_ttl(const struct command *cmd, struct opts *o)
{
	const char *id;
	long long secs;
	json_t *r = lifecycle_seconds(cmd, o, "ttl SECONDS", "ttl_seconds", &id, &secs);
	if (r)
		printf("%s ttl %llds, expires %s\n", id, secs, str(r, "expires_at"));
	json_decref(r);
	return 0;
}

int cmd_idle_pause(const struct command *cmd, struct opts *o)
{
	const char *id;
	long long secs;
	json_t *r = lifecycle_seconds(cmd, o, "idle-pause SECONDS", "idle_pause_seconds", &id, &secs);
	if (r && secs)
		printf("%s pauses after %llds idle\n", id, secs);
	else if (r)
		printf("%s does not pause when idle\n", id);
	json_decref(r);
	return 0;
}

int cmd_rm(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 1, -1);
	for (int i = 0; i < o->npos; i++)	/* check them all before deleting any */
		if (!is_id(o->pos[i], "snap_"))
			need_id(cmd, o, i);
	for (int i = 0; i < o->npos; i++) {
		char path[128];
		snprintf(path, sizeof path, "/v1/%s/%s", is_id(o->pos[i], "snap_") ? "snapshots" : "sandboxes",
			 o->pos[i]);
		json_decref(call("DELETE", path, NULL));
	}
	return 0;
}

int cmd_snapshots(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 0, 0);
	json_t *r = call("GET", "/v1/snapshots", NULL);
	if (o->json) {
		print_json(r);
	} else {
		struct table t;
		table_init(&t, "ID SANDBOX TEMPLATE CREATED");
		size_t i;
		json_t *s;
		json_array_foreach(json_object_get(r, "snapshots"), i, s) {
			char created[32];
			table_row(&t, str(s, "id"), str(s, "sandbox_id"), str(s, "template"),
				  ago(str(s, "created_at"), created, sizeof created), NULL);
		}
		table_print(&t, stdout);
	}
	json_decref(r);
	return 0;
}

/* kiln volume create|ls|rm (docs/api.md "Volumes"). */
static int volume_create(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 2, 2);
	if (!o->size)
		usage_error(cmd, "volume create wants --size MIB");
	json_t *r = call("POST", "/v1/volumes", json_pack("{s:s,s:I}", "name", o->pos[1], "size_mib",
							 (json_int_t)o->size));
	if (o->json)
		print_json(r);
	else
		printf("%s\n", str(r, "id"));
	json_decref(r);
	return 0;
}

static int volume_ls(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 1, 1);
	json_t *r = get_or_print(o, "/v1/volumes");
	if (!r)
		return 0;
	struct table t;
	table_init(&t, "ID NAME SIZE_MIB CREATED ATTACHED_TO");
	size_t i, k;
	json_t *v, *a;
	json_array_foreach(json_object_get(r, "volumes"), i, v) {
		char created[32], size[24], att[512] = "-";
		size_t len = 0;
		json_array_foreach(json_object_get(v, "attached_to"), k, a)
			if (len < sizeof att)
				len += snprintf(att + len, sizeof att - len, "%s%s:%s%s", k ? "," : "", str(a, "sandbox_id"),
						str(a, "path"), json_is_true(json_object_get(a, "read_only")) ? ":ro" : "");
		snprintf(size, sizeof size, "%lld", (long long)json_integer_value(json_object_get(v, "size_mib")));
		table_row(&t, str(v, "id"), str(v, "name"), size, ago(str(v, "created_at"), created, sizeof created),
			  att, NULL);
	}
	table_print(&t, stdout);
	json_decref(r);
	return 0;
}

static int volume_rm(const struct command *cmd, struct opts *o)
{
	if (o->npos < 2)
		usage_error(cmd, "volume rm wants the id of a volume (vol_...: kiln volume ls shows them)");
	for (int i = 1; i < o->npos; i++)
		if (!is_id(o->pos[i], "vol_"))
			usage_error(cmd, "'%s' is not a volume id (vol_...: kiln volume ls shows them)", o->pos[i]);
	for (int i = 1; i < o->npos; i++) {
		char path[160];
		snprintf(path, sizeof path, "/v1/volumes/%s", o->pos[i]);
		json_decref(call("DELETE", path, NULL));
	}
	return 0;
}

/* kiln volume attach SANDBOX NAME:/PATH[:ro], detach SANDBOX NAME. */
static int volume_attach(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 3, 3);
	if (!is_id(o->pos[1], "sbx_"))
		usage_error(cmd, "'%s' is not a sandbox id (sbx_...)", o->pos[1]);
	char path[160];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/volumes", o->pos[1]);
	json_t *r = call("POST", path, volume_spec(cmd, "volume attach", o->pos[2]));
	if (o->json)
		print_json(r);
	json_decref(r);
	return 0;
}

static int volume_detach(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 3, 3);
	if (!is_id(o->pos[1], "sbx_"))
		usage_error(cmd, "'%s' is not a sandbox id (sbx_...)", o->pos[1]);
	char path[200];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/volumes/%.80s%s", o->pos[1], o->pos[2],
		 o->force ? "?force=true" : "");
	json_decref(call("DELETE", path, NULL));
	return 0;
}

int cmd_volume(const struct command *cmd, struct opts *o)
{
	static const struct subcommand subs[] = {
		{ "create", "size", volume_create },
		{ "ls", "", volume_ls },
		{ "rm", "", volume_rm },
		{ "attach", "", volume_attach },
		{ "detach", "force", volume_detach },
	};
	return subcommand_run(cmd, o, "volume", 0, subs, sizeof subs / sizeof subs[0]);
}

int cmd_templates(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 0, 0);
	json_t *r = call("GET", "/v1/templates", NULL);
	if (o->json) {
		print_json(r);
	} else {
		struct table t;
		table_init(&t, "NAME STATUS VERSION VCPUS MEM_MIB DISK_MIB DESCRIPTION");
		size_t i;
		json_t *s;
		json_array_foreach(json_object_get(r, "templates"), i, s) {
			json_t *v = json_object_get(s, "version"), *d = json_object_get(s, "disk_mib");
			char ver[24] = "-", cpus[24], mem[24], disk[24] = "-";
			if (json_is_integer(v))
				snprintf(ver, sizeof ver, "v%lld", (long long)json_integer_value(v));
			if (json_is_integer(d))	/* null before it is built */
				snprintf(disk, sizeof disk, "%lld", (long long)json_integer_value(d));
			snprintf(cpus, sizeof cpus, "%lld", (long long)json_integer_value(json_object_get(s, "vcpus")));
			snprintf(mem, sizeof mem, "%lld", (long long)json_integer_value(json_object_get(s, "memory_mib")));
			table_row(&t, str(s, "name"), status_word(str(s, "status")), ver, cpus, mem, disk,
				  str(s, "description"), NULL);
		}
		table_print(&t, stdout);
	}
	json_decref(r);
	return 0;
}

/* GET /v1/limits: the plan, each limit with what is in use of it. */
int cmd_limits(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 0, 0);
	json_t *r = call("GET", "/v1/limits", NULL);
	if (o->json) {
		print_json(r);
		json_decref(r);
		return 0;
	}
	json_t *l = json_object_get(r, "limits"), *u = json_object_get(r, "in_use");
	printf("plan               %s\n", str(r, "plan"));
	/* Each limit, and the in_use count it is held against (NULL: none). */
	static const char *const names[][2] = {
		{ "running", "running" }, { "creates_per_hour", NULL }, { "vcpus", NULL },
		{ "memory_mib", NULL }, { "max_ttl_seconds", NULL }, { "hibernated", "hibernated" },
		{ "snapshots", "snapshots" }, { "storage_mib", "storage_mib" },
		{ "hibernated_retention_seconds", NULL },
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		long long v = (long long)json_integer_value(json_object_get(l, names[i][0]));
		char val[32];
		if (v)
			snprintf(val, sizeof val, "%lld", v);
		else
			snprintf(val, sizeof val, "none");
		printf("%-18s %s", names[i][0], val);
		if (names[i][1])
			printf(" (%lld in use)", (long long)json_integer_value(json_object_get(u, names[i][1])));
		if (!strcmp(names[i][0], "creates_per_hour"))
			printf(" (%lld in the last %lld s)",
			       (long long)json_integer_value(json_object_get(u, "creates_in_window")),
			       (long long)json_integer_value(json_object_get(r, "window_seconds")));
		putchar('\n');
	}
	printf("ttl counts from    %s\n",
	       json_integer_value(json_object_get(l, "ttl_absolute")) ? "creation" : "last activity");
	printf("when idle          %s\n",
	       json_integer_value(json_object_get(l, "idle_hibernate")) ? "hibernate" : "delete");
	json_decref(r);
	return 0;
}
