/*
 * cmd_db: managed databases (docs/databases.md): a PostgreSQL server in a
 * microVM of its own, reachable from this workspace's sandboxes. kiln db
 * create, ls, get, cert, rm, reset-password, backup, backups, restore and
 * external, by
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


/* What is printed of an answer without --json: create, restore and
 * reset-password answer the URL with the password (shown this once). */
static void print_url(json_t *r)
{
	printf("%s\n", str(r, "url"));
}

/* kiln db cert NAME: its server's certificate (PEM), the root a client
 * verifies it by (sslrootcert= in its external URL). */
static void print_cert(json_t *r)
{
	const char *pem = json_string_value(json_object_get(r, "tls_certificate"));
	if (!pem)
		die("database %s has no certificate yet (made before TLS: kiln db external %s on makes one)",
		    str(r, "name"), str(r, "name"));
	fputs(pem, stdout);
}

static void print_id(json_t *r)
{
	printf("%s\n", str(r, "id"));
}

/* One backup a line: its id, then its kind (manual or scheduled; "-"
 * from a server older than the field). */
static void print_backups(json_t *r)
{
	size_t i;
	json_t *b;
	json_array_foreach(json_object_get(r, "backups"), i, b) {
		const char *kind = json_string_value(json_object_get(b, "kind"));
		printf("%s\t%s\n", str(b, "id"), kind ? kind : "-");
	}
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
	if (o->external)
		json_object_set_new(body, "external_access", json_true());
	(void)cmd;
	progress_start(o, backup ? "restoring the backup into a new database" : "making the database (until it takes connections)");
	json_t *r = call("POST", "/v1/databases", body);
	progress_end();
	if (o->json) {
		print_json(r);
	} else {
		print_url(r);
		if (json_string_value(json_object_get(r, "external_url")))
			printf("%s\n", str(r, "external_url"));
	}
	json_decref(r);
	return 0;
}

/* kiln db external NAME on|off: PATCH external_access; prints the
 * external URL (without the password: it is shown at create and reset
 * only) when on. */
static int db_external(const struct command *cmd, struct opts *o)
{
	const char *key = key_arg(cmd, o, 1, "database");
	need_args(cmd, o, 3, 3);
	bool on = !strcmp(o->pos[2], "on");
	if (!on && strcmp(o->pos[2], "off"))
		usage_error(cmd, "db external %s wants 'on' or 'off', not '%s'", key, o->pos[2]);
	char path[128];
	snprintf(path, sizeof path, "/v1/databases/%s", key);
	json_t *r = call("PATCH", path, json_pack("{s:b}", "external_access", on));
	if (o->json)
		print_json(r);
	else if (on)
		printf("%s\n", str(r, "external_url"));
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

/* The subcommands that are one call about one database (kiln db get,
 * reset-password, backup, backups NAME): the call (path: after
 * /v1/databases/NAME), what is shown while it runs, and what is printed
 * of its answer (NULL: the JSON, always). */
static const struct db_call {
	const char *sub, *method, *path, *progress;
	void (*print)(json_t *r);
} db_calls[] = {
	{ "get", "GET", "", NULL, NULL },
	{ "cert", "GET", "", NULL, print_cert },
	{ "reset-password", "POST", "/reset-password", NULL, print_url },
	{ "backup", "POST", "/backups", "taking a backup", print_id },
	{ "backups", "GET", "/backups", NULL, print_backups },
};

static int db_call(const struct command *cmd, struct opts *o)
{
	const struct db_call *d = db_calls;
	while (d < db_calls + sizeof db_calls / sizeof db_calls[0] - 1 && strcmp(d->sub, o->pos[0]))
		d++;
	char path[160];
	snprintf(path, sizeof path, "/v1/databases/%s%s", key_arg(cmd, o, 1, "database"), d->path);
	need_args(cmd, o, 2, 2);
	if (d->progress)
		progress_start(o, d->progress);
	json_t *r = call(d->method, path, NULL);
	if (d->progress)
		progress_end();
	if (o->json || !d->print)
		print_json(r);
	else
		d->print(r);
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
		{ "create", "backup-interval backups-kept external", db_create },
		{ "ls", "", db_ls },
		{ "get", "", db_call },
		{ "cert", "", db_call },
		{ "rm", "", db_rm },
		{ "reset-password", "", db_call },
		{ "backup", "", db_call },
		{ "backups", "", db_call },
		{ "restore", "backup-interval backups-kept", db_restore },
		{ "external", "", db_external },
	};
	return subcommand_run(cmd, o, "db", 0, subs, sizeof subs / sizeof subs[0]);
}
