/*
 * store_admin: what the operator's API (/v1/admin/..., docs/security.md
 * "Operators") keeps: workspaces listed, made, suspended and deleted, and
 * the operator credentials. A deleted workspace keeps its row (its usage
 * and audit log still name it), marked with deleted_ms.
 */
#include "store/store.h"
#include "store/store_int.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>

/* ---- workspaces ------------------------------------------------------------ */

struct ws_walk {
	store_workspace_fn *fn;
	void *ctx;
	struct workspace_row *one;	/* find: the row, and stop */
};

static int row_workspace(void *ctx, const struct dbv *c, int n)
{
	struct ws_walk *w = ctx;
	if (n < 4)
		return errf(EIO, "store: short workspace row");
	struct workspace_row r = { .created_ms = dbv_int(&c[2]), .suspended = dbv_int(&c[3]) != 0 };
	copy_str(r.id, sizeof r.id, dbv_text(&c[0]));
	copy_str(r.name, sizeof r.name, dbv_text(&c[1]));
	if (w->one) {
		*w->one = r;
		return 1;
	}
	return w->fn(w->ctx, &r);
}

int store_workspace_find(struct store *st, const char *name, struct workspace_row *out)
{
	struct workspace_row r = { 0 };
	struct ws_walk w = { .one = &r };
	int rc = RUN(st, "SELECT id, name, created_ms, suspended FROM workspaces "
			 "WHERE name = $1 AND deleted_ms IS NULL",
		     row_workspace, &w, NULL, DBV_S(name));
	if (rc < 0)
		return rc;
	if (!r.id[0])
		return errf(ENOENT, "no workspace %s", name);
	*out = r;
	return 0;
}

int store_workspace_each(struct store *st, store_workspace_fn *fn, void *ctx)
{
	struct ws_walk w = { .fn = fn, .ctx = ctx };
	return store_run(st, "SELECT id, name, created_ms, suspended FROM workspaces "
			     "WHERE deleted_ms IS NULL ORDER BY name",
			 NULL, 0, row_workspace, &w, NULL);
}

int store_workspace_create(struct store *st, const char *name, char id[ID_MAX])
{
	char fresh[ID_MAX];
	int rc = make_id(fresh, "ws_");
	if (rc < 0)
		return rc;
	int64_t changes = 0;
	rc = RUN(st, "INSERT INTO workspaces (id, name, created_ms) VALUES ($1, $2, $3) "
		     "ON CONFLICT (name) DO NOTHING",
		 NULL, NULL, &changes, DBV_S(fresh), DBV_S(name), DBV_I(wall_ms()));
	if (rc < 0)
		return rc;
	if (changes) {
		copy_str(id, ID_MAX, fresh);
		return 0;
	}
	/* The name exists: only a deleted workspace may be made again (one
	 * statement, so of two creates at once one wins). */
	rc = RUN(st, "UPDATE workspaces SET deleted_ms = NULL, suspended = 0, created_ms = $1 "
		     "WHERE name = $2 AND deleted_ms IS NOT NULL",
		 NULL, NULL, &changes, DBV_I(wall_ms()), DBV_S(name));
	if (rc < 0)
		return rc;
	if (!changes)
		return errf(EEXIST, "workspace %s exists", name);
	struct workspace_row r;
	if ((rc = store_workspace_find(st, name, &r)) < 0)
		return rc;
	copy_str(id, ID_MAX, r.id);
	return 0;
}

int store_workspace_suspend(struct store *st, const char *id, bool suspended)
{
	int64_t changes = 0;
	int rc = RUN(st, "UPDATE workspaces SET suspended = $1 WHERE id = $2 AND deleted_ms IS NULL",
		     NULL, NULL, &changes, DBV_I(suspended ? 1 : 0), DBV_S(id));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(ENOENT, "no workspace %s", id);
}

int store_workspace_suspended(struct store *st, const char *id, bool *out)
{
	int64_t n = 0;
	int rc = RUN(st, "SELECT suspended FROM workspaces WHERE id = $1 AND deleted_ms IS NULL", store_row_int1,
		     &n, NULL, DBV_S(id));
	*out = n != 0;
	return rc < 0 ? rc : 0;
}

