#include "api/auth.h"
#include "api/api.h"
#include "api/keys.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

int auth_request(struct api *api, const char *authorization, char workspace[ID_MAX])
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
	int rc = store_key_lookup(api->store, hash, workspace);
	if (rc == -ENOENT)
		return errf(EACCES, "unknown or revoked API key");
	return rc;
}
