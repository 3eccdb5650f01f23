/*
 * store_databases: the rows of databases and of their backups
 * (store/store_databases.h).
 */
#include "store/store_databases.h"
#include "store/store_int.h"

#include "common/err.h"

#include <errno.h>
#include <string.h>

#define DB_COLS "id, workspace_id, name, sandbox_id, from_backup, created_ms, deleted_ms"
/* A database with its schedule and its external port. */
#define DB_SELECT "SELECT d.id, d.workspace_id, d.name, d.sandbox_id, d.from_backup, d.created_ms, d.deleted_ms, " \
	"COALESCE(s.interval_s, 0), COALESCE(s.kept, 0), COALESCE(s.next_ms, 0), COALESCE(x.port, 0) " \
	"FROM databases d LEFT JOIN database_schedules s ON s.database_id = d.id " \
	"LEFT JOIN database_external x ON x.database_id = d.id "
#define DB_NCOLS 11
#define BK_COLS "id, database_id, workspace_id, created_ms, kind"
#define BK_NCOLS 5

int store_db_insert(struct store *st, const struct db_row *r)
{
	int64_t changes = 0;
	int rc = RUN(st,
		     "INSERT INTO databases (" DB_COLS ") SELECT $1, $2, $3, $4, $5, $6, NULL "
		     "WHERE NOT EXISTS (SELECT 1 FROM databases WHERE workspace_id = $2 AND name = $3 "
		     "AND deleted_ms IS NULL)",
		     NULL, NULL, &changes, DBV_S(r->id), DBV_S(r->workspace), DBV_S(r->name), DBV_S(r->sandbox),
		     DBV_S(r->from_backup), DBV_I(r->created_ms));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(EEXIST, "a database named '%s' exists", r->name);
}

static int fill_db(struct db_row *r, const struct dbv *c, int n)
{
	if (n < DB_NCOLS)
		return errf(EIO, "store: short database row");
	memset(r, 0, sizeof *r);
	copy_str(r->id, sizeof r->id, dbv_text(&c[0]));
	copy_str(r->workspace, sizeof r->workspace, dbv_text(&c[1]));
	copy_str(r->name, sizeof r->name, dbv_text(&c[2]));
	copy_str(r->sandbox, sizeof r->sandbox, dbv_text(&c[3]));
	copy_str(r->from_backup, sizeof r->from_backup, dbv_text(&c[4]));
	r->created_ms = dbv_int(&c[5]);
	r->deleted_ms = dbv_int(&c[6]);
	r->backup_interval_s = dbv_int(&c[7]);
	r->backups_kept = dbv_int(&c[8]);
	r->next_backup_ms = dbv_int(&c[9]);
	r->external_port = dbv_int(&c[10]);
	return 0;
}

struct db_one {
	struct db_row *r;
	bool found;
};

static int row_db_one(void *ctx, const struct dbv *c, int n)
{
	struct db_one *o = ctx;
	int rc = fill_db(o->r, c, n);
	if (rc == 0)
		o->found = true;
	return rc < 0 ? rc : 1;
}

int store_db_load(struct store *st, const char *workspace, const char *key, bool by_name, struct db_row *r)
{
	struct db_one o = { r, false };
	int rc = by_name ? RUN(st, DB_SELECT "WHERE d.name = $1 AND d.workspace_id = $2 AND d.deleted_ms IS NULL",
			       row_db_one, &o, NULL, DBV_S(key), DBV_S(workspace))
			 : RUN(st, DB_SELECT "WHERE d.id = $1 AND d.workspace_id = $2 AND d.deleted_ms IS NULL",
			       row_db_one, &o, NULL, DBV_S(key), DBV_S(workspace));
	if (rc < 0)
		return rc;
	return o.found ? 0 : errf(ENOENT, "database %.64s not found", key);
}

int store_db_set_sandbox(struct store *st, const char *id, const char *sandbox)
{
	return RUN(st, "UPDATE databases SET sandbox_id = $1 WHERE id = $2", NULL, NULL, NULL, DBV_S(sandbox),
		   DBV_S(id));
}

