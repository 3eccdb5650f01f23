/*
 * store: records over the db driver. Every statement here is plain SQL that
 * SQLite and PostgreSQL both run (see db.h). For a driver with one
 * connection (SQLite: it serializes writers anyway, and one connection
 * under a lock is simplest for a single box) one mutex serializes the
 * calls; PostgreSQL's driver has a pool and takes calls from many threads.
 *
 * Races between replicas (several kilnd on one PostgreSQL): every call
 * here is one statement, atomic on its own, except where noted: the
 * read-then-write ones (store_port_add, the schema's migration) run in a
 * transaction under a lock (store_tx, store_tx_lock); the others are
 * written so that no read decides a write (INSERT ... ON CONFLICT, UPDATE
 * ... WHERE the old state, store_workspace_ensure reading back whichever
 * insert won).
 */
#include "store/store.h"
#include "store/db.h"
#include "store/db_url.h"
#include "store/schema.h"
#include "store/store_int.h"
#include "common/err.h"
#include "common/randid.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct store {
	const struct db_driver *drv;
	struct db *db;
	/* Serialized drivers: held by each call, and through a transaction. */
	pthread_mutex_t *lock;
	pthread_mutex_t lock_storage;
	/* Set in the store a store_tx callback is handed: every call runs in
	 * this transaction (the lock, if any, is held already). */
	struct db_tx *tx;
};

int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int make_id(char out[ID_MAX], const char *prefix)
{
	return randid_make(out, ID_MAX, prefix, 20);
}

static char *dup_or_null(const struct dbv *v)
{
	return v->type == DBV_TEXT ? strdup(v->s) : NULL;
}

/* Rows a query gave, kept so that its row callback runs once the store's
 * lock is given back. A callback may reach the host (an app's listing
 * reads its sandbox), and the host may write to the store (a sandbox whose
 * VMM died is marked failed as it is found): under the lock, which is not
 * recursive, that hung kilnd for good (`kiln apps` while an app's VMM had
 * just died). Each row is one block: its columns, then their text. */
struct kept_row {
	struct kept_row *next;
	int n;
	struct dbv cols[];
};

struct kept {
	struct kept_row *head, **tail;
};

static int keep_row(void *ctx, const struct dbv *c, int n)
{
	struct kept *k = ctx;
	size_t text = 0;
	for (int i = 0; i < n; i++)
		if (c[i].type == DBV_TEXT)
			text += strlen(c[i].s) + 1;
	struct kept_row *r = malloc(sizeof *r + (size_t)n * sizeof r->cols[0] + text);
	if (!r)
		return errf(ENOMEM, "store: out of memory");
	r->next = NULL;
	r->n = n;
	char *t = (char *)&r->cols[n];
	for (int i = 0; i < n; i++) {
		r->cols[i] = c[i];
		if (c[i].type == DBV_TEXT) {
			size_t len = strlen(c[i].s) + 1;
			r->cols[i].s = memcpy(t, c[i].s, len);
			t += len;
		}
	}
	*k->tail = r;
	k->tail = &r->next;
	return 0;
}

int store_run(struct store *st, const char *sql, const struct dbv *p, int n,
	      db_row_fn *fn, void *ctx, int64_t *changes)
{
	/* In a transaction the caller holds the lock on purpose; without a
	 * lock (PostgreSQL's pool) a callback holds a connection, not it. */
	if (st->tx || !st->lock)
		return st->drv->exec(st->db, st->tx, sql, p, n, fn, ctx, changes);
	struct kept k = { NULL, &k.head };
	pthread_mutex_lock(st->lock);
	int rc = st->drv->exec(st->db, NULL, sql, p, n, fn ? keep_row : NULL, &k, changes);
	pthread_mutex_unlock(st->lock);
	/* As the drivers do: a callback's non-zero answer ends the rows
	 * and is what the statement returns. */
	for (struct kept_row *r = k.head, *next; r; r = next) {
		next = r->next;
		if (rc == 0)
			rc = fn(ctx, r->cols, r->n);
		free(r);
	}
	return rc;
}

int store_tx(struct store *st, store_tx_fn *fn, void *ctx)
{
	if (st->tx)
		return fn(st, ctx);	/* joins the transaction it is in */
	if (st->lock)
		pthread_mutex_lock(st->lock);
	struct store view = { .drv = st->drv, .db = st->db };
	int rc = st->drv->begin(st->db, &view.tx);
	if (rc == 0) {
		rc = fn(&view, ctx);
		int end = st->drv->end(st->db, view.tx, rc >= 0);
		if (rc >= 0 && end < 0)
			rc = end;
	}
	if (st->lock)
		pthread_mutex_unlock(st->lock);
	return rc;
}

