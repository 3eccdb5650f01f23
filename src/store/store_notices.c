/*
 * store_notices: the notices of sandboxes (store.h "notices"), TTL
 * warnings a cluster's hosts send with their records for the replicas'
 * event streams. Kept a day: a replica looks at the last minute's.
 */
#include "store/store_int.h"

#include "common/err.h"

#include <errno.h>

#define NOTICE_KEEP_MS (24 * 3600 * 1000LL)

int store_notice_add(struct store *st, const struct notice_row *n)
{
	int64_t now = wall_ms();
	int rc = RUN(st, "INSERT INTO notices (sandbox_id, workspace_id, kind, state, action, due_ms, saved_ms) "
			 "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (sandbox_id, kind, due_ms) DO NOTHING",
		     NULL, NULL, NULL, DBV_S(n->sandbox), DBV_S(n->workspace), DBV_S(n->kind), DBV_S(n->state),
		     DBV_S(n->action), DBV_I(n->due_ms), DBV_I(now));
	if (rc < 0)
		return rc;
	rc = RUN(st, "DELETE FROM notices WHERE saved_ms < $1", NULL, NULL, NULL, DBV_I(now - NOTICE_KEEP_MS));
	return rc < 0 ? rc : 0;
}

struct notice_each {
	store_notice_fn *fn;
	void *ctx;
};

static int row_notice(void *ctx, const struct dbv *c, int n)
{
	struct notice_each *e = ctx;
	if (n < 7)
		return errf(EIO, "store: short notices row");
	struct notice_row r = { .due_ms = dbv_int(&c[5]), .saved_ms = dbv_int(&c[6]) };
	copy_str(r.sandbox, sizeof r.sandbox, dbv_text(&c[0]));
	copy_str(r.workspace, sizeof r.workspace, dbv_text(&c[1]));
	copy_str(r.kind, sizeof r.kind, dbv_text(&c[2]));
	copy_str(r.state, sizeof r.state, dbv_text(&c[3]));
	copy_str(r.action, sizeof r.action, dbv_text(&c[4]));
	return e->fn(e->ctx, &r);
}

int store_notice_each_since(struct store *st, int64_t since_ms, store_notice_fn *fn, void *ctx)
{
	struct notice_each e = { fn, ctx };
	return RUN(st, "SELECT sandbox_id, workspace_id, kind, state, action, due_ms, saved_ms FROM notices "
		       "WHERE saved_ms >= $1 ORDER BY saved_ms", row_notice, &e, NULL, DBV_I(since_ms));
}
