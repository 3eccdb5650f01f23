/*
 * cmd_keys: the workspace's API keys (docs/api.md /v1/keys; scopes and
 * expiry: docs/security.md "Keys: scopes, expiry, audit").
 *
 *   kiln keys list
 *   kiln keys create [--name N] [--scope full|read] [--expires SECONDS]
 *   kiln keys revoke ID...
 *
 * kilnd keeps only a key's hash, so create is the one time the key can be
 * seen: it goes alone to stdout (k=$(kiln keys create) keeps it, nothing
 * else to strip) and the warning to stderr. kiln admin keys prints, lists
 * and revokes a workspace's keys the same ways (key_create, key_list,
 * key_revoke), over the operator's routes.
 */
#include "cli/cli.h"
#include "cli/out.h"

#include <string.h>
#include <time.h>

int key_create(const struct command *cmd, struct opts *o, const char *path)
{
	json_t *body = json_object();
	if (o->name)
		json_object_set_new(body, "name", text_arg(cmd, "--name", o->name));
	if (o->scope)
		json_object_set_new(body, "scope", json_string(o->scope));
	if (o->expires)
		json_object_set_new(body, "expires_in_seconds", json_integer(o->expires));
	json_t *r = call("POST", path, body);
	if (o->json) {
		print_json(r);
	} else {
		printf("%s\n", str(r, "key"));
		fflush(stdout);
		json_t *exp = json_object_get(r, "expires_at");
		fprintf(stderr, "kiln: key %s (%s...), scope %s, expires %s: shown only this once; keep it now\n",
			str(r, "id"), str(r, "prefix"), str(r, "scope"), json_is_string(exp) ? str(r, "expires_at")
											   : "never");
	}
	json_decref(r);
	return 0;
}

static int keys_create(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 1, 1);
	return key_create(cmd, o, "/v1/keys");
}

/* A key's state now: revoked, expired (its expires_at has passed), active. */
static const char *key_state(json_t *k)
{
	if (json_is_true(json_object_get(k, "revoked")))
		return "revoked";
	long long t;
	if (rfc3339_seconds(json_string_value(json_object_get(k, "expires_at")), &t) == 0 && t <= time(NULL))
		return "expired";
	return "active";
}

/* k[field], a time or null, as "5m ago" / "in 3h", or "never" for null. */
static const char *when(json_t *k, const char *field, char *buf, size_t len)
{
	return json_is_string(json_object_get(k, field)) ? ago(str(k, field), buf, len) : "never";
}

int key_list(struct opts *o, const char *path)
{
	json_t *r = get_or_print(o, path);
	if (!r)
		return 0;
	struct table t;
	table_init(&t, "ID PREFIX NAME SCOPE CREATED LAST_USED EXPIRES STATE");
	size_t i;
	json_t *k;
	json_array_foreach(json_object_get(r, "keys"), i, k) {
		char created[32], used[32], expires[32];
		const char *name = str(k, "name");
		table_row(&t, str(k, "id"), str(k, "prefix"), *name ? name : "-", str(k, "scope"),
			  ago(str(k, "created_at"), created, sizeof created), when(k, "last_used_at", used, sizeof used),
			  when(k, "expires_at", expires, sizeof expires), key_state(k), NULL);
	}
	table_print(&t, stdout);
	json_decref(r);
	return 0;
}

static int keys_list(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 1, 1);
	return key_list(o, "/v1/keys");
}

void key_ids_check(const struct command *cmd, struct opts *o, int first, const char *sub, const char *lister)
{
	if (o->npos <= first)
		usage_error(cmd, "%s wants the id of a key (key_...: %s shows them)", sub, lister);
	for (int i = first; i < o->npos; i++)	/* a slip in the third leaves the first two alone */
		if (!is_id(o->pos[i], "key_"))
			usage_error(cmd, "'%s' is not a key id (key_...: %s shows them)", o->pos[i], lister);
}

int key_revoke(struct opts *o, int first, const char *base)
{
	for (int i = first; i < o->npos; i++) {
		char path[160];
		snprintf(path, sizeof path, "%s/%s", base, o->pos[i]);
		json_decref(call("DELETE", path, NULL));
	}
	return 0;
}

static int keys_revoke(const struct command *cmd, struct opts *o)
{
	key_ids_check(cmd, o, 1, "keys revoke", "kiln keys list");
	return key_revoke(o, 1, "/v1/keys");
}

int cmd_keys(const struct command *cmd, struct opts *o)
{
	static const struct subcommand subs[] = {
		{ "list", "", keys_list },
		{ "create", "name scope expires", keys_create },
		{ "revoke", "", keys_revoke },
	};
	return subcommand_run(cmd, o, "keys", 0, subs, sizeof subs / sizeof subs[0]);
}
