/*
 * cmd_db: managed databases (docs/databases.md): a PostgreSQL server in a
 * microVM of its own, reachable from this workspace's sandboxes. kiln db
 * create, ls, get, rm, reset-password, backup, backups and restore, by
 * the database's name or id.
 */
#include "cli/cli.h"
#include "cli/out.h"

#include <stdlib.h>
#include <string.h>

/* A database's name or id (or a backup's id), for a URL path: kilnd's
 * names are [a-z0-9-] and its ids [a-z0-9_]; anything else could not
 * name one, and must not change the path. */
static const char *key_arg(const struct command *cmd, struct opts *o, int i, const char *what)
{
	if (i >= o->npos)
		usage_error(cmd, "which %s? give its name or id (kiln db ls lists them)", what);
	const char *k = o->pos[i];
	if (!*k || strlen(k) > 64 || k[strspn(k, "abcdefghijklmnopqrstuvwxyz0123456789-_")])
		usage_error(cmd, "'%s' is not a %s's name or id", k, what);
	return k;
}

/* create, restore and reset-password answer the URL with the password
 * (shown this once), or the JSON. */
static void print_db(struct opts *o, json_t *r)
{
	if (o->json)
		print_json(r);
	else
		printf("%s\n", str(r, "url"));
}

static int db_make(const struct command *cmd, struct opts *o, const char *backup, const char *name)
{
	json_t *body = json_object();
	if (!body)
		die("out of memory");
	if (name)
		json_object_set_new(body, "name", json_string(name));
	if (backup)
		json_object_set_new(body, "from_backup", json_string(backup));
	if (o->backup_interval >= 0)
		json_object_set_new(body, "backup_interval_seconds", json_integer(o->backup_interval));
	if (o->backups_kept > 0)
		json_object_set_new(body, "backups_kept", json_integer(o->backups_kept));
	(void)cmd;
	progress_start(o, backup ? "restoring the backup into a new database" : "making the database (until it takes connections)");
	json_t *r = call("POST", "/v1/databases", body);
	progress_end();
	print_db(o, r);
	json_decref(r);
	return 0;
}

static int db_create(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 1, 2);
	return db_make(cmd, o, NULL, o->npos > 1 ? key_arg(cmd, o, 1, "database") : NULL);
}

static int db_restore(const struct command *cmd, struct opts *o)
{
	const char *backup = key_arg(cmd, o, 1, "backup");
	need_args(cmd, o, 2, 3);
	if (!is_id(backup, "snap_"))
		usage_error(cmd, "restore wants a backup's id (snap_..., kiln db backups NAME lists them), not '%s'", backup);
	return db_make(cmd, o, backup, o->npos > 2 ? key_arg(cmd, o, 2, "database") : NULL);
}

static int db_get(const struct command *cmd, struct opts *o)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/databases/%s", key_arg(cmd, o, 1, "database"));
	need_args(cmd, o, 2, 2);
	json_t *r = call("GET", path, NULL);
	print_json(r);
	json_decref(r);
	return 0;
}

static int db_reset_password(const struct command *cmd, struct opts *o)
{
	char path[160];
	snprintf(path, sizeof path, "/v1/databases/%s/reset-password", key_arg(cmd, o, 1, "database"));
	need_args(cmd, o, 2, 2);
	json_t *r = call("POST", path, NULL);
	print_db(o, r);
	json_decref(r);
	return 0;
}

static int db_backup(const struct command *cmd, struct opts *o)
{
	char path[160];
	snprintf(path, sizeof path, "/v1/databases/%s/backups", key_arg(cmd, o, 1, "database"));
	need_args(cmd, o, 2, 2);
	progress_start(o, "taking a backup");
	json_t *r = call("POST", path, NULL);
	progress_end();
	if (o->json)
		print_json(r);
	else
		printf("%s\n", str(r, "id"));
	json_decref(r);
	return 0;
}

static int db_backups(const struct command *cmd, struct opts *o)
{
	char path[160];
	snprintf(path, sizeof path, "/v1/databases/%s/backups", key_arg(cmd, o, 1, "database"));
	need_args(cmd, o, 2, 2);
	json_t *r = get_or_print(o, path);
	if (!r)
		return 0;
	size_t i;
	json_t *b;
	json_array_foreach(json_object_get(r, "backups"), i, b)
		printf("%s\n", str(b, "id"));
	json_decref(r);
	return 0;
}

static int db_rm(const struct command *cmd, struct opts *o)
{
	if (o->npos < 2)
		key_arg(cmd, o, 1, "database");		/* the usage error */
	for (int i = 1; i < o->npos; i++)	/* all checked before any is deleted */
		key_arg(cmd, o, i, "database");
	for (int i = 1; i < o->npos; i++) {
		char path[128];
		snprintf(path, sizeof path, "/v1/databases/%s", o->pos[i]);
		json_decref(call("DELETE", path, NULL));
	}
	return 0;
}

/* kiln db ls: a table, or the API's JSON. */
static int db_ls(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 1, 1);
	json_t *r = get_or_print(o, "/v1/databases");
	if (!r)
		return 0;
	struct table t;
	table_init(&t, "NAME ID STATUS HOST CREATED");
	size_t i;
	json_t *d;
	json_array_foreach(json_object_get(r, "databases"), i, d) {
		char created[32], host[48];
		snprintf(host, sizeof host, "%s:%lld", str(d, "host"), (long long)json_integer_value(json_object_get(d, "port")));
		table_row(&t, str(d, "name"), str(d, "id"), status_word(str(d, "status")), host,
			  ago(str(d, "created_at"), created, sizeof created), NULL);
	}
	table_print(&t, stdout);
	json_decref(r);
	return 0;
}

int cmd_db(const struct command *cmd, struct opts *o)
{
	static const struct subcommand subs[] = {
		{ "create", "backup-interval backups-kept", db_create },
		{ "ls", "", db_ls },
		{ "get", "", db_get },
		{ "rm", "", db_rm },
		{ "reset-password", "", db_reset_password },
		{ "backup", "", db_backup },
		{ "backups", "", db_backups },
		{ "restore", "backup-interval backups-kept", db_restore },
	};
	return subcommand_run(cmd, o, "db", 0, subs, sizeof subs / sizeof subs[0]);
}
