/*
 * store_cluster: join tokens and hosts (store/cluster.h). A join takes a
 * token's use with one conditional UPDATE and adds the host in the same
 * transaction: two hosts racing on a single-use token cannot both win,
 * on SQLite or across API replicas on PostgreSQL.
 */
#include "store/cluster.h"
#include "store/store_int.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int store_join_token_add(struct store *st, const char *hash, const char *prefix,
			 int64_t expires_ms, int64_t uses, char id[ID_MAX])
{
	int rc = make_id(id, "jt_");
	if (rc < 0)
		return rc;
	return RUN(st, "INSERT INTO join_tokens (id, hash, prefix, created_ms, expires_ms, uses_left) "
		       "VALUES ($1, $2, $3, $4, $5, $6)",
		   NULL, NULL, NULL, DBV_S(id), DBV_S(hash), DBV_S(prefix), DBV_I(wall_ms()),
		   DBV_I(expires_ms), DBV_I(uses));
}

struct token_each {
	store_join_token_fn *fn;
	void *ctx;
};

static int row_token(void *ctx, const struct dbv *c, int n)
{
	struct token_each *e = ctx;
	struct join_token_row r = { 0 };
	if (n < 6)
		return -EPROTO;
	copy_str(r.id, sizeof r.id, dbv_text(&c[0]));
	copy_str(r.prefix, sizeof r.prefix, dbv_text(&c[1]));
	r.created_ms = dbv_int(&c[2]);
	r.expires_ms = dbv_int(&c[3]);
	r.uses_left = dbv_int(&c[4]);
	r.revoked_ms = dbv_int(&c[5]);
	return e->fn(e->ctx, &r);
}

int store_join_token_each(struct store *st, store_join_token_fn *fn, void *ctx)
{
	struct token_each e = { fn, ctx };
	return store_run(st, "SELECT id, prefix, created_ms, expires_ms, uses_left, revoked_ms "
			     "FROM join_tokens ORDER BY created_ms", NULL, 0, row_token, &e, NULL);
}

int store_join_token_revoke(struct store *st, const char *id_or_prefix)
{
	int64_t changes = 0;
	int rc = RUN(st, "UPDATE join_tokens SET revoked_ms = $1 WHERE (id = $2 OR prefix = $2) "
			 "AND revoked_ms IS NULL",
		     NULL, NULL, &changes, DBV_I(wall_ms()), DBV_S(id_or_prefix));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(ENOENT, "no active join token %s", id_or_prefix);
}

/* Why a token was refused, for the log (the host hears only "refused"). */
struct token_state {
	bool found;
	int64_t expires_ms, uses_left, revoked_ms;
	char id[ID_MAX];
};

static int row_token_state(void *ctx, const struct dbv *c, int n)
{
	struct token_state *t = ctx;
	if (n < 4)
		return -EPROTO;
	t->found = true;
	copy_str(t->id, sizeof t->id, dbv_text(&c[0]));
	t->expires_ms = dbv_int(&c[1]);
	t->uses_left = dbv_int(&c[2]);
	t->revoked_ms = dbv_int(&c[3]);
	return 1;
}

static int row_first_text(void *ctx, const struct dbv *c, int n)
{
	if (n > 0)
		copy_str(ctx, ID_MAX, dbv_text(&c[0]));
	return 1;
}

struct join_ctx {
	const struct host_join *j;
	char *id;
};