int store_workspace_live(struct store *st, const char *id, int64_t *n)
{
	*n = 0;
	int rc = RUN(st, "SELECT COUNT(*) FROM sandboxes WHERE workspace_id = $1 AND state <> $2", store_row_int1,
		     n, NULL, DBV_S(id), DBV_S(sbx_state_name(SBX_DELETED)));
	return rc < 0 ? rc : 0;
}

static int workspace_delete(struct store *tx, void *ctx)
{
	const char *id = ctx;
	char lock[ID_MAX + 8];
	snprintf(lock, sizeof lock, "ws:%s", id);
	int64_t live = 0, changes = 0;
	int rc = store_tx_lock(tx, lock);
	rc = rc ?: store_workspace_live(tx, id, &live);
	if (rc < 0)
		return rc;
	if (live)
		return errf(EBUSY, "the workspace has %lld live sandbox%s: delete %s first", (long long)live,
			    live == 1 ? "" : "es", live == 1 ? "it" : "them");
	int64_t now = wall_ms();
	/* (SQLite numbers $N by first use: they are written in order.) */
	rc = RUN(tx, "UPDATE api_keys SET revoked_ms = $1 WHERE workspace_id = $2 AND revoked_ms IS NULL",
		 NULL, NULL, NULL, DBV_I(now), DBV_S(id));
	rc = rc ?: RUN(tx, "UPDATE workspaces SET deleted_ms = $1 WHERE id = $2 AND deleted_ms IS NULL",
		       NULL, NULL, &changes, DBV_I(now), DBV_S(id));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(ENOENT, "no workspace %s", id);
}

int store_workspace_delete(struct store *st, const char *id)
{
	return store_tx(st, workspace_delete, (void *)id);
}

/* ---- operator credentials ------------------------------------------------------ */

struct op_walk {
	store_operator_fn *fn;
	void *ctx;
	struct operator_row *one;
};

static int row_operator(void *ctx, const struct dbv *c, int n)
{
	struct op_walk *w = ctx;
	if (n < 5)
		return errf(EIO, "store: short operator row");
	struct operator_row o = { .created_ms = dbv_int(&c[3]), .revoked_ms = dbv_int(&c[4]) };
	copy_str(o.id, sizeof o.id, dbv_text(&c[0]));
	copy_str(o.name, sizeof o.name, dbv_text(&c[1]));
	copy_str(o.prefix, sizeof o.prefix, dbv_text(&c[2]));
	if (w->one) {
		*w->one = o;
		return 1;
	}
	return w->fn(w->ctx, &o);
}

int store_operator_add(struct store *st, const char *name, const char *hash, const char *prefix,
		       char id[ID_MAX])
{
	int rc = make_id(id, "op_");
	if (rc < 0)
		return rc;
	return RUN(st, "INSERT INTO operators (id, name, hash, prefix, created_ms) VALUES ($1, $2, $3, $4, $5)",
		   NULL, NULL, NULL, DBV_S(id), DBV_S(name), DBV_S(hash), DBV_S(prefix), DBV_I(wall_ms()));
}

int store_operator_lookup(struct store *st, const char *hash, struct operator_row *out)
{
	struct operator_row o = { 0 };
	struct op_walk w = { .one = &o };
	int rc = RUN(st, "SELECT id, name, prefix, created_ms, revoked_ms FROM operators "
			 "WHERE hash = $1 AND revoked_ms IS NULL",
		     row_operator, &w, NULL, DBV_S(hash));
	if (rc < 0)
		return rc;
	if (!o.id[0])
		return -ENOENT;
	*out = o;
	return 0;
}

int store_operator_each(struct store *st, store_operator_fn *fn, void *ctx)
{
	struct op_walk w = { .fn = fn, .ctx = ctx };
	return store_run(st, "SELECT id, name, prefix, created_ms, revoked_ms FROM operators ORDER BY created_ms",
			 NULL, 0, row_operator, &w, NULL);
}

int store_operator_revoke(struct store *st, const char *id_or_prefix)
{
	int64_t changes = 0;
	int rc = RUN(st, "UPDATE operators SET revoked_ms = $1 WHERE (id = $2 OR prefix = $2) "
			 "AND revoked_ms IS NULL",
		     NULL, NULL, &changes, DBV_I(wall_ms()), DBV_S(id_or_prefix));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(ENOENT, "no active operator credential %s", id_or_prefix);
}
