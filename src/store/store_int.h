/*
 * store_int: what the store's own files share (store.c, store_cluster.c):
 * running one statement on the store's connection or transaction.
 */
#ifndef KILN_STORE_STORE_INT_H
#define KILN_STORE_STORE_INT_H

#include "store/db.h"
#include "store/store.h"

#include <stdio.h>

/* One statement on st (its transaction, if st is a store_tx view). Its
 * rows reach fn after the store's lock is given back (outside a
 * transaction), so fn may call the store, or anything that does. */
int store_run(struct store *st, const char *sql, const struct dbv *p, int n,
	      db_row_fn *fn, void *ctx, int64_t *changes);

#define RUN(st, sql, fn, ctx, changes, ...)                                                \
	({                                                                                 \
		const struct dbv p_[] = { __VA_ARGS__ };                                   \
		store_run((st), (sql), p_, (int)(sizeof p_ / sizeof p_[0]), (fn), (ctx),   \
			  (changes));                                                      \
	})

/* The columns of a host row (store/cluster.h struct host_row), in the
 * order store_host_fill reads them. */
#define HOST_COLS                                                                          \
	"id, name, url, admin, health, reason, version, vcpus, memory_mib, disk_mib, "      \
	"sandboxes, joined_ms, heartbeat_ms, revoked_ms, templates, "                       \
	"(SELECT api_key FROM host_keys WHERE host_keys.host_id = hosts.id)"

/* A row reader for one integer: the first column of the first row into
 * *(int64_t *)ctx, then stop. */
int store_row_int1(void *ctx, const struct dbv *c, int n);

struct host_row;
/* A row of HOST_COLS into *r (host_row_clear it); -EPROTO, -ENOMEM. */
int store_host_fill(struct host_row *r, const struct dbv *c, int n);

static inline void copy_str(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

#endif
