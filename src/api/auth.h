/*
 * auth: who is calling. An API key in `Authorization: Bearer kiln_...`
 * names a workspace; every sandbox and snapshot belongs to one, and a
 * caller sees only its own (others' are 404, not 403: existence is not
 * disclosed).
 */
#ifndef KILN_API_AUTH_H
#define KILN_API_AUTH_H

#include "store/store.h"

struct api;

/* The workspace of the key in the Authorization header value (may be
 * NULL). -EACCES with a message for a missing, malformed, unknown or
 * revoked key; other -errno when the store fails. */
int auth_request(struct api *api, const char *authorization, char workspace[ID_MAX]);

#endif
