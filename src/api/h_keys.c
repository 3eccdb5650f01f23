/*
 * h_keys: a workspace's API keys over REST (the dashboard's key page; the
 * operator's `kilnd keys` does the same for every workspace).
 *
 *   GET    /v1/keys        the caller's workspace's keys (never the keys
 *                          themselves: only their hash is stored)
 *   POST   /v1/keys        {"name":"ci", "scope":"read", "expires_in_seconds":3600}
 *                          -> 201 with the key, shown once (scope "full" and
 *                          no expiry by default; a read key cannot make one:
 *                          the route is not ROUTE_READ)
 *   DELETE /v1/keys/{id}   revoke; its sessions end at their next request
 */
#include "api/api.h"
#include "api/handlers.h"
#include "api/http.h"
#include "api/keys.h"
#include "api/render.h"
#include "ops/validate.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>

/* At most about ten years: a longer-lived key is one that never expires. */
#define KEY_EXPIRES_MAX_S (10LL * 366 * 86400)

static json_t *time_or_null(int64_t ms)
{
	return ms ? render_time(ms) : json_null();
}

static json_t *key_json(const struct key_row *k)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:o,s:b,s:o,s:o}", "id", k->id, "prefix", k->prefix,
			      "name", k->name, "scope", key_scope_name(k->scope), "created_at",
			      render_time(k->created_ms), "revoked", k->revoked_ms != 0, "expires_at",
			      time_or_null(k->expires_ms), "last_used_at", time_or_null(k->last_used_ms));
	if (j && k->revoked_ms)
		json_object_set_new(j, "revoked_at", render_time(k->revoked_ms));
	return j;
}

struct list {
	const char *workspace;
	json_t *arr;
	const char *want;	/* find one id */
	bool found, revoked;
};

static int one_key(void *ctx, const struct key_row *k)
{
	struct list *l = ctx;
	if (strcmp(k->workspace, l->workspace) != 0)
		return 0;
	if (l->want) {
		if (!strcmp(k->id, l->want))
			l->found = true, l->revoked = k->revoked_ms != 0;
		return 0;
	}
	json_array_append_new(l->arr, key_json(k));
	return 0;
}

int key_list_reply(struct req *r, const char *workspace)
{
	struct list l = { .workspace = workspace, .arr = json_array() };
	int rc = store_key_each(r->api->store, one_key, &l);
	if (rc < 0) {
		json_decref(l.arr);
		return reply_errno(r, rc);
	}
	return reply_json(r, 200, json_pack("{s:o}", "keys", l.arr));
}

int h_key_list(struct req *r)
{
	return key_list_reply(r, r->workspace);
}

int key_create_reply(struct req *r, const char *workspace)
{
	static const char *const allowed[] = { "name", "scope", "expires_in_seconds", NULL };
	const char *name = "", *scope_name = "full";
	int64_t expires_in = 0;
	enum key_scope scope;
	int rc = v_known_keys(r->json, allowed);
	rc = rc ?: v_str(r->json, "name", false, NAME_MAX_LEN - 1, &name);
	rc = rc ?: v_str(r->json, "scope", false, 16, &scope_name);
	rc = rc ?: v_int(r->json, "expires_in_seconds", false, 1, KEY_EXPIRES_MAX_S, &expires_in);
	if (rc < 0)
		return reply_errno(r, rc);
	if (key_scope_parse(scope_name, &scope) < 0)
		return reply_error(r, 400, "invalid_request", "field 'scope' must be \"full\" or \"read\"");
	for (const char *p = name; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return reply_error(r, 400, "invalid_request", "name holds a control character");
	char key[KEY_LEN + 1], hash[KEY_HASH_LEN], shown[KEY_SHOWN_LEN + 1], id[ID_MAX];
	if ((rc = key_generate(key)) < 0)
		return reply_errno(r, rc);
	key_hash(key, strlen(key), hash);
	key_shown(key, shown);
	int64_t expires_ms = expires_in ? wall_ms() + expires_in * 1000 : 0;
	if ((rc = store_key_add(r->api->store, workspace, name, hash, shown, scope, expires_ms, id)) < 0)
		return reply_errno(r, rc);
	return reply_json(r, 201, json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "id", id, "key", key, "prefix",
					    shown, "name", name, "scope", key_scope_name(scope),
					    "expires_at", time_or_null(expires_ms)));
}

int h_key_create(struct req *r)
{
	return key_create_reply(r, r->workspace);
}

int key_delete_reply(struct req *r, const char *workspace, const char *id)
{
	struct list l = { .workspace = workspace, .want = id };
	int rc = store_key_each(r->api->store, one_key, &l);
	if (rc < 0)
		return reply_errno(r, rc);
	/* Another workspace's key is as absent as one that never was. */
	if (!l.found)
		return reply_error(r, 404, "not_found", "no key %s", id);
	if (l.revoked)
		return reply_empty(r, 204);
	rc = store_key_revoke(r->api->store, id);
	return rc < 0 ? reply_errno(r, rc) : reply_empty(r, 204);
}

int h_key_delete(struct req *r)
{
	return key_delete_reply(r, r->workspace, r->params[0]);
}
