/*
 * store_volumes: the records of named volumes and of which sandbox holds
 * which (store.h "volumes"). The rules on them (one writer, nothing
 * deleted while in use) are the host agent's (host/volume.c); this only
 * keeps the rows.
 */
#include "store/store_int.h"
#include "store/sbx_state.h"

#include "common/err.h"

#include <errno.h>
#include <string.h>

#define VOL_COLS "id, workspace_id, name, size_mib, created_ms, deleted_ms"
#define ATT_COLS "volume_id, sandbox_id, slot, read_only, path, created_ms"

int store_volume_insert(struct store *st, const struct vol_row *r)
{
	/* The check and the insert are one statement, so two creates of a
	 * name at once cannot both land (the partial unique index is the
	 * second guard). */
	int64_t changes = 0;
	int rc = RUN(st,
		     "INSERT INTO volumes (" VOL_COLS ") SELECT $1, $2, $3, $4, $5, NULL "
		     "WHERE NOT EXISTS (SELECT 1 FROM volumes WHERE workspace_id = $2 AND name = $3 "
		     "AND deleted_ms IS NULL)",
		     NULL, NULL, &changes, DBV_S(r->id), DBV_S(r->workspace), DBV_S(r->name),
		     DBV_I(r->size_mib), DBV_I(r->created_ms));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(EEXIST, "a volume named '%s' exists", r->name);
}

static int fill_vol(struct vol_row *r, const struct dbv *c, int n)
{
	if (n < 6)
		return errf(EIO, "store: short volume row");
	memset(r, 0, sizeof *r);
	copy_str(r->id, sizeof r->id, dbv_text(&c[0]));
	copy_str(r->workspace, sizeof r->workspace, dbv_text(&c[1]));
	copy_str(r->name, sizeof r->name, dbv_text(&c[2]));
	r->size_mib = dbv_int(&c[3]);
	r->created_ms = dbv_int(&c[4]);
	r->deleted_ms = dbv_int(&c[5]);
	return 0;
}

struct vol_one {
	struct vol_row *r;
	bool found;
};

static int row_vol_one(void *ctx, const struct dbv *c, int n)
{
	struct vol_one *o = ctx;
	int rc = fill_vol(o->r, c, n);
	if (rc == 0)
		o->found = true;
	return rc < 0 ? rc : 1;
}

int store_volume_load(struct store *st, const char *workspace, const char *key, bool by_name,
		      struct vol_row *r)
{
	struct vol_one o = { r, false };
	int rc;
	if (workspace)
		rc = by_name ? RUN(st, "SELECT " VOL_COLS " FROM volumes WHERE name = $1 AND workspace_id = $2 "
				       "AND deleted_ms IS NULL", row_vol_one, &o, NULL, DBV_S(key), DBV_S(workspace))
			     : RUN(st, "SELECT " VOL_COLS " FROM volumes WHERE id = $1 AND workspace_id = $2 "
				       "AND deleted_ms IS NULL", row_vol_one, &o, NULL, DBV_S(key), DBV_S(workspace));
	else
		rc = RUN(st, "SELECT " VOL_COLS " FROM volumes WHERE id = $1 AND deleted_ms IS NULL",
			 row_vol_one, &o, NULL, DBV_S(key));
	if (rc < 0)
		return rc;
	return o.found ? 0 : errf(ENOENT, "volume %.64s not found", key);
}

int store_volume_delete(struct store *st, const char *workspace, const char *id)
{
	int64_t changes = 0;
	int rc = RUN(st, "UPDATE volumes SET deleted_ms = $1 WHERE id = $2 AND workspace_id = $3 "
			 "AND deleted_ms IS NULL",
		     NULL, NULL, &changes, DBV_I(wall_ms()), DBV_S(id), DBV_S(workspace));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(ENOENT, "volume %.64s not found", id);
}

struct vol_each {
	store_vol_fn *fn;
	void *ctx;
};

static int row_vol_each(void *ctx, const struct dbv *c, int n)
{
	struct vol_each *e = ctx;
	struct vol_row r;
	int rc = fill_vol(&r, c, n);
	return rc < 0 ? rc : e->fn(e->ctx, &r);
}

int store_volume_each(struct store *st, const char *workspace, store_vol_fn *fn, void *ctx)
{
	struct vol_each e = { fn, ctx };
	if (!workspace)
		return store_run(st, "SELECT " VOL_COLS " FROM volumes WHERE deleted_ms IS NULL "
				     "ORDER BY created_ms, id", NULL, 0, row_vol_each, &e, NULL);
	return RUN(st, "SELECT " VOL_COLS " FROM volumes WHERE workspace_id = $1 AND deleted_ms IS NULL "
		       "ORDER BY created_ms, id", row_vol_each, &e, NULL, DBV_S(workspace));
}