int store_db_set_schedule(struct store *st, const struct db_row *r)
{
	if (!r->backup_interval_s)
		return RUN(st, "DELETE FROM database_schedules WHERE database_id = $1", NULL, NULL, NULL, DBV_S(r->id));
	return RUN(st, "INSERT INTO database_schedules (database_id, interval_s, kept, next_ms) VALUES ($1, $2, $3, $4) "
		       "ON CONFLICT (database_id) DO UPDATE SET interval_s = excluded.interval_s, kept = excluded.kept, "
		       "next_ms = excluded.next_ms",
		   NULL, NULL, NULL, DBV_S(r->id), DBV_I(r->backup_interval_s), DBV_I(r->backups_kept),
		   DBV_I(r->next_backup_ms));
}

static int row_idle(void *ctx, const struct dbv *c, int n)
{
	if (n < 1)
		return errf(EIO, "store: short database idle row");
	*(int64_t *)ctx = dbv_int(&c[0]);
	return 0;
}

int store_db_idle(struct store *st, const char *id, int64_t dflt, int64_t *secs)
{
	*secs = dflt;
	return RUN(st, "SELECT idle_seconds FROM database_idle WHERE database_id = $1", row_idle, secs, NULL,
		   DBV_S(id));
}

int store_db_set_idle(struct store *st, const char *id, int64_t secs)
{
	return RUN(st, "INSERT INTO database_idle (database_id, idle_seconds) VALUES ($1, $2) "
		       "ON CONFLICT (database_id) DO UPDATE SET idle_seconds = excluded.idle_seconds",
		   NULL, NULL, NULL, DBV_S(id), DBV_I(secs));
}

int store_db_set_external(struct store *st, const char *id, int64_t port)
{
	if (!port)
		return RUN(st, "DELETE FROM database_external WHERE database_id = $1", NULL, NULL, NULL, DBV_S(id));
	int64_t changes = 0;
	int rc = RUN(st, "INSERT INTO database_external (database_id, port) SELECT $1, $2 "
			 "WHERE NOT EXISTS (SELECT 1 FROM database_external WHERE port = $2 OR database_id = $1)",
		     NULL, NULL, &changes, DBV_S(id), DBV_I(port));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(EEXIST, "port %lld is another database's, or database %s has one",
				  (long long)port, id);
}

struct pem_out {
	char *p;
	size_t cap;
};

static int row_tls(void *ctx, const struct dbv *c, int n)
{
	struct pem_out *o = ctx;
	if (n < 1)
		return errf(EIO, "store: short database TLS row");
	copy_str(o->p, o->cap, dbv_text(&c[0]));
	return 0;
}

int store_db_tls(struct store *st, const char *id, char *pem, size_t cap)
{
	struct pem_out o = { pem, cap };
	pem[0] = 0;
	return RUN(st, "SELECT cert FROM database_tls WHERE database_id = $1", row_tls, &o, NULL, DBV_S(id));
}

int store_db_set_tls(struct store *st, const char *id, const char *pem)
{
	return RUN(st, "INSERT INTO database_tls (database_id, cert) VALUES ($1, $2) "
		       "ON CONFLICT (database_id) DO UPDATE SET cert = excluded.cert",
		   NULL, NULL, NULL, DBV_S(id), DBV_S(pem));
}

int store_db_delete(struct store *st, const char *workspace, const char *id)
{
	int64_t changes = 0;
	int rc = RUN(st, "UPDATE databases SET deleted_ms = $1 WHERE id = $2 AND workspace_id = $3 "
			 "AND deleted_ms IS NULL",
		     NULL, NULL, &changes, DBV_I(wall_ms()), DBV_S(id), DBV_S(workspace));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(ENOENT, "database %.64s not found", id);
}

struct db_each {
	store_db_fn *fn;
	store_db_backup_fn *bfn;
	void *ctx;
};

static int row_db_each(void *ctx, const struct dbv *c, int n)
{
	struct db_each *e = ctx;
	struct db_row r;
	int rc = fill_db(&r, c, n);
	return rc < 0 ? rc : e->fn(e->ctx, &r);
}

int store_db_each(struct store *st, const char *workspace, store_db_fn *fn, void *ctx)
{
	struct db_each e = { .fn = fn, .ctx = ctx };
	if (!workspace)
		return RUN(st, DB_SELECT "WHERE d.deleted_ms IS NULL ORDER BY d.created_ms, d.id", row_db_each, &e,
			   NULL);
	return RUN(st, DB_SELECT "WHERE d.workspace_id = $1 AND d.deleted_ms IS NULL ORDER BY d.created_ms, d.id",
		   row_db_each, &e, NULL, DBV_S(workspace));
}

