/*
 * store_apps: the rows of apps and of their lifecycle lines
 * (store/store_apps.h).
 */
#include "store/store_apps.h"
#include "store/store_int.h"

#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define APP_COLS                                                                            \
	"id, workspace_id, name, template, snapshot_id, source_runs, command, env, port, "   \
	"restart, idle_seconds, sandbox_id, retiring_id, retire_ms, gen, version, "          \
	"vm_restarts, state, reason, created_ms, updated_ms, deleted_ms"
#define APP_NCOLS 22

int store_app_insert(struct store *st, const struct app_row *r)
{
	int64_t changes = 0;
	int rc = RUN(st,
		     "INSERT INTO apps (" APP_COLS ") SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
		     "$12, $13, $14, $15, $16, $17, $18, $19, $20, $21, NULL "
		     "WHERE NOT EXISTS (SELECT 1 FROM apps WHERE workspace_id = $2 AND name = $3 "
		     "AND deleted_ms IS NULL)",
		     NULL, NULL, &changes, DBV_S(r->id), DBV_S(r->workspace), DBV_S(r->name), DBV_S(r->template),
		     DBV_S(r->snapshot), DBV_I(r->source_runs), DBV_S(r->command), DBV_S(r->env), DBV_I(r->port),
		     DBV_S(r->restart), DBV_I(r->idle_seconds), DBV_S(r->sandbox), DBV_S(r->retiring),
		     DBV_I(r->retire_ms), DBV_I(r->gen), DBV_I(r->version), DBV_I(r->vm_restarts),
		     DBV_S(r->state), DBV_S(r->reason), DBV_I(r->created_ms), DBV_I(r->updated_ms));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(EEXIST, "an app named '%s' exists", r->name);
}

static int fill_app(struct app_row *r, const struct dbv *c, int n)
{
	if (n < APP_NCOLS)
		return errf(EIO, "store: short app row");
	memset(r, 0, sizeof *r);
	copy_str(r->id, sizeof r->id, dbv_text(&c[0]));
	copy_str(r->workspace, sizeof r->workspace, dbv_text(&c[1]));
	copy_str(r->name, sizeof r->name, dbv_text(&c[2]));
	copy_str(r->template, sizeof r->template, dbv_text(&c[3]));
	copy_str(r->snapshot, sizeof r->snapshot, dbv_text(&c[4]));
	r->source_runs = dbv_int(&c[5]) != 0;
	copy_str(r->command, sizeof r->command, dbv_text(&c[6]));
	copy_str(r->env, sizeof r->env, dbv_text(&c[7]));
	r->port = (int)dbv_int(&c[8]);
	copy_str(r->restart, sizeof r->restart, dbv_text(&c[9]));
	r->idle_seconds = dbv_int(&c[10]);
	copy_str(r->sandbox, sizeof r->sandbox, dbv_text(&c[11]));
	copy_str(r->retiring, sizeof r->retiring, dbv_text(&c[12]));
	r->retire_ms = dbv_int(&c[13]);
	r->gen = dbv_int(&c[14]);
	r->version = dbv_int(&c[15]);
	r->vm_restarts = dbv_int(&c[16]);
	copy_str(r->state, sizeof r->state, dbv_text(&c[17]));
	copy_str(r->reason, sizeof r->reason, dbv_text(&c[18]));
	r->created_ms = dbv_int(&c[19]);
	r->updated_ms = dbv_int(&c[20]);
	r->deleted_ms = dbv_int(&c[21]);
	return 0;
}

struct app_one {
	struct app_row *r;
	bool found;
};

static int row_app_one(void *ctx, const struct dbv *c, int n)
{
	struct app_one *o = ctx;
	int rc = fill_app(o->r, c, n);
	if (rc == 0)
		o->found = true;
	return rc < 0 ? rc : 1;
}

int store_app_load(struct store *st, const char *workspace, const char *key, bool by_name, struct app_row *r)
{
	struct app_one o = { r, false };
	int rc;
	if (workspace && by_name)
		rc = RUN(st, "SELECT " APP_COLS " FROM apps WHERE name = $1 AND workspace_id = $2 "
			     "AND deleted_ms IS NULL", row_app_one, &o, NULL, DBV_S(key), DBV_S(workspace));
	else if (workspace)
		rc = RUN(st, "SELECT " APP_COLS " FROM apps WHERE id = $1 AND workspace_id = $2 "
			     "AND deleted_ms IS NULL", row_app_one, &o, NULL, DBV_S(key), DBV_S(workspace));
	else
		rc = RUN(st, "SELECT " APP_COLS " FROM apps WHERE id = $1 AND deleted_ms IS NULL", row_app_one,
			 &o, NULL, DBV_S(key));
	if (rc < 0)
		return rc;
	return o.found ? 0 : errf(ENOENT, "app %.64s not found", key);
}

int store_app_by_sandbox(struct store *st, const char *sandbox, struct app_row *r)
{
	struct app_one o = { r, false };
	int rc = RUN(st, "SELECT " APP_COLS " FROM apps WHERE sandbox_id = $1 AND deleted_ms IS NULL",
		     row_app_one, &o, NULL, DBV_S(sandbox));
	if (rc < 0)
		return rc;
	return o.found ? 0 : errf(ENOENT, "no app is served by sandbox %.40s", sandbox);
}