static int join_tx(struct store *tx, void *ctx)
{
	struct join_ctx *jc = ctx;
	const struct host_join *j = jc->j;
	int64_t now = wall_ms();
	struct token_state t = { 0 };
	int rc = RUN(tx, "SELECT id, expires_ms, uses_left, revoked_ms FROM join_tokens WHERE hash = $1",
		     row_token_state, &t, NULL, DBV_S(j->token_hash));
	if (rc < 0)
		return rc;
	if (!t.found)
		return errf(EACCES, "unknown join token");
	if (t.revoked_ms)
		return errf(EACCES, "join token %s is revoked", t.id);
	if (t.expires_ms <= now)
		return errf(EACCES, "join token %s expired", t.id);
	/* The use is taken by a conditional update: of two joins racing on
	 * its last use, one changes the row and the other changes nothing. */
	int64_t changes = 0;
	rc = RUN(tx, "UPDATE join_tokens SET uses_left = uses_left - 1 "
		     "WHERE id = $1 AND revoked_ms IS NULL AND expires_ms > $2 AND uses_left > 0",
		 NULL, NULL, &changes, DBV_S(t.id), DBV_I(now));
	if (rc < 0)
		return rc;
	if (!changes && t.uses_left != -1)
		return errf(EACCES, "join token %s is used up", t.id);
	char found[ID_MAX] = "";
	rc = RUN(tx, "SELECT id FROM hosts WHERE name = $1", row_first_text, found, NULL, DBV_S(j->name));
	if (rc < 0)
		return rc;
	if (found[0])
		return errf(EEXIST, "a host called '%s' has joined already (%s)", j->name, found);
	if ((rc = make_id(jc->id, "host_")) < 0)
		return rc;
	rc = RUN(tx, "INSERT INTO hosts (id, name, credential_hash, token_id, url, admin, health, "
		       "version, vcpus, memory_mib, disk_mib, templates, joined_ms, heartbeat_ms) "
		       "VALUES ($1, $2, $3, $4, $5, 'active', 'up', $6, $7, $8, $9, $10, $11, $11)",
		   NULL, NULL, NULL, DBV_S(jc->id), DBV_S(j->name), DBV_S(j->credential_hash), DBV_S(t.id),
		   DBV_S(j->url), DBV_S(j->version), DBV_I(j->vcpus), DBV_I(j->memory_mib),
		   DBV_I(j->disk_mib), DBV_S(j->templates), DBV_I(now));
	rc = rc ?: RUN(tx, "INSERT INTO host_keys (host_id, api_key) VALUES ($1, $2)", NULL, NULL, NULL,
		       DBV_S(jc->id), DBV_S(j->api_key));
	return rc;
}

int store_host_join(struct store *st, const struct host_join *j, char id[ID_MAX])
{
	struct join_ctx jc = { j, id };
	return store_tx(st, join_tx, &jc);
}

void host_row_clear(struct host_row *r)
{
	free(r->templates);
	r->templates = NULL;
}

int store_host_fill(struct host_row *r, const struct dbv *c, int n)
{
	if (n < 16)
		return -EPROTO;
	memset(r, 0, sizeof *r);
	copy_str(r->id, sizeof r->id, dbv_text(&c[0]));
	copy_str(r->name, sizeof r->name, dbv_text(&c[1]));
	copy_str(r->url, sizeof r->url, dbv_text(&c[2]));
	copy_str(r->admin, sizeof r->admin, dbv_text(&c[3]));
	copy_str(r->health, sizeof r->health, dbv_text(&c[4]));
	copy_str(r->reason, sizeof r->reason, dbv_text(&c[5]));
	copy_str(r->version, sizeof r->version, dbv_text(&c[6]));
	r->vcpus = dbv_int(&c[7]);
	r->memory_mib = dbv_int(&c[8]);
	r->disk_mib = dbv_int(&c[9]);
	r->sandboxes = dbv_int(&c[10]);
	r->joined_ms = dbv_int(&c[11]);
	r->heartbeat_ms = dbv_int(&c[12]);
	r->revoked_ms = dbv_int(&c[13]);
	copy_str(r->api_key, sizeof r->api_key, dbv_text(&c[15]));
	if (c[14].type == DBV_TEXT && !(r->templates = strdup(c[14].s)))
		return -ENOMEM;
	return 0;
}

static int row_host_one(void *ctx, const struct dbv *c, int n)
{
	int rc = store_host_fill(ctx, c, n);
	return rc < 0 ? rc : 1;
}

int store_host_auth(struct store *st, const char *hash, struct host_row *out)
{
	memset(out, 0, sizeof *out);
	int rc = RUN(st, "SELECT " HOST_COLS " FROM hosts WHERE credential_hash = $1", row_host_one, out,
		     NULL, DBV_S(hash));
	if (rc < 0)
		return rc;
	if (!out->id[0])
		return errf(EACCES, "unknown host credential");
	if (!strcmp(out->admin, "revoked")) {
		int e = errf(EACCES, "host %s (%s) is revoked", out->name, out->id);
		host_row_clear(out);
		return e;
	}
	return 0;
}

