/*
 * auth: who is calling. An API key in `Authorization: Bearer kiln_...`
 * names a workspace; every sandbox and snapshot belongs to one, and a
 * caller sees only its own (others' are 404, not 403: existence is not
 * disclosed).
 */
#ifndef KILN_API_AUTH_H
#define KILN_API_AUTH_H

#include "store/store.h"

#include <errno.h>

struct api;

/* The errno of "the key's workspace is suspended by the operator" (403
 * workspace_suspended, http.c errno_status): no libc errno says it, and
 * this one is used nowhere else in kiln. */
#define E_WS_SUSPENDED ENOLINK

/* An operator credential: "kilnop_" and 32 random base32 characters. */
#define OPERATOR_PREFIX "kilnop_"

/* The key in the Authorization header value (may be NULL): its
 * workspace, scope and id. -EACCES with a message for a missing,
 * malformed, unknown, revoked or expired key; other -errno when the store
 * fails. Records the key's use (to the minute: store_key_touch). */
int auth_request(struct api *api, const char *authorization, struct key_auth *who);
/* The same for a key known by its hash (a dashboard session's key).
 * Both: -E_WS_SUSPENDED naming the workspace when it is suspended. */
int auth_key_hash(struct api *api, const char *hash, struct key_auth *who);
/* The operator credential in the Authorization header value, for the
 * routes of /v1/admin (ROUTE_ADMIN). -EACCES for none, a malformed,
 * unknown or revoked one; -EPERM for a workspace's API key (valid, but
 * not an operator's). */
int auth_operator(struct api *api, const char *authorization, struct operator_row *who);

#endif