int store_db_backup_insert(struct store *st, const struct db_backup_row *r)
{
	return RUN(st, "INSERT INTO database_backups (" BK_COLS ") VALUES ($1, $2, $3, $4, $5)", NULL, NULL, NULL,
		   DBV_S(r->id), DBV_S(r->database), DBV_S(r->workspace), DBV_I(r->created_ms),
		   DBV_S(r->kind[0] ? r->kind : "manual"));
}

int store_db_backup_delete(struct store *st, const char *id)
{
	return RUN(st, "DELETE FROM database_backups WHERE id = $1", NULL, NULL, NULL, DBV_S(id));
}

static int fill_backup(struct db_backup_row *r, const struct dbv *c, int n)
{
	if (n < BK_NCOLS)
		return errf(EIO, "store: short backup row");
	memset(r, 0, sizeof *r);
	copy_str(r->id, sizeof r->id, dbv_text(&c[0]));
	copy_str(r->database, sizeof r->database, dbv_text(&c[1]));
	copy_str(r->workspace, sizeof r->workspace, dbv_text(&c[2]));
	r->created_ms = dbv_int(&c[3]);
	copy_str(r->kind, sizeof r->kind, dbv_text(&c[4]));
	return 0;
}

struct bk_one {
	struct db_backup_row *r;
	bool found;
};

static int row_bk_one(void *ctx, const struct dbv *c, int n)
{
	struct bk_one *o = ctx;
	int rc = fill_backup(o->r, c, n);
	if (rc == 0)
		o->found = true;
	return rc < 0 ? rc : 1;
}

int store_db_backup_load(struct store *st, const char *workspace, const char *id, struct db_backup_row *r)
{
	struct bk_one o = { r, false };
	int rc = RUN(st, "SELECT " BK_COLS " FROM database_backups WHERE id = $1 AND workspace_id = $2", row_bk_one,
		     &o, NULL, DBV_S(id), DBV_S(workspace));
	if (rc < 0)
		return rc;
	return o.found ? 0 : errf(ENOENT, "backup %.64s not found", id);
}

static int row_bk_each(void *ctx, const struct dbv *c, int n)
{
	struct db_each *e = ctx;
	struct db_backup_row r;
	int rc = fill_backup(&r, c, n);
	return rc < 0 ? rc : e->bfn(e->ctx, &r);
}

int store_db_backup_each(struct store *st, const char *workspace, const char *database, store_db_backup_fn *fn,
			 void *ctx)
{
	struct db_each e = { .bfn = fn, .ctx = ctx };
	return RUN(st, "SELECT " BK_COLS " FROM database_backups WHERE workspace_id = $1 AND database_id = $2 "
		       "ORDER BY created_ms, id", row_bk_each, &e, NULL, DBV_S(workspace), DBV_S(database));
}

int store_db_event(struct store *st, const char *database, const char *kind, const char *text)
{
	/* As store_app_event: the number and the insert in one statement. */
	int rc = RUN(st,
		     "INSERT INTO database_events (database_id, seq, ts_ms, kind, text) SELECT $1, "
		     "COALESCE(MAX(seq), 0) + 1, $2, $3, $4 FROM database_events WHERE database_id = $1",
		     NULL, NULL, NULL, DBV_S(database), DBV_I(wall_ms()), DBV_S(kind), DBV_S(text));
	if (rc < 0)
		return rc;
	return RUN(st,
		   "DELETE FROM database_events WHERE database_id = $1 AND seq <= "
		   "(SELECT MAX(seq) FROM database_events WHERE database_id = $1) - $2",
		   NULL, NULL, NULL, DBV_S(database), DBV_I(DB_EVENTS_KEPT));
}

struct dbev_each {
	store_db_event_fn *fn;
	void *ctx;
};

static int row_db_event(void *ctx, const struct dbv *c, int n)
{
	struct dbev_each *e = ctx;
	if (n < 3)
		return errf(EIO, "store: short database event row");
	return e->fn(e->ctx, dbv_int(&c[0]), dbv_text(&c[1]), dbv_text(&c[2]));
}

int store_db_events(struct store *st, const char *database, store_db_event_fn *fn, void *ctx)
{
	struct dbev_each e = { fn, ctx };
	return RUN(st, "SELECT ts_ms, kind, text FROM database_events WHERE database_id = $1 ORDER BY seq",
		   row_db_event, &e, NULL, DBV_S(database));
}