int store_host_beat(struct store *st, const char *id, const struct host_beat *b)
{
	int64_t changes = 0;
	int rc = RUN(st, "UPDATE hosts SET vcpus = $1, memory_mib = $2, disk_mib = $3, sandboxes = $4, "
			 "version = $5, templates = $6, heartbeat_ms = $7, health = 'up', reason = NULL "
			 "WHERE id = $8 AND admin <> 'revoked'",
		     NULL, NULL, &changes, DBV_I(b->vcpus), DBV_I(b->memory_mib), DBV_I(b->disk_mib),
		     DBV_I(b->sandboxes), DBV_S(b->version), DBV_S(b->templates), DBV_I(wall_ms()),
		     DBV_S(id));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(EACCES, "host %s is revoked or unknown", id);
}

int store_hosts_mark_down(struct store *st, int64_t before_ms, const char *reason, int *marked)
{
	int64_t changes = 0;
	int rc = RUN(st, "UPDATE hosts SET health = 'down', reason = $1 "
			 "WHERE health = 'up' AND admin <> 'revoked' AND heartbeat_ms < $2",
		     NULL, NULL, &changes, DBV_S(reason), DBV_I(before_ms));
	if (marked)
		*marked = rc < 0 ? 0 : (int)changes;
	return rc;
}

struct host_each {
	store_host_fn *fn;
	void *ctx;
};

static int row_host_each(void *ctx, const struct dbv *c, int n)
{
	struct host_each *e = ctx;
	struct host_row r;
	int rc = store_host_fill(&r, c, n);
	if (rc == 0)
		rc = e->fn(e->ctx, &r);
	host_row_clear(&r);
	return rc;
}

int store_host_each(struct store *st, store_host_fn *fn, void *ctx)
{
	struct host_each e = { fn, ctx };
	return store_run(st, "SELECT " HOST_COLS " FROM hosts ORDER BY joined_ms", NULL, 0, row_host_each,
			 &e, NULL);
}

int store_host_set_admin(struct store *st, const char *id_or_name, const char *admin)
{
	static const char *const known[] = { "active", "cordoned", "draining", "revoked", NULL };
	int ok = 0;
	for (int i = 0; known[i]; i++)
		ok |= !strcmp(admin, known[i]);
	if (!ok)
		return errf(EINVAL, "unknown host state '%s'", admin);
	int64_t changes = 0;
	int rc = RUN(st, "UPDATE hosts SET admin = $1, revoked_ms = CASE WHEN $1 = 'revoked' THEN $2 "
			 "ELSE revoked_ms END WHERE (id = $3 OR name = $3) AND admin <> 'revoked'",
		     NULL, NULL, &changes, DBV_S(admin), DBV_I(wall_ms()), DBV_S(id_or_name));
	if (rc < 0)
		return rc;
	return changes ? 0 : errf(ENOENT, "no host %s (or it is revoked: that is final)", id_or_name);
}

/* ---- templates deleted ------------------------------------------------------------------ */

int store_template_deleted_set(struct store *st, const char *name, int64_t version)
{
	/* The floor first: should the second statement fail, a later build
	 * still starts above this version. */
	int rc = RUN(st, "INSERT INTO template_versions (name, version) VALUES ($1, $2) "
			 "ON CONFLICT (name) DO UPDATE SET version = "
			 "CASE WHEN excluded.version > template_versions.version THEN excluded.version "
			 "ELSE template_versions.version END",
		     NULL, NULL, NULL, DBV_S(name), DBV_I(version));
	if (rc < 0)
		return rc;
	return RUN(st, "INSERT INTO template_deletions (name, version, deleted_ms) VALUES ($1, $2, $3) "
		       "ON CONFLICT (name) DO UPDATE SET deleted_ms = excluded.deleted_ms, version = "
		       "CASE WHEN excluded.version > template_deletions.version THEN excluded.version "
		       "ELSE template_deletions.version END",
		   NULL, NULL, NULL, DBV_S(name), DBV_I(version), DBV_I(wall_ms()));
}