int store_app_update(struct store *st, const struct app_row *r, int64_t expect_gen)
{
	int64_t changes = 0;
	int rc = RUN(st,
		     "UPDATE apps SET template = $1, snapshot_id = $2, source_runs = $3, command = $4, env = $5, "
		     "port = $6, restart = $7, idle_seconds = $8, sandbox_id = $9, retiring_id = $10, "
		     "retire_ms = $11, gen = $12, version = $13, vm_restarts = $14, state = $15, reason = $16, "
		     "updated_ms = $17 WHERE id = $18 AND gen = $19 AND deleted_ms IS NULL",
		     NULL, NULL, &changes, DBV_S(r->template), DBV_S(r->snapshot), DBV_I(r->source_runs),
		     DBV_S(r->command), DBV_S(r->env), DBV_I(r->port), DBV_S(r->restart), DBV_I(r->idle_seconds),
		     DBV_S(r->sandbox), DBV_S(r->retiring), DBV_I(r->retire_ms), DBV_I(r->gen), DBV_I(r->version),
		     DBV_I(r->vm_restarts), DBV_S(r->state), DBV_S(r->reason), DBV_I(wall_ms()), DBV_S(r->id),
		     DBV_I(expect_gen));
	if (rc < 0 || changes)
		return rc < 0 ? rc : 0;
	struct app_row now;
	rc = store_app_load(st, NULL, r->id, false, &now);
	if (rc < 0)
		return rc;
	return errf(ESTALE, "app %s was changed meanwhile (generation %lld, not %lld)", r->id,
		    (long long)now.gen, (long long)expect_gen);
}

int store_app_delete(struct store *st, const char *workspace, const char *id)
{
	int64_t changes = 0;
	int rc = RUN(st, "UPDATE apps SET deleted_ms = $1 WHERE id = $2 AND workspace_id = $3 AND deleted_ms IS NULL",
		     NULL, NULL, &changes, DBV_I(wall_ms()), DBV_S(id), DBV_S(workspace));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(ENOENT, "app %.64s not found", id);
}

struct app_each {
	store_app_fn *fn;
	void *ctx;
};

static int row_app_each(void *ctx, const struct dbv *c, int n)
{
	struct app_each *e = ctx;
	struct app_row r;
	int rc = fill_app(&r, c, n);
	return rc < 0 ? rc : e->fn(e->ctx, &r);
}

int store_app_each(struct store *st, const char *workspace, store_app_fn *fn, void *ctx)
{
	struct app_each e = { fn, ctx };
	if (!workspace)
		return store_run(st, "SELECT " APP_COLS " FROM apps WHERE deleted_ms IS NULL ORDER BY created_ms, id",
				 NULL, 0, row_app_each, &e, NULL);
	return RUN(st, "SELECT " APP_COLS " FROM apps WHERE workspace_id = $1 AND deleted_ms IS NULL "
		       "ORDER BY created_ms, id", row_app_each, &e, NULL, DBV_S(workspace));
}

int store_app_event(struct store *st, const char *app, const char *text)
{
	/* The next number and the insert are one statement; two replicas
	 * writing at once may collide on the key, and one line is then
	 * lost rather than the pair doubled: logged by the caller. */
	int rc = RUN(st,
		     "INSERT INTO app_events (app_id, seq, ts_ms, text) SELECT $1, "
		     "COALESCE(MAX(seq), 0) + 1, $2, $3 FROM app_events WHERE app_id = $1",
		     NULL, NULL, NULL, DBV_S(app), DBV_I(wall_ms()), DBV_S(text));
	if (rc < 0)
		return rc;
	return RUN(st,
		   "DELETE FROM app_events WHERE app_id = $1 AND seq <= "
		   "(SELECT MAX(seq) FROM app_events WHERE app_id = $1) - $2",
		   NULL, NULL, NULL, DBV_S(app), DBV_I(APP_EVENTS_KEPT));
}

struct ev_each {
	store_app_event_fn *fn;
	void *ctx;
};

static int row_event(void *ctx, const struct dbv *c, int n)
{
	struct ev_each *e = ctx;
	if (n < 2)
		return errf(EIO, "store: short app event row");
	return e->fn(e->ctx, dbv_int(&c[0]), dbv_text(&c[1]));
}

int store_app_events(struct store *st, const char *app, store_app_event_fn *fn, void *ctx)
{
	struct ev_each e = { fn, ctx };
	return RUN(st, "SELECT ts_ms, text FROM app_events WHERE app_id = $1 ORDER BY seq", row_event, &e, NULL,
		   DBV_S(app));
}

static int row_kept(void *ctx, const struct dbv *c, int n)
{
	char **text = ctx;
	if (n < 1)
		return errf(EIO, "store: short app log row");
	free(*text);
	*text = strdup(dbv_text(&c[0]));
	return *text ? 0 : errf(ENOMEM, "out of memory");
}

int store_app_log_kept(struct store *st, const char *app, char **text)
{
	*text = NULL;
	int rc = RUN(st, "SELECT text FROM app_logs WHERE app_id = $1", row_kept, text, NULL, DBV_S(app));
	if (rc == 0 && !*text && !(*text = strdup("")))
		rc = errf(ENOMEM, "out of memory");
	if (rc < 0) {
		free(*text);
		*text = NULL;
	}
	return rc;
}

int store_app_log_keep(struct store *st, const char *app, const char *text)
{
	return RUN(st, "INSERT INTO app_logs (app_id, text) VALUES ($1, $2) "
		       "ON CONFLICT (app_id) DO UPDATE SET text = excluded.text",
		   NULL, NULL, NULL, DBV_S(app), DBV_S(text));
}

int store_app_log_drop(struct store *st, const char *app)
{
	return RUN(st, "DELETE FROM app_logs WHERE app_id = $1", NULL, NULL, NULL, DBV_S(app));
}
