#include "api/auth.h"
#include "api/api.h"
#include "api/keys.h"
#include "common/err.h"
#include "common/log.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

int auth_key_hash(struct api *api, const char *hash, struct key_auth *who)
{
	int rc = store_key_lookup(api->store, hash, who);
	if (rc == -ENOENT)
		return errf(EACCES, "unknown or revoked API key (or one past its expiry)");
	if (rc < 0)
		return rc;
	if (who->suspended)
		return errf(E_WS_SUSPENDED, "workspace %s is suspended by the operator", who->workspace_name);
	/* last_used_at is to the minute: a write a minute per key, not one
	 * a request. A failed write costs the request nothing. */
	int64_t now = wall_ms();
	if (now - who->last_used_ms >= 60000 && store_key_touch(api->store, who->id, now) < 0)
		log_warn("recording the use of key %s: %s", who->id, errmsg());
	return 0;
}

/* The token of "Bearer TOKEN", spaces around it trimmed; NULL if none. */
static const char *bearer(const char *authorization, size_t *len)
{
	if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
		return NULL;
	const char *t = authorization + 7;
	while (*t == ' ')
		t++;
	*len = strlen(t);
	while (*len > 0 && t[*len - 1] == ' ')
		(*len)--;
	return t;
}

int auth_operator(struct api *api, const char *authorization, struct operator_row *who)
{
	size_t len;
	const char *t = bearer(authorization, &len);
	if (!t)
		return errf(EACCES, "missing operator credential: send 'Authorization: Bearer kilnop_...' "
			    "(kilnd admin create makes one)");
	if (key_well_formed(t, len)) {
		/* A workspace's key, even a valid one, is not an operator's. */
		struct key_auth k;
		int rc = auth_request(api, authorization, &k);
		if (rc == 0 || rc == -E_WS_SUSPENDED)
			return errf(EPERM, "an API key of a workspace cannot call /v1/admin: use an "
				    "operator credential (kilnd admin create)");
		return rc;
	}
	if (!secret_well_formed(t, len, OPERATOR_PREFIX))
		return errf(EACCES, "malformed operator credential");
	char hash[KEY_HASH_LEN];
	key_hash(t, len, hash);
	int rc = store_operator_lookup(api->store, hash, who);
	if (rc == -ENOENT)
		return errf(EACCES, "unknown or revoked operator credential");
	return rc;
}

int auth_request(struct api *api, const char *authorization, struct key_auth *who)
{
	if (!authorization)
		return errf(EACCES, "missing API key: send 'Authorization: Bearer kiln_...'");
	if (strncasecmp(authorization, "Bearer ", 7) != 0)
		return errf(EACCES, "the Authorization header must be 'Bearer kiln_...'");
	const char *key = authorization + 7;
	while (*key == ' ')
		key++;
	size_t len = strlen(key);
	while (len > 0 && key[len - 1] == ' ')
		len--;
	if (!key_well_formed(key, len))
		return errf(EACCES, "malformed API key");
	char hash[KEY_HASH_LEN];
	key_hash(key, len, hash);
	return auth_key_hash(api, hash, who);
}
