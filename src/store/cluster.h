/*
 * store/cluster: the records of a kiln cluster (docs/cluster.md): join
 * tokens an operator makes (`kilnd cluster token create`), and the hosts
 * that joined with one, each with its own credential. Secrets are given
 * to the store only as their hex SHA-256 (64 characters); the store never
 * sees a token or a credential itself. Errors as in store.h.
 */
#ifndef KILN_STORE_CLUSTER_H
#define KILN_STORE_CLUSTER_H

#include <stdint.h>

#include "store/store.h"

#define TOKEN_PREFIX_LEN 12	/* "kjt_" and 8 characters: enough to tell tokens apart */

struct join_token_row {
	char id[ID_MAX];
	char prefix[TOKEN_PREFIX_LEN + 1];
	int64_t created_ms, expires_ms;
	int64_t uses_left;		/* -1: any number */
	int64_t revoked_ms;		/* 0: not revoked */
};

int store_join_token_add(struct store *st, const char *hash, const char *prefix,
			 int64_t expires_ms, int64_t uses, char id[ID_MAX]);
typedef int store_join_token_fn(void *ctx, const struct join_token_row *r);
int store_join_token_each(struct store *st, store_join_token_fn *fn, void *ctx);
/* By id or prefix; -ENOENT if no such token is active. */
int store_join_token_revoke(struct store *st, const char *id_or_prefix);

/* A host joins: one use of the token whose hash is token_hash is taken
 * and the host is added with its credential's hash, in one transaction,
 * so that a single-use token admits exactly one host however many try at
 * once. -EACCES with the reason (unknown, expired, revoked, used up: the
 * caller logs it, the joining host is told only "refused"); -EEXIST if a
 * host of that name exists. */
struct host_join {
	const char *token_hash, *credential_hash;
	const char *name, *url, *version, *templates;	/* templates: JSON text */
	int64_t vcpus, memory_mib, disk_mib;
};
int store_host_join(struct store *st, const struct host_join *j, char id[ID_MAX]);

struct host_row {
	char id[ID_MAX], name[NAME_MAX_LEN], url[256], admin[16], health[16];
	char reason[160], version[64];
	int64_t vcpus, memory_mib, disk_mib, sandboxes;
	int64_t joined_ms, heartbeat_ms, revoked_ms;
	char *templates;		/* JSON text (malloc'd), or NULL */
};
void host_row_clear(struct host_row *r);

/* The host whose credential hashes to hash: -EACCES "unknown" or
 * "revoked" (the reason in errmsg()). */
int store_host_auth(struct store *st, const char *hash, struct host_row *out);
/* A heartbeat: what the host reports now; a host that was down is up
 * again. */
struct host_beat {
	int64_t vcpus, memory_mib, disk_mib, sandboxes;
	const char *version, *templates;
};
int store_host_beat(struct store *st, const char *id, const struct host_beat *b);
/* Mark down every host up whose last heartbeat is older than
 * before_ms, with reason; *marked how many (may be NULL). */
int store_hosts_mark_down(struct store *st, int64_t before_ms, const char *reason, int *marked);
typedef int store_host_fn(void *ctx, const struct host_row *r);
int store_host_each(struct store *st, store_host_fn *fn, void *ctx);
/* An operator's change to a host named by id or name: admin "active",
 * "cordoned", "draining" or "revoked" (revoked is final). -ENOENT, or
 * -EINVAL for a revoked host. */
int store_host_set_admin(struct store *st, const char *id_or_name, const char *admin);

#endif