int store_template_version_floor(struct store *st, const char *name, int64_t *version)
{
	int64_t v = 0;
	int rc = RUN(st, "SELECT version FROM template_versions WHERE name = $1", store_row_int1, &v, NULL,
		     DBV_S(name));
	*version = rc < 0 ? 0 : v;
	return rc < 0 ? rc : 0;
}

int store_template_deleted_get(struct store *st, const char *name, int64_t *version)
{
	int64_t v = -1;
	int rc = RUN(st, "SELECT version FROM template_deletions WHERE name = $1", store_row_int1, &v, NULL,
		     DBV_S(name));
	if (rc < 0)
		return rc;
	if (v < 0)
		return errf(ENOENT, "template %s was not deleted", name);
	*version = v;
	return 0;
}

struct marks_each {
	store_template_marks_fn *fn;
	void *ctx;
};

static int row_marks(void *ctx, const struct dbv *c, int n)
{
	struct marks_each *e = ctx;
	if (n < 3 || !dbv_text(&c[0]))
		return -EPROTO;
	return e->fn(e->ctx, dbv_text(&c[0]), dbv_int(&c[1]), dbv_int(&c[2]));
}

int store_template_marks_each(struct store *st, store_template_marks_fn *fn, void *ctx)
{
	/* A deletion's version counts toward the floor too: a deletion row
	 * of a database from before template_versions has none there. */
	struct marks_each e = { fn, ctx };
	return store_run(st, "SELECT name, MAX(deleted), MAX(floor) FROM ("
			 "SELECT name, version AS deleted, version AS floor FROM template_deletions "
			 "UNION ALL SELECT name, -1, version FROM template_versions) AS m "
			 "GROUP BY name ORDER BY name", NULL, 0, row_marks, &e, NULL);
}

int store_template_deleted_clear(struct store *st, const char *name)
{
	int rc = RUN(st, "DELETE FROM template_deletions WHERE name = $1", NULL, NULL, NULL, DBV_S(name));
	return rc < 0 ? rc : 0;
}

/* ---- template copies ---------------------------------------------------------------------- */

int store_template_copy_claim(struct store *st, const char *name, int64_t version, const char *host_id,
			      const char *owner, int64_t lease_ms)
{
	int64_t now = wall_ms(), changes = 0;
	/* One statement: of two replicas claiming at once, one inserts (or
	 * takes over a stale claim) and the other changes nothing. */
	int rc = RUN(st, "INSERT INTO template_copies (name, version, host_id, owner, until_ms) "
			 "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name, version, host_id) DO UPDATE SET "
			 "owner = excluded.owner, until_ms = excluded.until_ms "
			 "WHERE template_copies.owner = excluded.owner OR template_copies.until_ms < $6",
		     NULL, NULL, &changes, DBV_S(name), DBV_I(version), DBV_S(host_id), DBV_S(owner),
		     DBV_I(now + lease_ms), DBV_I(now));
	return rc < 0 ? rc : changes > 0;
}

int store_template_copy_release(struct store *st, const char *name, int64_t version, const char *host_id,
				const char *owner)
{
	int rc = RUN(st, "DELETE FROM template_copies WHERE name = $1 AND version = $2 AND host_id = $3 AND owner = $4",
		     NULL, NULL, NULL, DBV_S(name), DBV_I(version), DBV_S(host_id), DBV_S(owner));
	return rc < 0 ? rc : 0;
}

/* ---- what a replica shows ---------------------------------------------------------- */

static int row_state_count(void *ctx, const struct dbv *c, int n)
{
	int64_t *count = ctx;
	enum sbx_state st;
	if (n < 2)
		return errf(EIO, "store: short row of sandboxes by state");
	/* A state this build does not know (a newer replica's) is left out. */
	if (sbx_state_parse(dbv_text(&c[0]), &st) == 0)
		count[st] = dbv_int(&c[1]);
	return 0;
}

int store_sandbox_states(struct store *st, int64_t count[SBX_NSTATES])
{
	memset(count, 0, SBX_NSTATES * sizeof *count);
	int rc = RUN(st, "SELECT state, COUNT(*) FROM sandboxes WHERE state <> $1 GROUP BY state", row_state_count,
		     count, NULL, DBV_S(sbx_state_name(SBX_DELETED)));
	return rc < 0 ? rc : 0;
}
