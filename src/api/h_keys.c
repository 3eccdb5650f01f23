/*
 * h_keys: a workspace's API keys over REST (the dashboard's key page; the
 * operator's `kilnd keys` does the same for every workspace).
 *
 *   GET    /v1/keys        the caller's workspace's keys (never the keys
 *                          themselves: only their hash is stored)
 *   POST   /v1/keys        {"name":"ci"} -> 201 with the key, shown once
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

static json_t *key_json(const struct key_row *k)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:o,s:b}", "id", k->id, "prefix", k->prefix, "name", k->name,
			      "created_at", render_time(k->created_ms), "revoked", k->revoked_ms != 0);
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

int h_key_list(struct req *r)
{
	struct list l = { .workspace = r->workspace, .arr = json_array() };
	int rc = store_key_each(r->api->store, one_key, &l);
	if (rc < 0) {
		json_decref(l.arr);
		return reply_errno(r, rc);
	}
	return reply_json(r, 200, json_pack("{s:o}", "keys", l.arr));
}

int h_key_create(struct req *r)
{
	static const char *const allowed[] = { "name", NULL };
	const char *name = "";
	int rc = v_known_keys(r->json, allowed);
	rc = rc ?: v_str(r->json, "name", false, NAME_MAX_LEN - 1, &name);
	if (rc < 0)
		return reply_errno(r, rc);
	for (const char *p = name; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return reply_error(r, 400, "invalid_request", "name holds a control character");
	char key[KEY_LEN + 1], hash[KEY_HASH_LEN], shown[KEY_SHOWN_LEN + 1], id[ID_MAX];
	if ((rc = key_generate(key)) < 0)
		return reply_errno(r, rc);
	key_hash(key, strlen(key), hash);
	key_shown(key, shown);
	if ((rc = store_key_add(r->api->store, r->workspace, name, hash, shown, id)) < 0)
		return reply_errno(r, rc);
	return reply_json(r, 201, json_pack("{s:s,s:s,s:s,s:s}", "id", id, "key", key, "prefix", shown,
					    "name", name));
}

int h_key_delete(struct req *r)
{
	struct list l = { .workspace = r->workspace, .want = r->params[0] };
	int rc = store_key_each(r->api->store, one_key, &l);
	if (rc < 0)
		return reply_errno(r, rc);
	/* Another workspace's key is as absent as one that never was. */
	if (!l.found)
		return reply_error(r, 404, "not_found", "no key %s", r->params[0]);
	if (l.revoked)
		return reply_empty(r, 204);
	rc = store_key_revoke(r->api->store, r->params[0]);
	return rc < 0 ? reply_errno(r, rc) : reply_empty(r, 204);
}