int store_tx_lock(struct store *tx, const char *key)
{
	if (!tx->tx)
		return errf(EINVAL, "store: a lock outside a transaction");
	/* FNV-1a: a stable 64-bit name for the key on every replica. */
	uint64_t h = 0xcbf29ce484222325ull;
	for (const char *p = key; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	return tx->drv->lock(tx->db, tx->tx, (int64_t)h);
}

static int row_int(void *ctx, const struct dbv *c, int n)
{
	if (n > 0)
		*(int64_t *)ctx = dbv_int(&c[0]);
	return 0;
}

/* Create what is missing and bring an older schema up to schema_version,
 * in one transaction under one lock: two kilnd starting together on a
 * fresh or old PostgreSQL database must not both create or both migrate
 * (concurrent CREATE TABLE IF NOT EXISTS can fail there, and an ALTER
 * run twice does). The second one in finds the work done. */
static int migrate(struct store *tx, void *ctx)
{
	(void)ctx;
	int rc = store_tx_lock(tx, "kiln schema");
	rc = rc ?: tx->drv->script(tx->db, tx->tx, schema_sql);
	int64_t version = 0;
	rc = rc ?: RUN(tx, "SELECT value FROM meta WHERE key = $1", row_int, &version, NULL,
		       DBV_S("schema_version"));
	if (rc < 0)
		return rc;
	if (version > schema_version)
		return errf(EPROTO, "database schema version %lld is newer than this kilnd (%d)",
			    (long long)version, schema_version);
	if (version == schema_version)
		return 0;
	/* No version: a fresh database, which schema_sql just made whole. */
	for (int i = 0; version > 0 && i < schema_nmigrations; i++) {
		const struct migration *m = &schema_migrations[i];
		if (m->to <= version)
			continue;
		if ((rc = tx->drv->script(tx->db, tx->tx, m->sql)) < 0)
			return errf(-rc, "migrating from schema version %d to %d: %s", m->to - 1, m->to,
				    errmsg());
	}
	char v[16];
	snprintf(v, sizeof v, "%d", schema_version);
	return RUN(tx, "INSERT INTO meta (key, value) VALUES ($1, $2) "
		       "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
		   NULL, NULL, NULL, DBV_S("schema_version"), DBV_S(v));
}

int store_open(const char *target, struct store **out)
{
	const struct db_driver *drv = &db_sqlite;
	if (strncmp(target, "sqlite:", 7) == 0)
		target += 7;
	else if (strncmp(target, "postgres://", 11) == 0 || strncmp(target, "postgresql://", 13) == 0)
		drv = &db_pg;
	else if (strncmp(target, "postgres", 8) == 0)
		return errf(EINVAL, "store: %.64s...: want postgresql://[user[:password]@]host[:port]/dbname",
			    strncmp(target, "postgresql", 10) == 0 ? "postgresql" : "postgres");
	char shown[256];
	db_url_redact(target, shown, sizeof shown);
	struct store *st = calloc(1, sizeof *st);
	if (!st)
		return errf(ENOMEM, "store: out of memory");
	st->drv = drv;
	if (drv->serialized) {
		pthread_mutex_init(&st->lock_storage, NULL);
		st->lock = &st->lock_storage;
	}
	int rc = st->drv->open(target, &st->db);
	if (rc < 0) {
		rc = errf(-rc, "store: %s: %s", shown, errmsg());
		if (st->lock)
			pthread_mutex_destroy(st->lock);
		free(st);
		return rc;
	}
	if ((rc = store_tx(st, migrate, NULL)) < 0) {
		rc = errf(-rc, "store: %s: %s", shown, errmsg());
		store_close(st);
		return rc;
	}
	*out = st;
	return 0;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	st->drv->close(st->db);
	if (st->lock)
		pthread_mutex_destroy(st->lock);
	free(st);
}

/* ---- workspaces and keys ---------------------------------------------- */

static int row_first_text(void *ctx, const struct dbv *c, int n)
{
	if (n > 0)
		copy_str(ctx, ID_MAX, dbv_text(&c[0]));
	return 1;
}

int store_workspace_mirror(struct store *st, const char *id)
{
	/* Its name is its id here: a host has no other use for one, and
	 * names are unique. */
	return RUN(st, "INSERT INTO workspaces (id, name, created_ms) VALUES ($1, $1, $2) "
		       "ON CONFLICT DO NOTHING",
		   NULL, NULL, NULL, DBV_S(id), DBV_I(wall_ms()));
}

int store_workspace_ensure(struct store *st, const char *name, char id[ID_MAX])
{
	char found[ID_MAX] = "";
	int rc = RUN(st, "SELECT id FROM workspaces WHERE name = $1", row_first_text, found, NULL,
		     DBV_S(name));
	if (rc < 0)
		return rc;
	if (found[0]) {
		copy_str(id, ID_MAX, found);
		return RUN(st, "UPDATE workspaces SET deleted_ms = NULL WHERE id = $1 AND deleted_ms IS NOT NULL",
			   NULL, NULL, NULL, DBV_S(found));
	}
	char fresh[ID_MAX];
	if ((rc = make_id(fresh, "ws_")) < 0)
		return rc;
	rc = RUN(st, "INSERT INTO workspaces (id, name, created_ms) VALUES ($1, $2, $3) "
		     "ON CONFLICT (name) DO NOTHING",
		 NULL, NULL, NULL, DBV_S(fresh), DBV_S(name), DBV_I(wall_ms()));
	if (rc < 0)
		return rc;
	/* Another process may have created it between the two statements. */
	rc = RUN(st, "SELECT id FROM workspaces WHERE name = $1", row_first_text, found, NULL,
		 DBV_S(name));
	if (rc < 0)
		return rc;
	if (!found[0])
		return errf(EIO, "store: workspace %s vanished", name);
	copy_str(id, ID_MAX, found);
	return 0;
}

/* The lock a plan's users and its deletion share (store_plandef_delete):
 * a workspace is put on a plan and the plan is deleted one after the
 * other, never both at once, on every replica. */
static int plan_lock(struct store *tx, const char *plan)
{
	char lock[NAME_MAX_LEN + 8];
	snprintf(lock, sizeof lock, "plan:%s", plan);
	return store_tx_lock(tx, lock);
}

struct plan_set {
	const char *workspace, *plan, *limits;
	bool operators;
};

static int plan_set(struct store *tx, void *ctx)
{
	const struct plan_set *a = ctx;
	int64_t n = 0;
	int rc = plan_lock(tx, a->plan);
	if (rc >= 0 && a->operators) {
		rc = RUN(tx, "SELECT COUNT(*) FROM plans WHERE name = $1", store_row_int1, &n, NULL,
			 DBV_S(a->plan));
		if (rc >= 0 && !n)
			return errf(ENOENT, "plan '%.32s' was deleted", a->plan);
	}
	return rc < 0 ? rc : RUN(tx, "INSERT INTO workspace_plans (workspace_id, plan, limits, updated_ms) "
			     "VALUES ($1, $2, $3, $4) ON CONFLICT (workspace_id) DO UPDATE SET "
			     "plan = excluded.plan, limits = excluded.limits, updated_ms = excluded.updated_ms",
			 NULL, NULL, NULL, DBV_S(a->workspace), DBV_S(a->plan), DBV_S(a->limits),
			 DBV_I(wall_ms()));
}

int store_plan_set(struct store *st, const char *workspace, const char *plan, const char *limits,
		   bool operators)
{
	struct plan_set a = { workspace, plan, limits, operators };
	return store_tx(st, plan_set, &a);
}

struct plan_one {
	char *plan;
	char *limits;
	bool found, oom;
};

static int row_plan(void *ctx, const struct dbv *c, int n)
{
	struct plan_one *o = ctx;
	if (n < 2)
		return 1;
	o->found = true;
	copy_str(o->plan, NAME_MAX_LEN, dbv_text(&c[0]));
	if (c[1].type == DBV_TEXT && !(o->limits = strdup(c[1].s)))
		o->oom = true;
	return 1;
}

int store_plan_get(struct store *st, const char *workspace, char plan[NAME_MAX_LEN], char **limits)
{
	struct plan_one o = { plan, NULL, false, false };
	*limits = NULL;
	int rc = RUN(st, "SELECT plan, limits FROM workspace_plans WHERE workspace_id = $1", row_plan, &o,
		     NULL, DBV_S(workspace));
	if (rc < 0)
		return rc;
	if (o.oom)
		return errf(ENOMEM, "out of memory");
	if (!o.found)
		return errf(ENOENT, "workspace %s has no plan of its own", workspace);
	*limits = o.limits;
	return 0;
}

int store_plandef_set(struct store *st, const char *name, const char *limits)
{
	return RUN(st, "INSERT INTO plans (name, limits, updated_ms) VALUES ($1, $2, $3) "
		       "ON CONFLICT (name) DO UPDATE SET limits = excluded.limits, updated_ms = excluded.updated_ms",
		   NULL, NULL, NULL, DBV_S(name), DBV_S(limits), DBV_I(wall_ms()));
}

struct plandef_del {
	const char *name;
	int64_t *in_use;
};

static int plandef_delete(struct store *tx, void *ctx)
{
	const struct plandef_del *a = ctx;
	int64_t changes = 0;
	int rc = plan_lock(tx, a->name);
	if (rc < 0)
		return rc;
	rc = RUN(tx, "SELECT COUNT(*) FROM workspace_plans p JOIN workspaces w ON w.id = p.workspace_id "
		     "WHERE p.plan = $1 AND w.deleted_ms IS NULL",
		 store_row_int1, a->in_use, NULL, DBV_S(a->name));
	if (rc < 0)
		return rc;
	if (*a->in_use)
		return errf(EBUSY, "%lld workspace%s on plan '%.32s'", (long long)*a->in_use,
			    *a->in_use == 1 ? " is" : "s are", a->name);
	/* Deleted workspaces' rows go too: one made again under its old
	 * name starts on the default plan, not on one that is gone. */
	rc = RUN(tx, "DELETE FROM workspace_plans WHERE plan = $1", NULL, NULL, NULL, DBV_S(a->name));
	if (rc >= 0)
		rc = RUN(tx, "DELETE FROM plans WHERE name = $1", NULL, NULL, &changes, DBV_S(a->name));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(ENOENT, "no operator's plan %.32s", a->name);
}

int store_plandef_delete(struct store *st, const char *name, int64_t *in_use)
{
	struct plandef_del a = { name, in_use };
	*in_use = 0;
	return store_tx(st, plandef_delete, &a);
}

struct plandef_walk {
	store_plandef_fn *fn;
	void *ctx;
};

static int row_plandef(void *ctx, const struct dbv *c, int n)
{
	struct plandef_walk *w = ctx;
	if (n < 3)
		return errf(EIO, "store: plans: short row");
	return w->fn(w->ctx, dbv_text(&c[0]), dbv_text(&c[1]), dbv_int(&c[2]));
}

int store_plandef_each(struct store *st, store_plandef_fn *fn, void *ctx)
{
	struct plandef_walk w = { fn, ctx };
	return store_run(st, "SELECT name, limits, updated_ms FROM plans ORDER BY name", NULL, 0, row_plandef,
			 &w, NULL);
}

struct plandef_one {
	char *limits;
	int64_t updated_ms;
	bool found, oom;
};

static int row_plandef_one(void *ctx, const struct dbv *c, int n)
{
	struct plandef_one *o = ctx;
	if (n < 2)
		return 1;
	o->found = true;
	o->oom = !(o->limits = strdup(dbv_text(&c[0])));
	o->updated_ms = dbv_int(&c[1]);
	return 1;
}

int store_plandef_get(struct store *st, const char *name, char **limits, int64_t *updated_ms)
{
	struct plandef_one o = { 0 };
	*limits = NULL;
	int rc = RUN(st, "SELECT limits, updated_ms FROM plans WHERE name = $1", row_plandef_one, &o, NULL,
		     DBV_S(name));
	if (rc < 0)
		return rc;
	if (o.oom)
		return errf(ENOMEM, "out of memory");
	if (!o.found)
		return errf(ENOENT, "no operator's plan %.32s", name);
	*limits = o.limits;
	if (updated_ms)
		*updated_ms = o.updated_ms;
	return 0;
}

struct creates {
	int64_t *times;
	int cap, n;
};

static int row_create_time(void *ctx, const struct dbv *c, int n)
{
	struct creates *o = ctx;
	if (n > 0 && o->n < o->cap)
		o->times[o->n++] = dbv_int(&c[0]);
	return 0;
}

int store_creates_since(struct store *st, const char *workspace, int64_t since_ms,
			int64_t *times, int cap, int *n)
{
	struct creates o = { times, cap, 0 };
	int rc = RUN(st, "SELECT created_ms FROM sandboxes WHERE workspace_id = $1 AND created_ms >= $2 "
		     "ORDER BY created_ms LIMIT $3", row_create_time, &o, NULL, DBV_S(workspace),
		     DBV_I(since_ms), DBV_I(cap));
	*n = o.n;
	return rc < 0 ? rc : 0;
}

const char *key_scope_name(enum key_scope s)
{
	return s == KEY_READ ? "read" : "full";
}

int key_scope_parse(const char *name, enum key_scope *out)
{
	if (!strcmp(name, "full"))
		*out = KEY_FULL;
	else if (!strcmp(name, "read"))
		*out = KEY_READ;
	else
		return errf(EINVAL, "scope must be \"full\" or \"read\", not \"%s\"", name);
	return 0;
}

int store_key_add(struct store *st, const char *workspace, const char *name,
		  const char *hash, const char *prefix, enum key_scope scope, int64_t expires_ms,
		  char id[ID_MAX])
{
	int rc = make_id(id, "key_");
	if (rc < 0)
		return rc;
	struct dbv expires = expires_ms ? DBV_I(expires_ms) : (struct dbv){ .type = DBV_NULL };
	return RUN(st, "INSERT INTO api_keys (id, workspace_id, name, hash, prefix, created_ms, scope, "
		       "expires_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
		   NULL, NULL, NULL, DBV_S(id), DBV_S(workspace), DBV_S(name), DBV_S(hash),
		   DBV_S(prefix), DBV_I(wall_ms()), DBV_S(key_scope_name(scope)), expires);
}

static int row_key_auth(void *ctx, const struct dbv *c, int n)
{
	struct key_auth *k = ctx;
	if (n < 7)
		return errf(EIO, "store: short key row");
	copy_str(k->id, sizeof k->id, dbv_text(&c[0]));
	copy_str(k->workspace, sizeof k->workspace, dbv_text(&c[1]));
	copy_str(k->prefix, sizeof k->prefix, dbv_text(&c[2]));
	/* An unknown scope (a newer kilnd's) reads as the narrowest. */
	if (key_scope_parse(dbv_text(&c[3]), &k->scope) < 0)
		k->scope = KEY_READ;
	k->last_used_ms = dbv_int(&c[4]);
	copy_str(k->workspace_name, sizeof k->workspace_name, dbv_text(&c[5]));
	k->suspended = dbv_int(&c[6]) != 0;
	return 0;
}

int store_key_lookup(struct store *st, const char *hash, struct key_auth *out)
{
	struct key_auth k = { 0 };
	int rc = RUN(st, "SELECT k.id, k.workspace_id, k.prefix, k.scope, k.last_used_ms, w.name, w.suspended "
			 "FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id WHERE k.hash = $1 "
			 "AND k.revoked_ms IS NULL AND (k.expires_ms IS NULL OR k.expires_ms > $2)",
		     row_key_auth, &k, NULL, DBV_S(hash), DBV_I(wall_ms()));
	if (rc < 0)
		return rc;
	if (!k.id[0])
		return -ENOENT;
	*out = k;
	return 0;
}

int store_key_touch(struct store *st, const char *id, int64_t now_ms)
{
	/* The condition, not the caller's copy of last_used_ms, decides: two
	 * requests (or two replicas) at once write it once. */
	return RUN(st, "UPDATE api_keys SET last_used_ms = $1 WHERE id = $2 "
		       "AND (last_used_ms IS NULL OR last_used_ms <= $3)",
		   NULL, NULL, NULL, DBV_I(now_ms), DBV_S(id), DBV_I(now_ms - 60000));
}

struct key_each {
	store_key_fn *fn;
	void *ctx;
};

static int row_key(void *ctx, const struct dbv *c, int n)
{
	struct key_each *e = ctx;
	struct key_row k = { 0 };
	if (n < 10)
		return errf(EIO, "store: short key row");
	copy_str(k.id, sizeof k.id, dbv_text(&c[0]));
	copy_str(k.workspace, sizeof k.workspace, dbv_text(&c[1]));
	copy_str(k.workspace_name, sizeof k.workspace_name, dbv_text(&c[2]));
	copy_str(k.name, sizeof k.name, dbv_text(&c[3]));
	copy_str(k.prefix, sizeof k.prefix, dbv_text(&c[4]));
	k.created_ms = dbv_int(&c[5]);
	k.revoked_ms = dbv_int(&c[6]);
	if (key_scope_parse(dbv_text(&c[7]), &k.scope) < 0)
		k.scope = KEY_READ;
	k.expires_ms = dbv_int(&c[8]);
	k.last_used_ms = dbv_int(&c[9]);
	return e->fn(e->ctx, &k);
}

int store_key_each(struct store *st, store_key_fn *fn, void *ctx)
{
	struct key_each e = { fn, ctx };
	return store_run(st, "SELECT k.id, k.workspace_id, w.name, k.name, k.prefix, k.created_ms, k.revoked_ms, "
		       "k.scope, k.expires_ms, k.last_used_ms FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id ORDER BY k.created_ms",
		   NULL, 0, row_key, &e, NULL);
}

int store_key_revoke(struct store *st, const char *id_or_prefix)
{
	int64_t changes = 0;
	int rc = RUN(st, "UPDATE api_keys SET revoked_ms = $1 WHERE (id = $2 OR prefix = $2) "
			 "AND revoked_ms IS NULL",
		     NULL, NULL, &changes, DBV_I(wall_ms()), DBV_S(id_or_prefix));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(ENOENT, "no active key %s", id_or_prefix);
}

/* ---- the audit log -------------------------------------------------------- */

int store_audit_add(struct store *st, struct audit_row *r)
{
	int rc = make_id(r->id, "aud_");
	if (rc < 0)
		return rc;
	if (!r->created_ms)
		r->created_ms = wall_ms();
	return RUN(st, "INSERT INTO audit_log (id, workspace_id, key_id, key_prefix, method, route, "
		       "target, status, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
		   NULL, NULL, NULL, DBV_S(r->id), DBV_S(r->workspace), DBV_S(r->key_id),
		   DBV_S(r->key_prefix), DBV_S(r->method), DBV_S(r->route),
		   DBV_S(r->target[0] ? r->target : NULL), DBV_I(r->status), DBV_I(r->created_ms));
}

struct audit_each {
	store_audit_fn *fn;
	void *ctx;
};

static int row_audit(void *ctx, const struct dbv *c, int n)
{
	struct audit_each *e = ctx;
	struct audit_row a = { 0 };
	if (n < 9)
		return errf(EIO, "store: short audit row");
	copy_str(a.id, sizeof a.id, dbv_text(&c[0]));
	copy_str(a.workspace, sizeof a.workspace, dbv_text(&c[1]));
	copy_str(a.key_id, sizeof a.key_id, dbv_text(&c[2]));
	copy_str(a.key_prefix, sizeof a.key_prefix, dbv_text(&c[3]));
	copy_str(a.method, sizeof a.method, dbv_text(&c[4]));
	copy_str(a.route, sizeof a.route, dbv_text(&c[5]));
	copy_str(a.target, sizeof a.target, dbv_text(&c[6]));
	a.status = (int)dbv_int(&c[7]);
	a.created_ms = dbv_int(&c[8]);
	return e->fn(e->ctx, &a);
}

int store_audit_each(struct store *st, const char *workspace, const struct audit_query *q, store_audit_fn *fn,
		     void *ctx)
{
	struct audit_each e = { fn, ctx };
	/* id breaks ties between entries of one millisecond (ids are random,
	 * so such ties come out in no particular order, but always the same
	 * one: a page that ends inside a millisecond goes on after it). */
	int64_t before = q->before_ms > 0 ? q->before_ms : INT64_MAX;
	return RUN(st, "SELECT id, workspace_id, key_id, key_prefix, method, route, target, status, "
		       "created_ms FROM audit_log WHERE workspace_id = $1 "
		       "AND (created_ms < $2 OR (created_ms = $2 AND id < $3)) "
		       "AND ($4 = '' OR key_id = $4 OR key_prefix = $4) "
		       "ORDER BY created_ms DESC, id DESC LIMIT $5",
		   row_audit, &e, NULL, DBV_S(workspace), DBV_I(before),
		   DBV_S(q->before_id && q->before_ms > 0 ? q->before_id : ""), DBV_S(q->key ? q->key : ""),
		   DBV_I(q->limit));
}

int store_audit_prune(struct store *st, int64_t before_ms, int64_t *removed)
{
	int64_t changes = 0;
	int rc = RUN(st, "DELETE FROM audit_log WHERE created_ms < $1", NULL, NULL, &changes, DBV_I(before_ms));
	if (removed)
		*removed = rc < 0 ? 0 : changes;
	return rc;
}

/* ---- sandboxes ------------------------------------------------------------ */

void sbx_row_clear(struct sbx_row *r)
{
	free(r->metadata);
	free(r->env);
	free(r->disks);
	free(r->net_policy);
	r->metadata = r->env = r->disks = r->net_policy = NULL;
}

int sbx_row_copy(struct sbx_row *dst, const struct sbx_row *src)
{
	*dst = *src;
	dst->metadata = src->metadata ? strdup(src->metadata) : NULL;
	dst->env = src->env ? strdup(src->env) : NULL;
	dst->disks = src->disks ? strdup(src->disks) : NULL;
	dst->net_policy = src->net_policy ? strdup(src->net_policy) : NULL;
	if ((src->metadata && !dst->metadata) || (src->env && !dst->env) ||
	    (src->disks && !dst->disks) || (src->net_policy && !dst->net_policy)) {
		sbx_row_clear(dst);
		return errf(ENOMEM, "out of memory");
	}
	return 0;
}

#define SBX_COLS                                                                        \
	"id, workspace_id, template, state, parent_id, snapshot_id, vcpus, memory_mib, "  \
	"ttl_seconds, metadata, env, disks, created_ms, updated_ms, deleted_ms, "        \
	"active_ms, ready_ms, vmm_pid, vmm_start, cpu_seconds, cpu_base, "                \
	"mem_mib_seconds, running_seconds, rss_bytes, error, net_slot, net_policy, ended, " \
	"ttl_absolute, idle_hibernate, retention_seconds, active_cpu_seconds, active_base, " \
	"pss_mib_seconds, pss_bytes, stored_bytes, idle_pause_seconds, disk_mib, rev"
#define SBX_NCOLS 39

static const char *empty_null(const char *s)
{
	return s && s[0] ? s : NULL;
}

int store_sandbox_keep(struct store *st, const struct sbx_row *r)
{
	int64_t changes = 0;
	int rc = RUN(st,
		   "INSERT INTO sandboxes (" SBX_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
		   "$10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39) "
		   "ON CONFLICT (id) DO UPDATE SET state = excluded.state, ttl_seconds = excluded.ttl_seconds, "
		   "metadata = excluded.metadata, env = excluded.env, disks = excluded.disks, "
		   "updated_ms = excluded.updated_ms, deleted_ms = excluded.deleted_ms, "
		   "active_ms = excluded.active_ms, ready_ms = excluded.ready_ms, "
		   "vmm_pid = excluded.vmm_pid, vmm_start = excluded.vmm_start, "
		   "cpu_seconds = excluded.cpu_seconds, cpu_base = excluded.cpu_base, "
		   "mem_mib_seconds = excluded.mem_mib_seconds, running_seconds = excluded.running_seconds, "
		   "rss_bytes = excluded.rss_bytes, error = excluded.error, "
		   "net_slot = excluded.net_slot, net_policy = excluded.net_policy, ended = excluded.ended, "
		   "ttl_absolute = excluded.ttl_absolute, idle_hibernate = excluded.idle_hibernate, "
		   "retention_seconds = excluded.retention_seconds, "
		   "active_cpu_seconds = excluded.active_cpu_seconds, active_base = excluded.active_base, "
		   "pss_mib_seconds = excluded.pss_mib_seconds, pss_bytes = excluded.pss_bytes, "
		   "stored_bytes = excluded.stored_bytes, idle_pause_seconds = excluded.idle_pause_seconds, "
		   "disk_mib = excluded.disk_mib, rev = excluded.rev "
		   "WHERE excluded.rev >= sandboxes.rev",
		   NULL, NULL, &changes,
		   DBV_S(r->id), DBV_S(r->workspace), DBV_S(r->template), DBV_S(sbx_state_name(r->state)),
		   DBV_S(empty_null(r->parent)), DBV_S(empty_null(r->snapshot)),
		   DBV_I(r->vcpus), DBV_I(r->memory_mib), DBV_I(r->ttl_seconds),
		   DBV_S(r->metadata), DBV_S(r->env), DBV_S(r->disks),
		   DBV_I(r->created_ms), DBV_I(wall_ms()),
		   r->deleted_ms ? DBV_I(r->deleted_ms) : DBV_S(NULL),
		   DBV_I(r->active_ms), DBV_D(r->ready_ms), DBV_I(r->vmm_pid), DBV_I(r->vmm_start),
		   DBV_D(r->cpu_seconds), DBV_D(r->cpu_base), DBV_D(r->mem_mib_seconds),
		   DBV_D(r->running_seconds), DBV_I(r->rss_bytes), DBV_S(empty_null(r->error)),
		   DBV_I(r->net_slot), DBV_S(r->net_policy), DBV_S(empty_null(r->ended)),
		   DBV_I(r->ttl_absolute), DBV_I(r->idle_hibernate), DBV_I(r->retention_seconds),
		   DBV_D(r->active_cpu_seconds), DBV_D(r->active_base), DBV_D(r->pss_mib_seconds),
		   DBV_I(r->pss_bytes), DBV_I(r->stored_bytes), DBV_I(r->idle_pause_seconds), DBV_I(r->disk_mib),
		   DBV_I(r->rev));
	return rc < 0 ? rc : changes ? 0 : 1;
}

int store_sandbox_save(struct store *st, const struct sbx_row *r)
{
	int rc = store_sandbox_keep(st, r);
	return rc < 0 ? rc : 0;
}

static int fill_sbx(struct sbx_row *r, const struct dbv *c, int n)
{
	if (n < SBX_NCOLS)
		return errf(EIO, "store: short sandbox row");
	memset(r, 0, sizeof *r);
	copy_str(r->id, sizeof r->id, dbv_text(&c[0]));
	copy_str(r->workspace, sizeof r->workspace, dbv_text(&c[1]));
	copy_str(r->template, sizeof r->template, dbv_text(&c[2]));
	if (sbx_state_parse(dbv_text(&c[3]), &r->state) < 0)
		return errf(EIO, "store: sandbox %s has an unknown state '%.32s'", r->id,
			    dbv_text(&c[3]));
	copy_str(r->parent, sizeof r->parent, dbv_text(&c[4]));
	copy_str(r->snapshot, sizeof r->snapshot, dbv_text(&c[5]));
	r->vcpus = (int)dbv_int(&c[6]);
	r->memory_mib = (int)dbv_int(&c[7]);
	r->ttl_seconds = dbv_int(&c[8]);
	r->metadata = dup_or_null(&c[9]);
	r->env = dup_or_null(&c[10]);
	r->disks = dup_or_null(&c[11]);
	r->created_ms = dbv_int(&c[12]);
	r->updated_ms = dbv_int(&c[13]);
	r->deleted_ms = dbv_int(&c[14]);
	r->active_ms = dbv_int(&c[15]);
	r->ready_ms = dbv_real(&c[16]);
	r->vmm_pid = (int)dbv_int(&c[17]);
	r->vmm_start = dbv_int(&c[18]);
	r->cpu_seconds = dbv_real(&c[19]);
	r->cpu_base = dbv_real(&c[20]);
	r->mem_mib_seconds = dbv_real(&c[21]);
	r->running_seconds = dbv_real(&c[22]);
	r->rss_bytes = dbv_int(&c[23]);
	copy_str(r->error, sizeof r->error, dbv_text(&c[24]));
	r->net_slot = (int)dbv_int(&c[25]);
	r->net_policy = dup_or_null(&c[26]);
	copy_str(r->ended, sizeof r->ended, dbv_text(&c[27]));
	r->ttl_absolute = dbv_int(&c[28]) != 0;
	r->idle_hibernate = dbv_int(&c[29]) != 0;
	r->retention_seconds = dbv_int(&c[30]);
	r->active_cpu_seconds = dbv_real(&c[31]);
	r->active_base = dbv_real(&c[32]);
	r->pss_mib_seconds = dbv_real(&c[33]);
	r->pss_bytes = dbv_int(&c[34]);
	r->stored_bytes = dbv_int(&c[35]);
	r->idle_pause_seconds = dbv_int(&c[36]);
	r->disk_mib = dbv_int(&c[37]);
	r->rev = dbv_int(&c[38]);
	if ((c[9].type == DBV_TEXT && !r->metadata) || (c[10].type == DBV_TEXT && !r->env) ||
	    (c[11].type == DBV_TEXT && !r->disks) || (c[26].type == DBV_TEXT && !r->net_policy)) {
		sbx_row_clear(r);
		return errf(ENOMEM, "out of memory");
	}
	return 0;
}

struct sbx_one {
	struct sbx_row *r;
	bool found;
};

static int row_sbx_one(void *ctx, const struct dbv *c, int n)
{
	struct sbx_one *o = ctx;
	int rc = fill_sbx(o->r, c, n);
	if (rc < 0)
		return rc;
	o->found = true;
	return 1;
}

int store_sandbox_load(struct store *st, const char *id, struct sbx_row *r)
{
	struct sbx_one o = { r, false };
	int rc = RUN(st, "SELECT " SBX_COLS " FROM sandboxes WHERE id = $1", row_sbx_one, &o, NULL,
		     DBV_S(id));
	if (rc < 0)
		return rc;
	return o.found ? 0 : errf(ENOENT, "sandbox %s: no record", id);
}

struct sbx_each {
	store_sbx_fn *fn;
	void *ctx;
};

static int row_sbx_each(void *ctx, const struct dbv *c, int n)
{
	struct sbx_each *e = ctx;
	struct sbx_row r;
	int rc = fill_sbx(&r, c, n);
	if (rc < 0)
		return rc;
	return e->fn(e->ctx, &r);
}

int store_sandbox_each_live(struct store *st, store_sbx_fn *fn, void *ctx)
{
	struct sbx_each e = { fn, ctx };
	return RUN(st, "SELECT " SBX_COLS " FROM sandboxes WHERE state <> $1 ORDER BY created_ms",
		   row_sbx_each, &e, NULL, DBV_S(sbx_state_name(SBX_DELETED)));
}

int store_sandbox_each_since(struct store *st, int64_t since_ms, store_sbx_fn *fn, void *ctx)
{
	struct sbx_each e = { fn, ctx };
	return RUN(st, "SELECT " SBX_COLS " FROM sandboxes WHERE updated_ms >= $1 ORDER BY created_ms",
		   row_sbx_each, &e, NULL, DBV_I(since_ms));
}

int store_row_int1(void *ctx, const struct dbv *c, int n)
{
	if (n > 0)
		*(int64_t *)ctx = dbv_int(&c[0]);
	return 1;
}

int store_sandboxes_live(struct store *st, int64_t *n)
{
	*n = 0;
	int rc = RUN(st, "SELECT COUNT(*) FROM sandboxes WHERE state <> $1", store_row_int1, n, NULL,
		     DBV_S(sbx_state_name(SBX_DELETED)));
	return rc < 0 ? rc : 0;
}

/* ---- snapshots ------------------------------------------------------------ */

void snap_row_clear(struct snap_row *r)
{
	free(r->disks);
	free(r->env);
	r->disks = r->env = NULL;
}

#define SNAP_COLS                                                                          \
	"id, workspace_id, sandbox_id, template, vcpus, memory_mib, disks, env, created_ms, deleted_ms, " \
	"stored_bytes"

int store_snapshot_save(struct store *st, const struct snap_row *r)
{
	return RUN(st,
		   "INSERT INTO snapshots (" SNAP_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
		   "ON CONFLICT (id) DO UPDATE SET disks = excluded.disks, "
		   /* A deletion is final: a heartbeat's copy read on the host
		    * before the delete does not bring the snapshot back. */
		   "deleted_ms = COALESCE(snapshots.deleted_ms, excluded.deleted_ms), "
		   "stored_bytes = excluded.stored_bytes",
		   NULL, NULL, NULL, DBV_S(r->id), DBV_S(r->workspace), DBV_S(r->sandbox),
		   DBV_S(r->template), DBV_I(r->vcpus), DBV_I(r->memory_mib), DBV_S(r->disks),
		   DBV_S(r->env), DBV_I(r->created_ms),
		   r->deleted_ms ? DBV_I(r->deleted_ms) : DBV_S(NULL), DBV_I(r->stored_bytes));
}

static int fill_snap(struct snap_row *r, const struct dbv *c, int n)
{
	if (n < 11)
		return errf(EIO, "store: short snapshot row");
	memset(r, 0, sizeof *r);
	copy_str(r->id, sizeof r->id, dbv_text(&c[0]));
	copy_str(r->workspace, sizeof r->workspace, dbv_text(&c[1]));
	copy_str(r->sandbox, sizeof r->sandbox, dbv_text(&c[2]));
	copy_str(r->template, sizeof r->template, dbv_text(&c[3]));
	r->vcpus = (int)dbv_int(&c[4]);
	r->memory_mib = (int)dbv_int(&c[5]);
	r->disks = dup_or_null(&c[6]);
	r->env = dup_or_null(&c[7]);
	r->created_ms = dbv_int(&c[8]);
	r->deleted_ms = dbv_int(&c[9]);
	r->stored_bytes = dbv_int(&c[10]);
	if ((c[6].type == DBV_TEXT && !r->disks) || (c[7].type == DBV_TEXT && !r->env)) {
		snap_row_clear(r);
		return errf(ENOMEM, "out of memory");
	}
	return 0;
}

struct snap_one {
	struct snap_row *r;
	const char *workspace;
	bool found;
};

static int row_snap_one(void *ctx, const struct dbv *c, int n)
{
	struct snap_one *o = ctx;
	int rc = fill_snap(o->r, c, n);
	if (rc < 0)
		return rc;
	if (o->r->deleted_ms || (o->workspace && strcmp(o->workspace, o->r->workspace) != 0)) {
		snap_row_clear(o->r);
		return 1;
	}
	o->found = true;
	return 1;
}

int store_snapshot_load(struct store *st, const char *id, const char *workspace,
			struct snap_row *r)
{
	struct snap_one o = { r, workspace, false };
	int rc = RUN(st, "SELECT " SNAP_COLS " FROM snapshots WHERE id = $1", row_snap_one, &o, NULL,
		     DBV_S(id));
	if (rc < 0)
		return rc;
	return o.found ? 0 : errf(ENOENT, "snapshot %s not found", id);
}

int store_snapshot_delete(struct store *st, const char *id, const char *workspace)
{
	int64_t changes = 0;
	int rc = workspace ? RUN(st, "UPDATE snapshots SET deleted_ms = $1 WHERE id = $2 AND deleted_ms IS NULL "
				     "AND workspace_id = $3",
				 NULL, NULL, &changes, DBV_I(wall_ms()), DBV_S(id), DBV_S(workspace))
			   : RUN(st, "UPDATE snapshots SET deleted_ms = $1 WHERE id = $2 AND deleted_ms IS NULL",
				 NULL, NULL, &changes, DBV_I(wall_ms()), DBV_S(id));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(ENOENT, "snapshot %s not found", id);
}

struct snap_each {
	store_snap_fn *fn;
	void *ctx;
};

static int row_snap_each(void *ctx, const struct dbv *c, int n)
{
	struct snap_each *e = ctx;
	struct snap_row r;
	int rc = fill_snap(&r, c, n);
	if (rc < 0)
		return rc;
	return e->fn(e->ctx, &r);
}

int store_snapshot_each_live(struct store *st, store_snap_fn *fn, void *ctx)
{
	struct snap_each e = { fn, ctx };
	return store_run(st, "SELECT " SNAP_COLS " FROM snapshots WHERE deleted_ms IS NULL ORDER BY created_ms",
		   NULL, 0, row_snap_each, &e, NULL);
}

int store_snapshot_each_since(struct store *st, int64_t since_ms, store_snap_fn *fn, void *ctx)
{
	struct snap_each e = { fn, ctx };
	return RUN(st, "SELECT " SNAP_COLS " FROM snapshots WHERE created_ms >= $1 OR deleted_ms >= $1 "
		       "ORDER BY created_ms", row_snap_each, &e, NULL, DBV_I(since_ms));
}

/* ---- accounting ------------------------------------------------------------- */

/* ---- exposed ports -------------------------------------------------------- */

#define PORT_COLS "sandbox_id, workspace_id, port, public, created_ms"

int store_port_save(struct store *st, const struct port_row *r)
{
	return RUN(st,
		   "INSERT INTO ports (" PORT_COLS ") VALUES ($1, $2, $3, $4, $5) "
		   "ON CONFLICT (sandbox_id, port) DO UPDATE SET public = excluded.public",
		   NULL, NULL, NULL, DBV_S(r->sandbox), DBV_S(r->workspace), DBV_I(r->port),
		   DBV_I(r->public ? 1 : 0), DBV_I(r->created_ms));
}

struct port_add {
	const struct port_row *r;
	int max;
	bool *existed;
};

static int port_add(struct store *tx, void *ctx)
{
	struct port_add *a = ctx;
	char key[16 + ID_MAX];
	snprintf(key, sizeof key, "ports %s", a->r->sandbox);
	int64_t n = 0, same = 0;
	int rc = store_tx_lock(tx, key);
	rc = rc ?: RUN(tx, "SELECT COUNT(*) FROM ports WHERE sandbox_id = $1", row_int, &n, NULL,
		       DBV_S(a->r->sandbox));
	rc = rc ?: RUN(tx, "SELECT COUNT(*) FROM ports WHERE sandbox_id = $1 AND port = $2", row_int,
		       &same, NULL, DBV_S(a->r->sandbox), DBV_I(a->r->port));
	if (rc < 0)
		return rc;
	*a->existed = same > 0;
	if (!same && n >= a->max)
		return errf(ENOSPC, "sandbox %s already exposes %lld ports, the most it may", a->r->sandbox,
			    (long long)n);
	return store_port_save(tx, a->r);
}

int store_port_add(struct store *st, const struct port_row *r, int max, bool *existed)
{
	struct port_add a = { r, max, existed };
	return store_tx(st, port_add, &a);
}

static int fill_port(struct port_row *r, const struct dbv *c, int n)
{
	if (n < 5)
		return errf(EIO, "store: short port row");
	memset(r, 0, sizeof *r);
	copy_str(r->sandbox, sizeof r->sandbox, dbv_text(&c[0]));
	copy_str(r->workspace, sizeof r->workspace, dbv_text(&c[1]));
	r->port = (int)dbv_int(&c[2]);
	r->public = dbv_int(&c[3]) != 0;
	r->created_ms = dbv_int(&c[4]);
	r->suspended = n > 5 && dbv_int(&c[5]) != 0;
	return 0;
}

struct port_one {
	struct port_row *r;
	bool found;
};

static int row_port_one(void *ctx, const struct dbv *c, int n)
{
	struct port_one *o = ctx;
	int rc = fill_port(o->r, c, n);
	if (rc < 0)
		return rc;
	o->found = true;
	return 1;
}

int store_port_load(struct store *st, const char *sandbox, int port, struct port_row *r)
{
	struct port_one o = { r, false };
	/* With its workspace's suspension: the proxy's one query. */
	int rc = RUN(st, "SELECT " PORT_COLS ", (SELECT suspended FROM workspaces WHERE id = ports.workspace_id) "
			 "FROM ports WHERE sandbox_id = $1 AND port = $2",
		     row_port_one, &o, NULL, DBV_S(sandbox), DBV_I(port));
	if (rc < 0)
		return rc;
	return o.found ? 0 : errf(ENOENT, "port %d of sandbox %s is not exposed", port, sandbox);
}

struct port_each {
	store_port_fn *fn;
	void *ctx;
};

static int row_port_each(void *ctx, const struct dbv *c, int n)
{
	struct port_each *e = ctx;
	struct port_row r;
	int rc = fill_port(&r, c, n);
	return rc < 0 ? rc : e->fn(e->ctx, &r);
}

int store_port_each(struct store *st, const char *sandbox, store_port_fn *fn, void *ctx)
{
	struct port_each e = { fn, ctx };
	return RUN(st, "SELECT " PORT_COLS " FROM ports WHERE sandbox_id = $1 ORDER BY port",
		   row_port_each, &e, NULL, DBV_S(sandbox));
}

int store_port_delete(struct store *st, const char *sandbox, int port)
{
	int64_t changes = 0;
	int rc = RUN(st, "DELETE FROM ports WHERE sandbox_id = $1 AND port = $2", NULL, NULL,
		     &changes, DBV_S(sandbox), DBV_I(port));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(ENOENT, "port %d of sandbox %s is not exposed", port, sandbox);
}

int store_port_delete_all(struct store *st, const char *sandbox)
{
	return RUN(st, "DELETE FROM ports WHERE sandbox_id = $1", NULL, NULL, NULL, DBV_S(sandbox));
}

static int row_usage(void *ctx, const struct dbv *c, int n)
{
	struct usage *u = ctx;
	if (n < 7)
		return errf(EIO, "store: short usage row");
	u->cpu_seconds = dbv_real(&c[0]);
	u->mem_mib_seconds = dbv_real(&c[1]);
	u->running_seconds = dbv_real(&c[2]);
	u->sandboxes = dbv_int(&c[3]);
	u->live = dbv_int(&c[4]);
	u->active_cpu_seconds = dbv_real(&c[5]);
	u->pss_mib_seconds = dbv_real(&c[6]);
	return 0;
}

int store_usage_sum(struct store *st, const char *workspace, struct usage *u)
{
	memset(u, 0, sizeof *u);
	return RUN(st,
		   "SELECT SUM(cpu_seconds), SUM(mem_mib_seconds), SUM(running_seconds), COUNT(*), "
		   "SUM(CASE WHEN state = $1 THEN 0 ELSE 1 END), SUM(active_cpu_seconds), SUM(pss_mib_seconds) "
		   "FROM sandboxes WHERE workspace_id = $2",
		   row_usage, u, NULL, DBV_S(sbx_state_name(SBX_DELETED)), DBV_S(workspace));
}

/* ---- metered usage by the hour ------------------------------------------- */

int store_usage_add(struct store *st, const struct usage_hour *u)
{
	return RUN(st,
		   "INSERT INTO usage_hours (workspace_id, sandbox_id, hour_ms, cpu_us, mem_mib_s, run_ms) "
		   "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (sandbox_id, hour_ms) DO UPDATE SET "
		   "cpu_us = usage_hours.cpu_us + excluded.cpu_us, "
		   "mem_mib_s = usage_hours.mem_mib_s + excluded.mem_mib_s, "
		   "run_ms = usage_hours.run_ms + excluded.run_ms",
		   NULL, NULL, NULL, DBV_S(u->workspace), DBV_S(u->sandbox), DBV_I(u->hour_ms),
		   DBV_I(u->cpu_us), DBV_I(u->mem_mib_s), DBV_I(u->run_ms));
}

int store_usage_set(struct store *st, const struct usage_hour *u)
{
	return RUN(st,
		   "INSERT INTO usage_hours (workspace_id, sandbox_id, hour_ms, cpu_us, mem_mib_s, run_ms) "
		   "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (sandbox_id, hour_ms) DO UPDATE SET "
		   /* An hour only grows on its host: of two copies (a heartbeat
		    * taken late, after a newer one) the larger is the newer. */
		   "cpu_us = CASE WHEN excluded.cpu_us > usage_hours.cpu_us THEN excluded.cpu_us "
		   "ELSE usage_hours.cpu_us END, "
		   "mem_mib_s = CASE WHEN excluded.mem_mib_s > usage_hours.mem_mib_s THEN excluded.mem_mib_s "
		   "ELSE usage_hours.mem_mib_s END, "
		   "run_ms = CASE WHEN excluded.run_ms > usage_hours.run_ms THEN excluded.run_ms "
		   "ELSE usage_hours.run_ms END",
		   NULL, NULL, NULL, DBV_S(u->workspace), DBV_S(u->sandbox), DBV_I(u->hour_ms),
		   DBV_I(u->cpu_us), DBV_I(u->mem_mib_s), DBV_I(u->run_ms));
}

static int row_usage_any(void *ctx, const struct dbv *c, int n)
{
	struct { usage_hour_fn *fn; void *ctx; } *w = ctx;
	if (n < 6)
		return errf(EIO, "store: short usage_hours row");
	struct usage_hour u = { .hour_ms = dbv_int(&c[2]), .cpu_us = dbv_int(&c[3]),
				.mem_mib_s = dbv_int(&c[4]), .run_ms = dbv_int(&c[5]) };
	copy_str(u.workspace, sizeof u.workspace, dbv_text(&c[0]));
	copy_str(u.sandbox, sizeof u.sandbox, dbv_text(&c[1]));
	return w->fn(w->ctx, &u);
}

int store_usage_each_since(struct store *st, int64_t from_ms, usage_hour_fn *fn, void *ctx)
{
	struct { usage_hour_fn *fn; void *ctx; } w = { fn, ctx };
	return RUN(st, "SELECT workspace_id, sandbox_id, hour_ms, cpu_us, mem_mib_s, run_ms FROM usage_hours "
		       "WHERE hour_ms >= $1 ORDER BY hour_ms", row_usage_any, &w, NULL, DBV_I(from_ms));
}

struct hours_walk {
	const char *workspace;
	usage_hour_fn *fn;
	void *ctx;
};

static int row_usage_hour(void *ctx, const struct dbv *c, int n)
{
	struct hours_walk *w = ctx;
	if (n < 5)
		return errf(EIO, "store: short usage_hours row");
	struct usage_hour u = { .hour_ms = dbv_int(&c[1]), .cpu_us = dbv_int(&c[2]),
				.mem_mib_s = dbv_int(&c[3]), .run_ms = dbv_int(&c[4]) };
	copy_str(u.workspace, sizeof u.workspace, w->workspace);
	copy_str(u.sandbox, sizeof u.sandbox, dbv_text(&c[0]));
	return w->fn(w->ctx, &u);
}

int store_usage_hours(struct store *st, const char *workspace, const char *sandbox, int64_t from_ms,
		      int64_t to_ms, bool per_sandbox, usage_hour_fn *fn, void *ctx)
{
	struct hours_walk w = { workspace, fn, ctx };
	/* $4 = '' selects every sandbox of the workspace. */
	if (per_sandbox)
		return RUN(st,
			   "SELECT sandbox_id, hour_ms, cpu_us, mem_mib_s, run_ms FROM usage_hours "
			   "WHERE workspace_id = $1 AND hour_ms >= $2 AND hour_ms < $3 "
			   "AND ($4 = '' OR sandbox_id = $4) ORDER BY hour_ms, sandbox_id",
			   row_usage_hour, &w, NULL, DBV_S(workspace), DBV_I(from_ms), DBV_I(to_ms),
			   DBV_S(sandbox ? sandbox : ""));
	return RUN(st,
		   "SELECT '', hour_ms, CAST(SUM(cpu_us) AS BIGINT), CAST(SUM(mem_mib_s) AS BIGINT), "
		   "CAST(SUM(run_ms) AS BIGINT) FROM usage_hours "
		   "WHERE workspace_id = $1 AND hour_ms >= $2 AND hour_ms < $3 "
		   "AND ($4 = '' OR sandbox_id = $4) GROUP BY hour_ms ORDER BY hour_ms",
		   row_usage_hour, &w, NULL, DBV_S(workspace), DBV_I(from_ms), DBV_I(to_ms),
		   DBV_S(sandbox ? sandbox : ""));
}