static int row_usage(void *ctx, const struct dbv *c, int n)
{
	int64_t *out = ctx;
	if (n < 2)
		return errf(EIO, "store: short row");
	out[0] = dbv_int(&c[0]);
	out[1] = dbv_int(&c[1]);
	return 1;
}

int store_volume_usage(struct store *st, const char *workspace, int64_t *count, int64_t *mib)
{
	int64_t v[2] = { 0, 0 };
	int rc = RUN(st, "SELECT COUNT(*), COALESCE(SUM(size_mib), 0) FROM volumes WHERE workspace_id = $1 "
			 "AND deleted_ms IS NULL", row_usage, v, NULL, DBV_S(workspace));
	*count = v[0];
	*mib = v[1];
	return rc < 0 ? rc : 0;
}

int store_volume_attach(struct store *st, const struct vol_att *a)
{
	return RUN(st, "INSERT INTO volume_attachments (" ATT_COLS ") VALUES ($1, $2, $3, $4, $5, $6)",
		   NULL, NULL, NULL, DBV_S(a->volume), DBV_S(a->sandbox), DBV_I(a->slot),
		   DBV_I(a->read_only ? 1 : 0), DBV_S(a->path), DBV_I(a->created_ms));
}

int store_volume_detach_sandbox(struct store *st, const char *sandbox)
{
	return RUN(st, "DELETE FROM volume_attachments WHERE sandbox_id = $1", NULL, NULL, NULL,
		   DBV_S(sandbox));
}

int store_volume_detach_ended(struct store *st, int64_t *n)
{
	return RUN(st, "DELETE FROM volume_attachments WHERE sandbox_id NOT IN (SELECT id FROM sandboxes "
		       "WHERE state NOT IN ($1, $2))",
		   NULL, NULL, n, DBV_S(sbx_state_name(SBX_DELETED)), DBV_S(sbx_state_name(SBX_FAILED)));
}

int store_volume_detach_slot(struct store *st, const char *sandbox, int slot)
{
	int64_t changes = 0;
	int rc = RUN(st, "DELETE FROM volume_attachments WHERE sandbox_id = $1 AND slot = $2", NULL, NULL, &changes,
		     DBV_S(sandbox), DBV_I(slot));
	return rc < 0 ? rc : changes ? 0 : errf(ENOENT, "sandbox %s has no volume in slot %d", sandbox, slot);
}

struct att_each {
	store_att_fn *fn;
	void *ctx;
};

static int row_att(void *ctx, const struct dbv *c, int n)
{
	struct att_each *e = ctx;
	if (n < 6)
		return errf(EIO, "store: short attachment row");
	struct vol_att a = { 0 };
	copy_str(a.volume, sizeof a.volume, dbv_text(&c[0]));
	copy_str(a.sandbox, sizeof a.sandbox, dbv_text(&c[1]));
	a.slot = (int)dbv_int(&c[2]);
	a.read_only = dbv_int(&c[3]) != 0;
	copy_str(a.path, sizeof a.path, dbv_text(&c[4]));
	a.created_ms = dbv_int(&c[5]);
	return e->fn(e->ctx, &a);
}

int store_volume_attachments(struct store *st, const char *volume, const char *sandbox,
			     store_att_fn *fn, void *ctx)
{
	struct att_each e = { fn, ctx };
	if (volume)
		return RUN(st, "SELECT " ATT_COLS " FROM volume_attachments WHERE volume_id = $1 "
			       "ORDER BY created_ms, sandbox_id", row_att, &e, NULL, DBV_S(volume));
	return RUN(st, "SELECT " ATT_COLS " FROM volume_attachments WHERE sandbox_id = $1 ORDER BY slot",
		   row_att, &e, NULL, DBV_S(sandbox));
}

int store_volume_attachments_ws(struct store *st, const char *workspace, store_att_fn *fn, void *ctx)
{
	struct att_each e = { fn, ctx };
	if (!workspace)
		return store_run(st, "SELECT " ATT_COLS " FROM volume_attachments WHERE volume_id IN (SELECT id "
				     "FROM volumes WHERE deleted_ms IS NULL) ORDER BY created_ms, sandbox_id",
				 NULL, 0, row_att, &e, NULL);
	return RUN(st, "SELECT " ATT_COLS " FROM volume_attachments WHERE volume_id IN (SELECT id FROM volumes "
		       "WHERE workspace_id = $1 AND deleted_ms IS NULL) ORDER BY created_ms, sandbox_id",
		   row_att, &e, NULL, DBV_S(workspace));
}
