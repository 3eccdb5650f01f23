/* Unit tests for kilnd's store (src/store/store.c) on a real database:
 * SQLite files in a temporary directory, or, with KILN_TEST_STORE set to a
 * postgresql:// URL, that PostgreSQL database (tests/unit/pg.sh starts a
 * server for them and sets KILN_TEST_PG_STOP and KILN_TEST_PG_START, the
 * commands that stop and start it, for the outage test). */
#include "store/store.h"
#include "store/db.h"
#include "store/db_url.h"
#include "store/schema.h"
#include "store/cluster.h"
#include "store/store_databases.h"
#include "hostif/placement.h"
#include "hostif/tclaim.h"
#include "host/meter.h"
#include "api/http.h"
#include "api/keys.h"
#include "ops/plan.h"
#include "ops/statement.h"
#include "common/err.h"
#include "common/retry.h"
#include "test.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64], dbpath[1024];
static const char *pg_url;	/* NULL: SQLite */

static struct store *open_fresh(void)
{
	struct store *st = NULL;
	CHECK(store_open(dbpath, &st) == 0);
	if (!st)
		printf("  store_open: %s\n", errmsg());
	return st;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the backend under the store, reached directly ---------------------- */

static const struct db_driver *raw_drv(const char *url)
{
	return strncmp(url, "postgres", 8) == 0 ? &db_pg : &db_sqlite;
}

static const char *raw_target(const char *url)
{
	return strncmp(url, "sqlite:", 7) == 0 ? url + 7 : url;
}

/* Run a script on the database at url, outside any store. */
static int raw_script(const char *url, const char *sql)
{
	struct db *db;
	const struct db_driver *d = raw_drv(url);
	int rc = d->open(raw_target(url), &db);
	if (rc < 0)
		return rc;
	rc = d->script(db, NULL, sql);
	if (rc < 0)
		printf("  raw_script: %s\n", errmsg());
	d->close(db);
	return rc;
}

static int row_text(void *ctx, const struct dbv *c, int n)
{
	if (n > 0)
		snprintf(ctx, 256, "%s", c[0].type == DBV_TEXT ? c[0].s : c[0].type == DBV_NULL ? "(null)" : "(number)");
	return 1;
}

/* The first column of the first row of sql, as text ("" if no row). */
static int raw_text(const char *url, const char *sql, char out[256])
{
	struct db *db;
	const struct db_driver *d = raw_drv(url);
	out[0] = 0;
	int rc = d->open(raw_target(url), &db);
	if (rc < 0)
		return rc;
	rc = d->exec(db, NULL, sql, NULL, 0, row_text, out, NULL);
	d->close(db);
	return rc < 0 ? rc : 0;
}

/* The URL of a fresh, empty database called name: a new SQLite file, or a
 * database created anew on the PostgreSQL server under test. */
static void fresh_url(const char *name, char *out, size_t cap)
{
	if (!pg_url) {
		snprintf(out, cap, "sqlite:%s/%s.db", dir, name);
		unlink(out + 7);
		return;
	}
	char sql[256];
	snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
	CHECK(raw_script(pg_url, sql) == 0);
	snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
	CHECK(raw_script(pg_url, sql) == 0);
	/* postgresql://USER@HOST/DB?QUERY: the same with name for DB. */
	const char *auth = strstr(pg_url, "://") + 3;
	const char *path = auth + strcspn(auth, "/?");
	const char *query = strchr(path, '?');
	snprintf(out, cap, "%.*s/%s%s", (int)(path - pg_url), pg_url, name, query ? query : "");
}

/* ---- tests ------------------------------------------------------------------ */

static void store_creates_schema_and_reopens(void)
{
	struct store *st = open_fresh();
	char a[ID_MAX], b[ID_MAX];
	CHECK(st && store_workspace_ensure(st, "alpha", a) == 0);
	store_close(st);
	st = open_fresh();	/* the schema is there: no error, same workspace */
	CHECK(st && store_workspace_ensure(st, "alpha", b) == 0);
	CHECK(strcmp(a, b) == 0);
	CHECK(strncmp(a, "ws_", 3) == 0);
	store_close(st);
	char v[256];
	CHECK(raw_text(dbpath, "SELECT value FROM meta WHERE key = 'schema_version'", v) == 0 &&
	      atoi(v) == schema_version);
	CHECK(schema_migrations[schema_nmigrations - 1].to == schema_version);
}

static void bare_path_is_sqlite(void)
{
	char path[128], ws[ID_MAX];
	snprintf(path, sizeof path, "%s/bare.db", dir);
	struct store *st = NULL;
	CHECK(store_open(path, &st) == 0 && store_workspace_ensure(st, "bare", ws) == 0);
	store_close(st);
	CHECK(access(path, F_OK) == 0);
}

/* Bad store URLs fail at open, naming the problem, never the password. */
static void store_urls_fail_clearly(void)
{
	struct store *st = NULL;
	CHECK(store_open("postgres:/nothing", &st) == -EINVAL && strstr(errmsg(), "postgresql://"));
	CHECK(store_open("postgresql://kiln@localhost/db?pool=0", &st) == -EINVAL &&
	      strstr(errmsg(), "pool=0"));
	CHECK(store_open("postgresql://kiln@localhost/db?pool=65", &st) == -EINVAL);
	CHECK(store_open("postgresql://kiln@localhost/db?pool=4x", &st) == -EINVAL);
	/* Nothing listens on port 1 of loopback. */
	int rc = store_open("postgresql://kiln:s3cr%40t@127.0.0.1:1/kiln?pool=2&connect_timeout=3", &st);
	CHECK(rc == -EAGAIN);
	CHECK(strstr(errmsg(), "store: postgresql://kiln:***@127.0.0.1:1/kiln"));
	CHECK(strstr(errmsg(), "database unavailable") && strstr(errmsg(), "refused"));
	CHECK(!strstr(errmsg(), "s3cr"));
	rc = store_open("postgres://u@127.0.0.1:1/k?password=hunter2", &st);
	CHECK(rc == -EAGAIN && !strstr(errmsg(), "hunter2") && strstr(errmsg(), "password=***"));
	/* libpq's own complaint about a bad URL, the password scrubbed from it. */
	rc = store_open("postgresql://u:pw%zzsecret@127.0.0.1:1/k", &st);
	CHECK(rc < 0 && !strstr(errmsg(), "zzsecret"));
	char out[128];
	db_url_redact("postgresql://a:b@h/d?x=1&password=p&y=2", out, sizeof out);
	CHECK(!strcmp(out, "postgresql://a:***@h/d?x=1&password=***&y=2"));
	db_url_redact("postgresql://h/d", out, sizeof out);
	CHECK(!strcmp(out, "postgresql://h/d"));
	char *ci = NULL;
	int pool = 0;
	CHECK(db_url_take_pool("postgresql://h/d?a=1&pool=8&b=2", &ci, &pool) == 0 && pool == 8 &&
	      !strcmp(ci, "postgresql://h/d?a=1&b=2"));
	free(ci);
	CHECK(db_url_take_pool("postgresql://h/d?pool=3", &ci, &pool) == 0 && pool == 3 &&
	      !strcmp(ci, "postgresql://h/d"));
	free(ci);
	CHECK(db_url_take_pool("postgresql://h/d", &ci, &pool) == 0 && pool == DB_POOL_DEFAULT);
	free(ci);
}

static void keys_are_stored_hashed_and_revocable(void)
{
	struct store *st = open_fresh();
	char ws[ID_MAX], kid[ID_MAX], key[KEY_LEN + 1], hash[KEY_HASH_LEN], shown[KEY_SHOWN_LEN + 1];
	CHECK(store_workspace_ensure(st, "keys", ws) == 0);
	CHECK(key_generate(key) == 0);
	CHECK(key_well_formed(key, strlen(key)));
	key_hash(key, strlen(key), hash);
	key_shown(key, shown);
	CHECK(strlen(hash) == 64 && strncmp(shown, "kiln_", 5) == 0 && strlen(shown) == KEY_SHOWN_LEN);
	CHECK(store_key_add(st, ws, "ci", hash, shown, KEY_FULL, 0, kid) == 0);
	struct key_auth who;
	CHECK(store_key_lookup(st, hash, &who) == 0 && strcmp(who.workspace, ws) == 0);
	CHECK(!strcmp(who.id, kid) && !strcmp(who.prefix, shown) && who.scope == KEY_FULL &&
	      who.last_used_ms == 0);
	/* The key itself is nowhere in the database: not in the SQLite file,
	 * not in any column of api_keys on PostgreSQL. */
	if (!pg_url) {
		FILE *f = fopen(dbpath + 7, "rb");
		char *blob = calloc(1, 1 << 22);
		size_t n = f ? fread(blob, 1, (1 << 22) - 1, f) : 0;
		if (f)
			fclose(f);
		CHECK(n > 0 && !memmem(blob, n, key, strlen(key)));
		free(blob);
	} else {
		char sql[256], found[256];
		snprintf(sql, sizeof sql, "SELECT id FROM api_keys WHERE position('%s' in "
			 "id || workspace_id || name || hash || prefix) > 0", key + 5);
		CHECK(raw_text(dbpath, sql, found) == 0 && found[0] == 0);
		snprintf(sql, sizeof sql, "SELECT id FROM api_keys WHERE hash = '%s'", hash);
		CHECK(raw_text(dbpath, sql, found) == 0 && !strcmp(found, kid));
	}
	char other[KEY_HASH_LEN];
	key_hash("kiln_nope", 9, other);
	CHECK(store_key_lookup(st, other, &who) == -ENOENT);
	CHECK(store_key_revoke(st, kid) == 0);
	CHECK(store_key_lookup(st, hash, &who) == -ENOENT);
	CHECK(store_key_revoke(st, kid) == -ENOENT);
	store_close(st);
}

static int find_key(void *ctx, const struct key_row *k)
{
	struct key_row *want = ctx;
	if (!strcmp(k->id, want->id))
		*want = *k;
	return 0;
}

/* Scopes, expiry and the use recorded to the minute. */
static void key_scope_expiry_use(void)
{
	struct store *st = open_fresh();
	char ws[ID_MAX], rid[ID_MAX], eid[ID_MAX], rh[KEY_HASH_LEN], eh[KEY_HASH_LEN];
	CHECK(store_workspace_ensure(st, "scopes", ws) == 0);
	key_hash("kiln_read", 9, rh);
	key_hash("kiln_expired", 12, eh);
	CHECK(store_key_add(st, ws, "ro", rh, "kiln_read", KEY_READ, wall_ms() + 3600 * 1000, rid) == 0);
	CHECK(store_key_add(st, ws, "old", eh, "kiln_expi", KEY_FULL, wall_ms() - 1, eid) == 0);
	struct key_auth who;
	CHECK(store_key_lookup(st, rh, &who) == 0 && who.scope == KEY_READ);
	CHECK(store_key_lookup(st, eh, &who) == -ENOENT);	/* expired as revoked */
	enum key_scope sc;
	CHECK(key_scope_parse("read", &sc) == 0 && sc == KEY_READ);
	CHECK(key_scope_parse("admin", &sc) == -EINVAL);
	/* Touched once a minute at most. */
	int64_t t0 = wall_ms();
	CHECK(store_key_touch(st, rid, t0) == 0);
	CHECK(store_key_touch(st, rid, t0 + 30000) == 0);
	struct key_row k = { 0 };
	snprintf(k.id, sizeof k.id, "%s", rid);
	CHECK(store_key_each(st, find_key, &k) == 0 && k.last_used_ms == t0 && k.scope == KEY_READ &&
	      k.expires_ms > t0);
	CHECK(store_key_touch(st, rid, t0 + 61000) == 0);
	CHECK(store_key_each(st, find_key, &k) == 0 && k.last_used_ms == t0 + 61000);
	store_close(st);
}

static int collect_audit(void *ctx, const struct audit_row *a)
{
	struct audit_row *out = ctx;
	int i = 0;
	while (out[i].id[0])
		i++;
	if (i < 3)
		out[i] = *a;
	return 0;
}

/* The audit log: per workspace, newest first, limited. */
static void audit_log(void)
{
	struct store *st = open_fresh();
	char a[ID_MAX], b[ID_MAX];
	CHECK(store_workspace_ensure(st, "audit-a", a) == 0);
	CHECK(store_workspace_ensure(st, "audit-b", b) == 0);
	for (int i = 0; i < 3; i++) {
		struct audit_row r = { .status = 200 + i, .created_ms = 1000 + i };
		snprintf(r.workspace, sizeof r.workspace, "%s", i == 1 ? b : a);
		snprintf(r.key_id, sizeof r.key_id, "key_%d", i);
		snprintf(r.key_prefix, sizeof r.key_prefix, "kiln_%d", i);
		snprintf(r.method, sizeof r.method, "POST");
		snprintf(r.route, sizeof r.route, "/v1/sandboxes/{id}/exec");
		snprintf(r.target, sizeof r.target, i ? "sbx_%d" : "", i);
		CHECK(store_audit_add(st, &r) == 0 && !strncmp(r.id, "aud_", 4));
	}
	struct audit_row got[4] = { 0 };
	CHECK(store_audit_each(st, a, &(struct audit_query){ .limit = 10 }, collect_audit, got) == 0);
	CHECK(got[0].status == 202 && got[1].status == 200 && !got[2].id[0]);
	CHECK(!strcmp(got[0].target, "sbx_2") && got[1].target[0] == 0 && got[0].created_ms == 1002);
	CHECK(!strcmp(got[0].key_prefix, "kiln_2") && !strcmp(got[0].method, "POST"));
	memset(got, 0, sizeof got);
	CHECK(store_audit_each(st, a, &(struct audit_query){ .limit = 1 }, collect_audit, got) == 0 && got[0].status == 202 &&
	      !got[1].id[0]);
	/* Pages: after the first entry comes the second, then nothing. */
	struct audit_query q = { .limit = 1, .before_ms = got[0].created_ms, .before_id = got[0].id };
	memset(got, 0, sizeof got);
	CHECK(store_audit_each(st, a, &q, collect_audit, got) == 0 && got[0].status == 200 && !got[1].id[0]);
	q.before_ms = got[0].created_ms, q.before_id = got[0].id;
	memset(got, 0, sizeof got);
	CHECK(store_audit_each(st, a, &q, collect_audit, got) == 0 && !got[0].id[0]);
	/* Ties of one millisecond: every entry once, across pages. */
	for (int i = 0; i < 3; i++) {
		struct audit_row r = { .status = 300 + i, .created_ms = 5000 };
		snprintf(r.workspace, sizeof r.workspace, "%s", b);
		snprintf(r.key_id, sizeof r.key_id, "key_t");
		snprintf(r.key_prefix, sizeof r.key_prefix, "kiln_t");
		snprintf(r.method, sizeof r.method, "DELETE");
		snprintf(r.route, sizeof r.route, "/v1/keys/{id}");
		CHECK(store_audit_add(st, &r) == 0);
	}
	int seen = 0, statuses = 0;
	q = (struct audit_query){ .limit = 1 };
	char last_id[ID_MAX];
	for (int page = 0; page < 6; page++) {
		memset(got, 0, sizeof got);
		CHECK(store_audit_each(st, b, &q, collect_audit, got) == 0);
		if (!got[0].id[0])
			break;
		seen++, statuses += got[0].status;
		snprintf(last_id, sizeof last_id, "%s", got[0].id);
		q.before_ms = got[0].created_ms, q.before_id = last_id;
	}
	CHECK(seen == 4 && statuses == 300 + 301 + 302 + 201);
	/* One key's, by id or by prefix. */
	memset(got, 0, sizeof got);
	CHECK(store_audit_each(st, a, &(struct audit_query){ .limit = 10, .key = "key_0" }, collect_audit, got) == 0 &&
	      got[0].status == 200 && !got[1].id[0]);
	memset(got, 0, sizeof got);
	CHECK(store_audit_each(st, a, &(struct audit_query){ .limit = 10, .key = "kiln_2" }, collect_audit, got) == 0 &&
	      got[0].status == 202 && !got[1].id[0]);
	store_close(st);
}

static void key_shapes(void)
{
	char key[KEY_LEN + 1], k2[KEY_LEN + 1];
	CHECK(key_generate(key) == 0 && key_generate(k2) == 0 && strcmp(key, k2) != 0);
	CHECK(!key_well_formed("kiln_short", 10));
	CHECK(!key_well_formed("nope_abcdefghijkmnpqrstuvwxyz2345678", 37));
	char bad[KEY_LEN + 1];
	memcpy(bad, key, sizeof bad);
	bad[10] = 'l';	/* not in the alphabet */
	CHECK(!key_well_formed(bad, KEY_LEN));
	bad[10] = 0;	/* embedded NUL */
	CHECK(!key_well_formed(bad, KEY_LEN));
	char h1[KEY_HASH_LEN], h2[KEY_HASH_LEN];
	key_hash("abc", 3, h1);
	CHECK(strcmp(h1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
	key_hash("abd", 3, h2);
	CHECK(strcmp(h1, h2) != 0);
}

static void sandbox_rows_round_trip(void)
{
	struct store *st = open_fresh();
	char ws[ID_MAX];
	CHECK(store_workspace_ensure(st, "rows", ws) == 0);
	struct sbx_row r = { 0 };
	CHECK(make_id(r.id, "sbx_") == 0 && strlen(r.id) == 24);
	snprintf(r.workspace, sizeof r.workspace, "%s", ws);
	snprintf(r.template, sizeof r.template, "base");
	r.state = SBX_RUNNING;
	r.vcpus = 2;
	r.memory_mib = 512;
	r.ttl_seconds = 60;
	r.created_ms = r.active_ms = wall_ms();
	r.ready_ms = 12.5;
	r.vmm_pid = 4242;
	r.vmm_start = 99;
	r.cpu_seconds = 1.25;
	r.metadata = strdup("{\"a\":\"b\"}");
	r.disks = strdup("{\"top\":\"/x/disk\"}");
	r.net_slot = 17;
	r.net_policy = strdup("{\"allow_internet\":false}");
	r.stored_bytes = 777;
	r.disk_mib = 4096;
	CHECK(store_sandbox_save(st, &r) == 0);
	struct sbx_row back;
	CHECK(store_sandbox_load(st, r.id, &back) == 0);
	CHECK(back.stored_bytes == 777 && back.disk_mib == 4096);
	CHECK(back.net_slot == 17 && back.net_policy && !strcmp(back.net_policy, "{\"allow_internet\":false}"));
	CHECK(!strcmp(back.template, "base") && back.state == SBX_RUNNING && back.vcpus == 2);
	CHECK(back.ready_ms == 12.5 && back.vmm_pid == 4242 && back.vmm_start == 99);
	CHECK(back.metadata && !strcmp(back.metadata, "{\"a\":\"b\"}") && !back.env);
	CHECK(back.parent[0] == 0 && back.deleted_ms == 0);
	sbx_row_clear(&back);
	/* Upsert: the state changes, the row stays one. */
	r.state = SBX_DELETED;
	r.deleted_ms = wall_ms();
	CHECK(store_sandbox_save(st, &r) == 0);
	CHECK(store_sandbox_load(st, r.id, &back) == 0 && back.state == SBX_DELETED && back.deleted_ms);
	sbx_row_clear(&back);
	CHECK(store_sandbox_load(st, "sbx_nothere", &back) == -ENOENT);
	/* Revisions: a record older than the one kept (a heartbeat's copy,
	 * read on the host before its create's answer was saved) changes
	 * nothing; the same revision or a newer one replaces it. */
	r.state = SBX_RUNNING;
	r.deleted_ms = 0;
	r.rev = 5;
	CHECK(store_sandbox_keep(st, &r) == 0);
	r.state = SBX_CREATING;
	r.rev = 4;
	CHECK(store_sandbox_keep(st, &r) == 1);
	CHECK(store_sandbox_save(st, &r) == 0);	/* the same, as success */
	CHECK(store_sandbox_load(st, r.id, &back) == 0 && back.state == SBX_RUNNING && back.rev == 5);
	sbx_row_clear(&back);
	r.state = SBX_HIBERNATED;
	r.rev = 5;
	CHECK(store_sandbox_keep(st, &r) == 0);
	CHECK(store_sandbox_load(st, r.id, &back) == 0 && back.state == SBX_HIBERNATED);
	sbx_row_clear(&back);
	r.state = SBX_RUNNING;
	r.rev = 9;
	CHECK(store_sandbox_keep(st, &r) == 0);
	CHECK(store_sandbox_load(st, r.id, &back) == 0 && back.state == SBX_RUNNING && back.rev == 9);
	sbx_row_clear(&back);
	sbx_row_clear(&r);
	store_close(st);
}

static int count_live(void *ctx, struct sbx_row *r)
{
	(*(int *)ctx)++;
	sbx_row_clear(r);
	return 0;
}

/* Version 1's shape: no network columns, no ended, one TTL rule. */
static const char v1_schema[] =
	"CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); "
	"INSERT INTO meta VALUES ('schema_version', '1'); "
	"CREATE TABLE sandboxes (id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, template TEXT NOT NULL, "
	"state TEXT NOT NULL, parent_id TEXT, snapshot_id TEXT, vcpus BIGINT NOT NULL, "
	"memory_mib BIGINT NOT NULL, ttl_seconds BIGINT NOT NULL, metadata TEXT, env TEXT, disks TEXT, "
	"created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL, deleted_ms BIGINT, active_ms BIGINT NOT NULL, "
	"ready_ms DOUBLE PRECISION, vmm_pid BIGINT, vmm_start BIGINT, cpu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0, "
	"cpu_base DOUBLE PRECISION NOT NULL DEFAULT 0, mem_mib_seconds DOUBLE PRECISION NOT NULL DEFAULT 0, "
	"running_seconds DOUBLE PRECISION NOT NULL DEFAULT 0, rss_bytes BIGINT NOT NULL DEFAULT 0, error TEXT); "
	"INSERT INTO sandboxes (id, workspace_id, template, state, vcpus, memory_mib, ttl_seconds, created_ms, "
	"updated_ms, active_ms) VALUES ('sbx_old', 'ws_x', 'base', 'running', 1, 256, 0, 1, 1, 1); "
	"INSERT INTO sandboxes (id, workspace_id, template, state, vcpus, memory_mib, ttl_seconds, created_ms, "
	"updated_ms, active_ms, deleted_ms) VALUES ('sbx_gone', 'ws_x', 'base', 'deleted', 1, 256, 0, 1, 1, 1, 2); "
	/* Keys before version 5: no scope, expiry or last use. */
	"CREATE TABLE workspaces (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, created_ms BIGINT NOT NULL); "
	"INSERT INTO workspaces VALUES ('ws_x', 'old', 1); "
	"CREATE TABLE api_keys (id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL REFERENCES workspaces(id), "
	"name TEXT NOT NULL, hash TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL, created_ms BIGINT NOT NULL, "
	"revoked_ms BIGINT); "
	"INSERT INTO api_keys VALUES ('key_old', 'ws_x', 'old', 'oldhash', 'kiln_old', 1, NULL); "
	/* Snapshots as version 1 had them (no stored_bytes before 8). */
	"CREATE TABLE snapshots (id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL REFERENCES workspaces(id), "
	"sandbox_id TEXT NOT NULL, template TEXT NOT NULL, vcpus BIGINT NOT NULL, memory_mib BIGINT NOT NULL, "
	"disks TEXT, env TEXT, created_ms BIGINT NOT NULL, deleted_ms BIGINT); "
	"INSERT INTO snapshots VALUES ('snap_old', 'ws_x', 'sbx_old', 'base', 1, 256, NULL, NULL, 1, NULL);";

/* A database of schema version 1 gains every later column, on both
 * backends, with the same migration text. */
static void schema_v1_is_migrated(void)
{
	char url[1024], v[256];
	fresh_url("kiln_v1", url, sizeof url);
	CHECK(raw_script(url, v1_schema) == 0);
	struct store *st = NULL;
	CHECK(store_open(url, &st) == 0);
	struct sbx_row r;
	CHECK(st && store_sandbox_load(st, "sbx_old", &r) == 0);
	CHECK(r.net_slot == 0 && r.net_policy == NULL);
	r.net_slot = 3;
	CHECK(store_sandbox_save(st, &r) == 0);
	sbx_row_clear(&r);
	/* Version 3: rows deleted before it read as "deleted". */
	CHECK(store_sandbox_load(st, "sbx_gone", &r) == 0 && !strcmp(r.ended, "deleted"));
	sbx_row_clear(&r);
	store_close(st);
	CHECK(store_open(url, &st) == 0);	/* once migrated, opened as is */
	CHECK(st && store_sandbox_load(st, "sbx_old", &r) == 0 && r.net_slot == 3);
	CHECK(r.ended[0] == 0);
	r.state = SBX_DELETED;
	snprintf(r.ended, sizeof r.ended, "ttl");
	CHECK(store_sandbox_save(st, &r) == 0);
	sbx_row_clear(&r);
	CHECK(store_sandbox_load(st, "sbx_old", &r) == 0 && strcmp(r.ended, "ttl") == 0);
	/* Version 4: its TTL rule, the old rule (idle, delete) by default. */
	CHECK(!r.ttl_absolute && !r.idle_hibernate && r.retention_seconds == 0);
	r.ttl_absolute = r.idle_hibernate = true;
	r.retention_seconds = 86400;
	CHECK(store_sandbox_save(st, &r) == 0);
	sbx_row_clear(&r);
	CHECK(store_sandbox_load(st, "sbx_old", &r) == 0 && r.ttl_absolute && r.idle_hibernate &&
	      r.retention_seconds == 86400);
	sbx_row_clear(&r);
	/* Version 5: an older key is a full one that never expires. */
	struct key_auth who;
	CHECK(store_key_lookup(st, "oldhash", &who) == 0 && !strcmp(who.id, "key_old") &&
	      who.scope == KEY_FULL && who.last_used_ms == 0);
	CHECK(store_key_touch(st, "key_old", 5000) == 0);
	CHECK(store_key_lookup(st, "oldhash", &who) == 0 && who.last_used_ms == 5000);
	/* Version 7: an older workspace is live and not suspended. */
	struct workspace_row wr;
	CHECK(who.suspended == false && !strcmp(who.workspace_name, "old"));
	CHECK(store_workspace_find(st, "old", &wr) == 0 && !strcmp(wr.id, "ws_x") && !wr.suspended);
	/* Version 8: what is kept is measured from now on; older rows 0. */
	struct snap_row sn;
	CHECK(store_snapshot_load(st, "snap_old", "ws_x", &sn) == 0 && sn.stored_bytes == 0);
	sn.stored_bytes = 4096;
	CHECK(store_snapshot_save(st, &sn) == 0);
	snap_row_clear(&sn);
	CHECK(store_snapshot_load(st, "snap_old", NULL, &sn) == 0 && sn.stored_bytes == 4096);
	snap_row_clear(&sn);
	CHECK(store_sandbox_load(st, "sbx_old", &r) == 0 && r.stored_bytes == 0);
	/* Version 9: an older sandbox is never paused when idle. */
	CHECK(r.idle_pause_seconds == 0);
	r.idle_pause_seconds = 90;
	CHECK(store_sandbox_save(st, &r) == 0);
	sbx_row_clear(&r);
	CHECK(store_sandbox_load(st, "sbx_old", &r) == 0 && r.idle_pause_seconds == 90);
	/* Version 12: an older sandbox's disk size is unknown (0) until said. */
	CHECK(r.disk_mib == 0);
	r.disk_mib = 72;
	CHECK(store_sandbox_save(st, &r) == 0);
	sbx_row_clear(&r);
	CHECK(store_sandbox_load(st, "sbx_old", &r) == 0 && r.disk_mib == 72);
	/* Version 13: an older record is revision 0, which any save keeps. */
	CHECK(r.rev == 0);
	r.rev = 1;
	r.state = SBX_HIBERNATED;
	CHECK(store_sandbox_keep(st, &r) == 0);
	sbx_row_clear(&r);
	CHECK(store_sandbox_load(st, "sbx_old", &r) == 0 && r.rev == 1 && r.state == SBX_HIBERNATED);
	sbx_row_clear(&r);
	/* The tables version 1 lacked were made too. */
	char ws[ID_MAX];
	struct operator_row orow;
	CHECK(store_operator_lookup(st, "nohash", &orow) == -ENOENT);
	struct audit_row ar = { .status = 201 };
	snprintf(ar.workspace, sizeof ar.workspace, "ws_x");
	CHECK(store_audit_add(st, &ar) == 0);
	CHECK(store_workspace_ensure(st, "after-v1", ws) == 0);
	store_close(st);
	CHECK(raw_text(url, "SELECT value FROM meta WHERE key = 'schema_version'", v) == 0 &&
	      atoi(v) == schema_version);
	/* A database newer than this kilnd is refused, untouched. */
	CHECK(raw_script(url, "UPDATE meta SET value = '99' WHERE key = 'schema_version'") == 0);
	CHECK(store_open(url, &st) == -EPROTO && strstr(errmsg(), "newer than this kilnd"));
}

/* Several stores opening one fresh (then one version-1) database at once,
 * as replicas starting together do: all succeed, the schema is made and
 * migrated once, and the version is this kilnd's. */
#define RACERS 6
static char race_url[1024];
static pthread_barrier_t race_start;

static void *open_racer(void *arg)
{
	(void)arg;
	struct store *st = NULL;
	pthread_barrier_wait(&race_start);
	int rc = store_open(race_url, &st);
	if (rc < 0)
		printf("  racer: %s\n", errmsg());
	char ws[ID_MAX];
	if (rc == 0)
		rc = store_workspace_ensure(st, "race", ws);
	store_close(st);
	return rc < 0 ? (void *)1 : NULL;
}

static int race_opens(void)
{
	pthread_t t[RACERS];
	int bad = 0;
	pthread_barrier_init(&race_start, NULL, RACERS);
	for (int i = 0; i < RACERS; i++)
		pthread_create(&t[i], NULL, open_racer, NULL);
	for (int i = 0; i < RACERS; i++) {
		void *ret;
		pthread_join(t[i], &ret);
		bad += ret != NULL;
	}
	pthread_barrier_destroy(&race_start);
	return bad;
}

static void concurrent_opens_migrate_once(void)
{
	char v[256];
	for (int round = 0; round < 3; round++) {
		fresh_url("kiln_race", race_url, sizeof race_url);
		CHECK(race_opens() == 0);
		CHECK(raw_text(race_url, "SELECT value FROM meta WHERE key = 'schema_version'", v) == 0 &&
		      atoi(v) == schema_version);
		CHECK(raw_text(race_url, "SELECT name FROM workspaces", v) == 0 && !strcmp(v, "race"));
	}
	fresh_url("kiln_race", race_url, sizeof race_url);
	CHECK(raw_script(race_url, v1_schema) == 0);
	CHECK(race_opens() == 0);
	CHECK(raw_text(race_url, "SELECT value FROM meta WHERE key = 'schema_version'", v) == 0 &&
	      atoi(v) == schema_version);
	CHECK(raw_text(race_url, "SELECT ended FROM sandboxes WHERE id = 'sbx_gone'", v) == 0 &&
	      !strcmp(v, "deleted"));
}

/* A running sandbox's record in workspace ws, template minimal, not saved. */
static void new_sbx(struct sbx_row *r, const char *ws)
{
	memset(r, 0, sizeof *r);
	make_id(r->id, "sbx_");
	snprintf(r->workspace, sizeof r->workspace, "%s", ws);
	snprintf(r->template, sizeof r->template, "minimal");
	r->state = SBX_RUNNING;
}

static void usage_sums_per_workspace(void)
{
	struct store *st = open_fresh();
	char a[ID_MAX], b[ID_MAX];
	CHECK(store_workspace_ensure(st, "usage-a", a) == 0 && store_workspace_ensure(st, "usage-b", b) == 0);
	for (int i = 0; i < 3; i++) {
		struct sbx_row r;
		new_sbx(&r, i < 2 ? a : b);
		r.state = i == 0 ? SBX_DELETED : SBX_RUNNING;
		r.cpu_seconds = 1.5 * (i + 1);
		r.mem_mib_seconds = 100;
		r.running_seconds = 10;
		CHECK(store_sandbox_save(st, &r) == 0);
	}
	struct usage u;
	CHECK(store_usage_sum(st, a, &u) == 0);
	CHECK(u.sandboxes == 2 && u.live == 1 && u.cpu_seconds == 4.5 && u.mem_mib_seconds == 200);
	CHECK(store_usage_sum(st, b, &u) == 0 && u.sandboxes == 1 && u.cpu_seconds == 4.5);
	CHECK(store_usage_sum(st, "ws_none", &u) == 0 && u.sandboxes == 0 && u.cpu_seconds == 0);
	int live = 0;
	CHECK(store_sandbox_each_live(st, count_live, &live) == 0);
	CHECK(live >= 2);
	store_close(st);
}

/* A row callback that calls the store again (an app's listing reads its
 * sandbox through the host, which marks a sandbox whose VMM died failed
 * in the store as it finds it): on SQLite the store's lock was held
 * across the callbacks, and kilnd hung for good. A watchdog turns such a
 * hang into a failure. Also: a callback's non-zero answer still ends the
 * rows and is what the call returns. */
static struct store *nested_st;
static int nested_rows;

static void nested_hung(int sig)
{
	(void)sig;
	static const char msg[] = "FAIL callbacks_may_use_the_store: a row callback that wrote to the store "
				  "hung (the store's lock held across it)\n";
	if (write(1, msg, sizeof msg - 1) < 0) {
		/* nothing more to say */
	}
	/* main's cleanup never comes: the scratch directory goes here
	 * (fork, execve and waitpid are async-signal-safe). */
	pid_t rm = fork();
	if (rm == 0) {
		execl("/bin/rm", "rm", "-rf", dir, (char *)NULL);
		_exit(127);
	}
	if (rm > 0)
		waitpid(rm, NULL, 0);
	_exit(1);
}

static int fail_each(void *ctx, struct sbx_row *r)
{
	(void)ctx;
	nested_rows++;
	r->state = SBX_FAILED;
	snprintf(r->error, sizeof r->error, "marked in the callback");
	int rc = store_sandbox_save(nested_st, r);
	sbx_row_clear(r);
	return rc;
}

static int stop_at_first(void *ctx, struct sbx_row *r)
{
	(*(int *)ctx)++;
	sbx_row_clear(r);
	return 7;
}

static void callbacks_may_use_the_store(void)
{
	struct store *st = open_fresh();
	nested_st = st;
	char ws[ID_MAX], ids[3][ID_MAX];
	CHECK(store_workspace_ensure(st, "nested", ws) == 0);
	for (int i = 0; i < 3; i++) {
		struct sbx_row r;
		new_sbx(&r, ws);
		snprintf(ids[i], sizeof ids[i], "%s", r.id);
		CHECK(store_sandbox_save(st, &r) == 0);
	}
	signal(SIGALRM, nested_hung);
	alarm(30);
	nested_rows = 0;
	CHECK(store_sandbox_each_live(st, fail_each, NULL) == 0);
	alarm(0);
	CHECK(nested_rows >= 3);
	for (int i = 0; i < 3; i++) {
		struct sbx_row back;
		CHECK(store_sandbox_load(st, ids[i], &back) == 0);
		CHECK(back.state == SBX_FAILED && strcmp(back.error, "marked in the callback") == 0);
		sbx_row_clear(&back);
	}
	int calls = 0;
	for (int i = 0; i < 2; i++) {
		struct sbx_row r;
		new_sbx(&r, ws);
		CHECK(store_sandbox_save(st, &r) == 0);
	}
	CHECK(store_sandbox_each_live(st, stop_at_first, &calls) == 7 && calls == 1);
	store_close(st);
}

/* Sandboxes by state, as a cluster's replica shows them (its /metrics
 * kiln_sandboxes, src/hostif/hostif_remote.c): each state but deleted. */
static void sandbox_states_counted(void)
{
	struct store *st = open_fresh();
	char ws[ID_MAX];
	int64_t before[SBX_NSTATES], after[SBX_NSTATES];
	const enum sbx_state add[] = { SBX_RUNNING, SBX_RUNNING, SBX_HIBERNATED, SBX_DELETED };
	CHECK(store_workspace_ensure(st, "states", ws) == 0);
	CHECK(store_sandbox_states(st, before) == 0);
	for (size_t i = 0; i < sizeof add / sizeof *add; i++) {
		struct sbx_row r;
		new_sbx(&r, ws);
		r.state = add[i];
		CHECK(store_sandbox_save(st, &r) == 0);
	}
	CHECK(store_sandbox_states(st, after) == 0);
	for (int i = 0; i < SBX_NSTATES; i++) {
		int64_t want = i == SBX_DELETED ? 0 : before[i] + (i == SBX_RUNNING ? 2 : i == SBX_HIBERNATED);
		if (after[i] != want)
			printf("  %s: %lld, want %lld\n", sbx_state_name(i), (long long)after[i], (long long)want);
		CHECK(after[i] == want);
	}
	store_close(st);
}

/* Metered hours add up per sandbox and hour, stay in their workspace, and
 * come back by hour (summed or per sandbox) within a range; the billed
 * columns of a sandbox round-trip and sum. */
static int collect_hour(void *ctx, const struct usage_hour *u)
{
	struct usage_hour *out = ctx;
	for (int i = 0; i < 8; i++)
		if (!out[i].hour_ms) {
			out[i] = *u;
			return 0;
		}
	return 0;
}

static void usage_hours_add_up(void)
{
	struct store *st = open_fresh();
	char a[ID_MAX], b[ID_MAX];
	CHECK(store_workspace_ensure(st, "hours-a", a) == 0 && store_workspace_ensure(st, "hours-b", b) == 0);
	const int64_t h0 = 1796169600000LL, h1 = h0 + 3600000, h2 = h1 + 3600000;
	struct usage_hour u = { .hour_ms = h0, .cpu_us = 1000000, .mem_mib_s = 100, .run_ms = 5000 };
	snprintf(u.workspace, sizeof u.workspace, "%s", a);
	snprintf(u.sandbox, sizeof u.sandbox, "sbx_one");
	CHECK(store_usage_add(st, &u) == 0 && store_usage_add(st, &u) == 0);	/* the same hour: adds */
	u.hour_ms = h1;
	CHECK(store_usage_add(st, &u) == 0);
	snprintf(u.sandbox, sizeof u.sandbox, "sbx_two");
	u.cpu_us = 3;
	CHECK(store_usage_add(st, &u) == 0);
	snprintf(u.workspace, sizeof u.workspace, "%s", b);
	snprintf(u.sandbox, sizeof u.sandbox, "sbx_other");
	u.hour_ms = h0;
	CHECK(store_usage_add(st, &u) == 0);
	struct usage_hour got[8] = { 0 };
	CHECK(store_usage_hours(st, a, NULL, h0, h2, false, collect_hour, got) == 0);
	CHECK(got[0].hour_ms == h0 && got[0].cpu_us == 2000000 && got[0].mem_mib_s == 200 && got[0].run_ms == 10000);
	CHECK(got[1].hour_ms == h1 && got[1].cpu_us == 1000003 && got[1].mem_mib_s == 200);
	CHECK(got[2].hour_ms == 0);	/* workspace b's hour is not a's */
	memset(got, 0, sizeof got);
	CHECK(store_usage_hours(st, a, NULL, h0, h2, true, collect_hour, got) == 0);
	CHECK(got[0].hour_ms == h0 && !strcmp(got[0].sandbox, "sbx_one") && got[1].hour_ms == h1 &&
	      !strcmp(got[1].sandbox, "sbx_one") && !strcmp(got[2].sandbox, "sbx_two") && got[2].cpu_us == 3);
	memset(got, 0, sizeof got);
	CHECK(store_usage_hours(st, a, "sbx_two", h0, h2, false, collect_hour, got) == 0);
	CHECK(got[0].hour_ms == h1 && got[0].cpu_us == 3 && got[1].hour_ms == 0);
	memset(got, 0, sizeof got);
	CHECK(store_usage_hours(st, a, NULL, h1, h2, false, collect_hour, got) == 0);	/* from h1 */
	CHECK(got[0].hour_ms == h1 && got[1].hour_ms == 0);
	/* store_usage_set (a host's whole hour, through its heartbeat): a
	 * newer copy replaces, an older one taken after it changes nothing. */
	struct usage_hour w = { .hour_ms = h1, .cpu_us = 500, .mem_mib_s = 50, .run_ms = 700 };
	snprintf(w.workspace, sizeof w.workspace, "%s", a);
	snprintf(w.sandbox, sizeof w.sandbox, "sbx_set");
	CHECK(store_usage_set(st, &w) == 0);
	w.cpu_us = 900, w.mem_mib_s = 90, w.run_ms = 1200;
	CHECK(store_usage_set(st, &w) == 0);
	w.cpu_us = 600, w.mem_mib_s = 60, w.run_ms = 800;	/* the older copy, late */
	CHECK(store_usage_set(st, &w) == 0);
	memset(got, 0, sizeof got);
	CHECK(store_usage_hours(st, a, "sbx_set", h0, h2, false, collect_hour, got) == 0);
	CHECK(got[0].hour_ms == h1 && got[0].cpu_us == 900 && got[0].mem_mib_s == 90 && got[0].run_ms == 1200);
	/* The billed columns of a sandbox record. */
	struct sbx_row r, back;
	new_sbx(&r, a);
	r.cpu_seconds = 12.5, r.active_cpu_seconds = 10.25, r.active_base = 4, r.pss_mib_seconds = 2048;
	r.pss_bytes = 123456789;
	CHECK(store_sandbox_save(st, &r) == 0 && store_sandbox_load(st, r.id, &back) == 0);
	CHECK(back.active_cpu_seconds == 10.25 && back.active_base == 4 && back.pss_mib_seconds == 2048 &&
	      back.pss_bytes == 123456789);
	sbx_row_clear(&back);
	struct usage s;
	CHECK(store_usage_sum(st, a, &s) == 0 && s.active_cpu_seconds == 10.25 && s.pss_mib_seconds == 2048);
	store_close(st);
}

/* A closed month's statement is written once: a second insert for the
 * same workspace and month changes nothing (ON CONFLICT DO NOTHING), and
 * threads racing to close one month all read back the one that landed.
 * Listed newest first, per workspace; the first metered hour. */
static int collect_month(void *ctx, const struct statement_row *s)
{
	char (*months)[8] = ctx;
	for (int i = 0; i < 4; i++)
		if (!months[i][0]) {
			snprintf(months[i], 8, "%s", s->month);
			return 0;
		}
	return 0;
}

static int collect_marks(void *ctx, const char *name, int64_t deleted, int64_t floor)
{
	char *seen = ctx;
	size_t n = strlen(seen);
	snprintf(seen + n, 96 - n, "%s@%lld/%lld ", name, (long long)deleted, (long long)floor);
	return 0;
}

/* A template deleted in a cluster: recorded with its version, never
 * lowered by a later record, gone when it is built again; the highest
 * version deleted stays (template_versions). */
static void template_deletions_round_trip(void)
{
	struct store *st = open_fresh();
	int64_t v = -1;
	CHECK(store_template_deleted_get(st, "w1_tpl", &v) == -ENOENT && v == -1);
	CHECK(store_template_deleted_set(st, "w1_tpl", 3) == 0);
	CHECK(store_template_deleted_get(st, "w1_tpl", &v) == 0 && v == 3);
	CHECK(store_template_deleted_set(st, "w1_tpl", 2) == 0);
	CHECK(store_template_deleted_get(st, "w1_tpl", &v) == 0 && v == 3);
	CHECK(store_template_deleted_set(st, "w1_tpl", 5) == 0);
	CHECK(store_template_deleted_get(st, "w1_tpl", &v) == 0 && v == 5);
	CHECK(store_template_deleted_get(st, "w1_other", &v) == -ENOENT);
	CHECK(store_template_version_floor(st, "w1_tpl", &v) == 0 && v == 5);
	CHECK(store_template_deleted_clear(st, "w1_tpl") == 0);
	CHECK(store_template_deleted_get(st, "w1_tpl", &v) == -ENOENT);
	CHECK(store_template_deleted_clear(st, "w1_tpl") == 0);
	/* All of them in one read (the cluster's template copier, once a
	 * round): each name once, with its deletion in force (-1: none, as
	 * w1_tpl's, cleared above) and its floor. */
	CHECK(store_template_deleted_set(st, "w1_b", 4) == 0);
	CHECK(store_template_deleted_set(st, "w1_a", 2) == 0);
	CHECK(store_template_deleted_set(st, "w1_b", 7) == 0);
	char seen[96] = "";
	CHECK(store_template_marks_each(st, collect_marks, seen) == 0);
	CHECK(!strcmp(seen, "w1_a@2/2 w1_b@7/7 w1_tpl@-1/5 "));
	CHECK(store_template_deleted_clear(st, "w1_a") == 0);
	seen[0] = 0;
	CHECK(store_template_marks_each(st, collect_marks, seen) == 0);
	CHECK(!strcmp(seen, "w1_a@-1/2 w1_b@7/7 w1_tpl@-1/5 "));
	/* The highest version ever deleted outlives the row a new build
	 * drops: the next build starts above it. Never lowered. */
	CHECK(store_template_version_floor(st, "w1_tpl", &v) == 0 && v == 5);
	CHECK(store_template_deleted_set(st, "w1_tpl", 1) == 0);
	CHECK(store_template_version_floor(st, "w1_tpl", &v) == 0 && v == 5);
	CHECK(store_template_deleted_set(st, "w1_tpl", 6) == 0 && store_template_deleted_clear(st, "w1_tpl") == 0);
	CHECK(store_template_version_floor(st, "w1_tpl", &v) == 0 && v == 6);
	CHECK(store_template_version_floor(st, "w1_other", &v) == 0 && v == 0);
	store_close(st);
}

static int collect_notice(void *ctx, const struct notice_row *n)
{
	char *seen = ctx;
	size_t len = strlen(seen);
	snprintf(seen + len, 160 - len, "%s:%s:%s:%lld ", n->sandbox, n->state, n->action, (long long)n->due_ms);
	return 0;
}

/* TTL warnings on their way to a cluster's event streams: each kept once
 * (a host sends its records again), read back from a time on, oldest
 * first; those of another due time are others. */
static void notices_round_trip(void)
{
	struct store *st = open_fresh();
	struct notice_row n = { .sandbox = "sbx_n1", .workspace = "ws_n", .kind = "ttl_warning",
				.state = "running", .action = "hibernate", .due_ms = 5000 };
	int64_t t0 = wall_ms();
	CHECK(store_notice_add(st, &n) == 0);
	CHECK(store_notice_add(st, &n) == 0);	/* again: kept once */
	n.due_ms = 9000;
	snprintf(n.state, sizeof n.state, "hibernated");
	snprintf(n.action, sizeof n.action, "delete");
	CHECK(store_notice_add(st, &n) == 0);
	char seen[160] = "";
	CHECK(store_notice_each_since(st, t0 - 1000, collect_notice, seen) == 0);
	CHECK(!strcmp(seen, "sbx_n1:running:hibernate:5000 sbx_n1:hibernated:delete:9000 ") ||
	      !strcmp(seen, "sbx_n1:hibernated:delete:9000 sbx_n1:running:hibernate:5000 "));
	seen[0] = 0;
	CHECK(store_notice_each_since(st, wall_ms() + 60000, collect_notice, seen) == 0 && !seen[0]);
	store_close(st);
}

/* ---- a month's bill, made again from the usage records ------------------------------ */

struct month_usage {
	int64_t cpu_us, mem_mib_s, run_ms;
};

static void add_usage(struct store *st, const char *ws, const char *sbx, int64_t hour_ms, int64_t cpu_us,
		      int64_t mem_mib_s, int64_t run_ms, struct month_usage *into)
{
	struct usage_hour u = { .hour_ms = hour_ms, .cpu_us = cpu_us, .mem_mib_s = mem_mib_s, .run_ms = run_ms };
	snprintf(u.workspace, sizeof u.workspace, "%s", ws);
	snprintf(u.sandbox, sizeof u.sandbox, "%s", sbx);
	CHECK(store_usage_add(st, &u) == 0);
	if (into)
		into->cpu_us += cpu_us, into->mem_mib_s += mem_mib_s, into->run_ms += run_ms;
}

/* n * price / per to the nearest whole, the arithmetic docs/billing.md
 * gives ("round(vCPU-us x price / 3.6e9)"), written out again here rather
 * than calling the code under test. */
static int64_t by_hand(int64_t n, int64_t price, int64_t per)
{
	return (int64_t)(((__int128)n * price * 2 + per) / (2 * (__int128)per));
}

static bool bill_is(const struct statement_row *s, const char *month, const struct month_usage *u,
		    const struct prices *p, int64_t credit)
{
	int64_t cpu = by_hand(u->cpu_us, p->vcpu_hour, 3600000000LL);
	int64_t mem = by_hand(u->mem_mib_s, p->gib_hour, 3600LL * 1024);
	int64_t applied = credit < cpu + mem ? credit : cpu + mem;
	bool ok = !strcmp(s->month, month) && s->cpu_us == u->cpu_us && s->mem_mib_s == u->mem_mib_s &&
		  s->run_ms == u->run_ms && s->vcpu_hour == p->vcpu_hour && s->gib_hour == p->gib_hour &&
		  s->cpu == cpu && s->mem == mem && s->cost == cpu + mem && s->credit == credit &&
		  s->credit_applied == applied && s->amount_due == cpu + mem - applied && !strcmp(s->plan, "free");
	if (!ok)
		fprintf(stderr, "  %s: cpu_us %lld (want %lld) mem_mib_s %lld (%lld) run_ms %lld (%lld) "
			"cpu %lld (%lld) mem %lld (%lld) cost %lld due %lld plan %s\n", s->month,
			(long long)s->cpu_us, (long long)u->cpu_us, (long long)s->mem_mib_s,
			(long long)u->mem_mib_s, (long long)s->run_ms, (long long)u->run_ms, (long long)s->cpu,
			(long long)cpu, (long long)s->mem, (long long)mem, (long long)s->cost,
			(long long)s->amount_due, s->plan);
	return ok;
}

static int list_month(void *ctx, const struct statement_row *s, bool open)
{
	char *out = ctx;
	size_t n = strlen(out);
	snprintf(out + n, 64 - n, "%s%s ", s->month, open ? "(open)" : "");
	return 0;
}

/* A workspace on the free plan with sandboxes running across midnight of
 * 1 December (UTC), the usage written as the host agent writes it (added
 * to its hour's row, several saves an hour): the hours before midnight
 * are November's bill and those from midnight on December's, and each
 * month's bill is the sum of its records priced by hand (cost, credit
 * applied, amount due). The clock is the now_ms the statements are asked
 * at: November is open through the five minutes' grace, then closed and
 * stored; a record added to it later, and other prices, change nothing
 * of it, while December is still computed from its records. */
static void month_boundary_bill(void)
{
	struct store *st = open_fresh();
	char ws[ID_MAX];
	CHECK(store_workspace_ensure(st, "month-edge", ws) == 0);
	CHECK(store_plan_set(st, ws, "free", NULL, false) == 0);
	struct plans ps;
	plans_init(&ps);
	const struct plan *free_plan = plans_find(&ps, "free");
	CHECK(free_plan && free_plan->limits.credit_microdollars == 5400000);
	int64_t credit = free_plan ? free_plan->limits.credit_microdollars : 0;
	struct prices p = ps.prices;
	int64_t nov, dec, dec_end, nov_end;
	CHECK(month_parse("2026-11", &nov, &nov_end) == 0 && month_parse("2026-12", &dec, &dec_end) == 0);
	CHECK(nov_end == dec && dec == 1796083200000LL);	/* 2026-12-01T00:00:00Z */
	const int64_t H = 3600000;
	struct month_usage in_nov = { 0 }, in_dec = { 0 };
	/* sbx_edge runs from 22:30 on the 30th to 01:20 on the 1st, one vCPU
	 * busy and 300 MiB resident (two saves in an hour: both add). */
	add_usage(st, ws, "sbx_edge", dec - 2 * H, 1800000000LL, 300 * 1800, 1800000, &in_nov);
	add_usage(st, ws, "sbx_edge", dec - H, 1799999999LL, 300 * 1800, 1800000, &in_nov);
	add_usage(st, ws, "sbx_edge", dec - H, 1800000001LL, 300 * 1800, 1800000, &in_nov);
	add_usage(st, ws, "sbx_edge", dec, 3600000000LL, 300 * 3600, 3600000, &in_dec);
	add_usage(st, ws, "sbx_edge", dec + H, 1200000000LL, 300 * 1200, 1200000, &in_dec);
	/* A big November, past the free credit: 120 vCPU-hours = $6.48. */
	add_usage(st, ws, "sbx_nov", nov + 48 * H, 432000000000LL, 1024 * 3600, 3600000, &in_nov);
	add_usage(st, ws, "sbx_dec", dec + 5 * H, 7777777LL, 12345, 99999, &in_dec);
	/* October's, and another workspace's December: in neither bill. */
	add_usage(st, ws, "sbx_oct", nov - 10 * H, 555555555LL, 4444, 3333, NULL);
	char other[ID_MAX];
	CHECK(store_workspace_ensure(st, "month-other", other) == 0);
	add_usage(st, other, "sbx_x", dec, 999999999LL, 9999, 9999, NULL);

	struct ops_caller c = { .store = st, .plans = &ps, .workspace = ws };
	struct statement_row s;
	bool open = false;
	/* A minute after midnight: November is still open (its last hour's
	 * saves may still come), computed. */
	CHECK(ops_statement(&c, &p, "2026-11", dec + 60000, &s, &open) == 0 && open && s.closed_ms == 0 &&
	      bill_is(&s, "2026-11", &in_nov, &p, credit));
	CHECK(s.amount_due > 0 && s.credit_applied == credit);	/* the credit did not cover it */
	/* Ten minutes after: closed at that moment, and stored. */
	int64_t closed_at = dec + 10 * 60000;
	CHECK(ops_statement(&c, &p, "2026-11", closed_at, &s, &open) == 0 && !open && s.closed_ms == closed_at &&
	      bill_is(&s, "2026-11", &in_nov, &p, credit));
	struct statement_row stored;
	CHECK(store_statement_load(st, ws, "2026-11", &stored) == 0 && stored.cost == s.cost &&
	      stored.closed_ms == closed_at);
	CHECK(ops_statement(&c, &p, "2026-12", closed_at, &s, &open) == 0 && open &&
	      bill_is(&s, "2026-12", &in_dec, &p, credit));
	/* The two months hold every record of theirs, the midnight hour in
	 * December's: together they are the sandbox's whole run. */
	CHECK(in_nov.run_ms + in_dec.run_ms == 99999 + 3600000 + 3 * 1800000 + 3600000 + 1200000);

	/* A late save into November's last hour, and new prices: the closed
	 * bill stays as it was; December's is priced anew. */
	add_usage(st, ws, "sbx_edge", dec - H, 1000000000LL, 100, 100, NULL);
	struct prices dearer = { p.vcpu_hour * 2, p.gib_hour * 3 };
	CHECK(ops_statement(&c, &dearer, "2026-11", dec + 20 * 60000, &s, &open) == 0 && !open &&
	      s.closed_ms == closed_at && bill_is(&s, "2026-11", &in_nov, &p, credit));
	CHECK(ops_statement(&c, &dearer, "2026-12", dec + 20 * 60000, &s, &open) == 0 && open &&
	      bill_is(&s, "2026-12", &in_dec, &dearer, credit));
	/* The list: newest first, October closed now as well. */
	char months[64] = "";
	CHECK(ops_statement_each(&c, &dearer, dec + 20 * 60000, list_month, months) == 0 &&
	      !strcmp(months, "2026-12(open) 2026-11 2026-10 "));
	if (strcmp(months, "2026-12(open) 2026-11 2026-10 "))
		fprintf(stderr, "  months: %s\n", months);
	store_close(st);
}

/* ---- a sample across midnight, cut between the two days ------------------------------ */

static int add_to(void *ctx, const struct usage_hour *u)
{
	struct month_usage *t = ctx;
	t->cpu_us += u->cpu_us, t->mem_mib_s += u->mem_mib_s, t->run_ms += u->run_ms;
	return 0;
}

/* The workspace's use from from_ms to to_ms (a day: what GET /v1/usage
 * ?granularity=day sums, its hours). */
static struct month_usage used(struct store *st, const char *ws, int64_t from_ms, int64_t to_ms)
{
	struct month_usage t = { 0 };
	CHECK(store_usage_hours(st, ws, NULL, from_ms, to_ms, false, add_to, &t) == 0);
	return t;
}

static bool usage_is(const char *what, struct month_usage got, int64_t cpu_us, int64_t mem_mib_s, int64_t run_ms)
{
	bool ok = got.cpu_us == cpu_us && got.mem_mib_s == mem_mib_s && got.run_ms == run_ms;
	if (!ok)
		fprintf(stderr, "  %s: cpu_us %lld (want %lld) mem_mib_s %lld (%lld) run_ms %lld (%lld)\n", what,
			(long long)got.cpu_us, (long long)cpu_us, (long long)got.mem_mib_s, (long long)mem_mib_s,
			(long long)got.run_ms, (long long)run_ms);
	return ok;
}

/* Samples taken as the host agent takes them (host/meter.h: a sample is
 * added, then saved), one of them the 10 s from 23:59:55 on 30 November
 * to 00:00:05 on 1 December: 5 s of it, half its vCPU time and 5 s of
 * its working set, count in each day and so in each month's bill (not
 * all in the hour it ended in). Another crosses midnight of 1 to 2
 * December unevenly (2.75 s and 4.75 s); two samples not saved between
 * cross an hour (the pause path samples without a save). Each day's use
 * is the test's own arithmetic, to the unit. */
static void midnight_sample_split(void)
{
	struct store *st = open_fresh();
	char ws[ID_MAX];
	CHECK(store_workspace_ensure(st, "day-edge", ws) == 0);
	CHECK(store_plan_set(st, ws, "free", NULL, false) == 0);
	const int64_t S = 1000, H = 3600000, D = 24 * H;
	const int64_t dec = 1796083200000LL;	/* 2026-12-01T00:00:00Z */
	struct meter m = { 0 };
	/* 23:59:45 to 23:59:55: all November's. */
	meter_add(&m, dec - 5 * S, 10 * S, 2.0, 512);
	CHECK(meter_save(&m, st, ws, "sbx_midnight") == 0 && m.n == 0);
	/* 23:59:55 to 00:00:05: 7 vCPU-s, 256 MiB. */
	meter_add(&m, dec + 5 * S, 10 * S, 7.0, 256);
	CHECK(m.n == 2 && m.h[0].hour_ms == dec - H && m.h[1].hour_ms == dec);
	CHECK(meter_save(&m, st, ws, "sbx_midnight") == 0 && m.n == 0);
	/* 00:00:05 to 00:00:12.5. */
	meter_add(&m, dec + 12500, 7500, 3.0, 1024);
	CHECK(meter_save(&m, st, ws, "sbx_midnight") == 0);
	/* 00:59:50 to 01:00:10 in two samples saved together. */
	meter_add(&m, dec + H, 10 * S, 1.0, 100);
	meter_add(&m, dec + H + 10 * S, 10 * S, 4.0, 100);
	CHECK(m.n == 2 && meter_save(&m, st, ws, "sbx_midnight") == 0 && m.n == 0);
	/* 23:59:57.25 on the 1st to 00:00:04.75 on the 2nd: 3 vCPU-s, 100 MiB. */
	meter_add(&m, dec + D + 4750, 7500, 3.0, 100);
	CHECK(meter_save(&m, st, ws, "sbx_midnight") == 0);

	CHECK(usage_is("30 Nov", used(st, ws, dec - D, dec), 2000000 + 3500000, 5120 + 1280, 10000 + 5000));
	CHECK(usage_is("1 Dec", used(st, ws, dec, dec + D),
		       3500000 + 3000000 + 1000000 + 4000000 + 1100000, 1280 + 7680 + 2000 + 275, 5000 + 7500 + 20000 + 2750));
	CHECK(usage_is("2 Dec", used(st, ws, dec + D, dec + 2 * D), 1900000, 475, 4750));
	/* The hours: midnight's sample in the last of the 30th and the first
	 * of the 1st; the one across 01:00 in its two hours. */
	CHECK(usage_is("23:00", used(st, ws, dec - H, dec), 2000000 + 3500000, 5120 + 1280, 15000));
	CHECK(usage_is("00:00", used(st, ws, dec, dec + H), 3500000 + 3000000 + 1000000, 1280 + 7680 + 1000, 22500));
	CHECK(usage_is("01:00", used(st, ws, dec + H, dec + 2 * H), 4000000, 1000, 10000));

	/* Each month's bill: its days, priced. */
	struct plans ps;
	plans_init(&ps);
	struct prices p = ps.prices;
	int64_t credit = plans_find(&ps, "free") ? plans_find(&ps, "free")->limits.credit_microdollars : 0;
	struct ops_caller c = { .store = st, .plans = &ps, .workspace = ws };
	struct statement_row s;
	bool open = true;
	struct month_usage nov = { 5500000, 6400, 15000 }, dec_u = { 14500000, 11710, 40000 };
	CHECK(ops_statement(&c, &p, "2026-11", dec + 2 * D, &s, &open) == 0 && !open && bill_is(&s, "2026-11", &nov, &p, credit));
	CHECK(ops_statement(&c, &p, "2026-12", dec + 2 * D, &s, &open) == 0 && open &&
	      bill_is(&s, "2026-12", &dec_u, &p, credit));
	store_close(st);
}

/* Rounding leaves no unit behind and writes none below zero: many small
 * samples across an hour, saved after each, add up to their sum, to the
 * unit. A save the store refuses keeps the hours for the next one, which
 * adds them once. */
static void meter_rounding_carries(void)
{
	char url[1024];
	fresh_url("kiln_meter", url, sizeof url);
	struct store *st = NULL;
	CHECK(store_open(url, &st) == 0);
	if (!st)
		return;
	char ws[ID_MAX];
	CHECK(store_workspace_ensure(st, "meter-round", ws) == 0);
	const int64_t H = 3600000, base = 1796083200000LL + 10 * H;
	struct meter m = { 0 };
	/* 3000 samples of 1.234 s from 10:59:00, a third of a vCPU busy and
	 * 0.7 MiB resident: 11:00 cuts one of them. */
	int64_t end = base + H - 60000;
	double cpu = 0;
	for (int i = 0; i < 3000; i++) {
		end += 1234;
		meter_add(&m, end, 1234, 0.4113333, 0.7);
		cpu += 0.4113333;
		CHECK(meter_save(&m, st, ws, "sbx_round") == 0);
	}
	const int64_t run_ms = 3000 * 1234;
	struct month_usage all = used(st, ws, base, base + 3 * H);
	CHECK(usage_is("3000 samples", all, llround(cpu * 1e6), llround(0.7 * run_ms / 1000), run_ms));
	struct month_usage h10 = used(st, ws, base, base + H);
	CHECK(usage_is("10:00", h10, llround(0.4113333 * 60000 / 1234 * 1e6), 42, 60000));
	/* The store refuses (its table gone a moment): nothing is lost. */
	struct meter m2 = { 0 };
	meter_add(&m2, base + 2 * H + 5000, 10000, 1.0, 10);
	CHECK(raw_script(url, "ALTER TABLE usage_hours RENAME TO usage_hours_away") == 0);
	CHECK(meter_save(&m2, st, ws, "sbx_again") < 0 && m2.n == 2);
	CHECK(raw_script(url, "ALTER TABLE usage_hours_away RENAME TO usage_hours") == 0);
	CHECK(meter_save(&m2, st, ws, "sbx_again") == 0 && m2.n == 0);
	CHECK(meter_save(&m2, st, ws, "sbx_again") == 0);	/* nothing left: nothing added twice */
	CHECK(usage_is("and after the refusal", used(st, ws, base, base + 3 * H), all.cpu_us + 1000000,
		       all.mem_mib_s + 100, all.run_ms + 10000));
	store_close(st);
}

#define CLOSERS 6
static struct store *closers_store;
static char closers_ws[ID_MAX];

static void *closer(void *arg)
{
	struct statement_row s = { .cost = 1000 + (intptr_t)arg, .closed_ms = 1 };
	snprintf(s.workspace, sizeof s.workspace, "%s", closers_ws);
	snprintf(s.month, sizeof s.month, "2026-09");
	snprintf(s.plan, sizeof s.plan, "free");
	struct statement_row back;
	if (store_statement_insert(closers_store, &s, NULL) < 0 ||
	    store_statement_load(closers_store, closers_ws, "2026-09", &back) < 0)
		return (void *)(intptr_t)-1;
	return (void *)(intptr_t)back.cost;
}

static void statements_are_written_once(void)
{
	struct store *st = open_fresh();
	char a[ID_MAX], b[ID_MAX];
	CHECK(store_workspace_ensure(st, "stmt-a", a) == 0 && store_workspace_ensure(st, "stmt-b", b) == 0);
	int64_t first = 0;
	CHECK(store_usage_first_hour(st, a, &first) == -ENOENT);
	struct usage_hour u = { .hour_ms = 1796169600000LL, .cpu_us = 5 };
	snprintf(u.workspace, sizeof u.workspace, "%s", a);
	snprintf(u.sandbox, sizeof u.sandbox, "sbx_first");
	CHECK(store_usage_add(st, &u) == 0);
	u.hour_ms += 7200000;
	CHECK(store_usage_add(st, &u) == 0);
	CHECK(store_usage_first_hour(st, a, &first) == 0 && first == 1796169600000LL);
	CHECK(store_usage_first_hour(st, b, &first) == -ENOENT);

	struct statement_row s = { .cpu_us = 3600000000LL, .mem_mib_s = 3686400, .run_ms = 7200000,
				   .vcpu_hour = 54000, .gib_hour = 16200, .cpu = 54000, .mem = 16200,
				   .cost = 70200, .credit = 5400000, .credit_applied = 70200, .amount_due = 0,
				   .closed_ms = 1796169600123LL };
	snprintf(s.workspace, sizeof s.workspace, "%s", a);
	snprintf(s.month, sizeof s.month, "2026-11");
	snprintf(s.plan, sizeof s.plan, "free");
	bool inserted = false;
	struct statement_row back;
	CHECK(store_statement_load(st, a, "2026-11", &back) == -ENOENT);
	CHECK(store_statement_insert(st, &s, &inserted) == 0 && inserted);
	CHECK(store_statement_load(st, a, "2026-11", &back) == 0);
	CHECK((!strcmp(back.workspace, a) && !strcmp(back.month, "2026-11") &&
	      back.cpu_us == s.cpu_us && back.mem_mib_s == s.mem_mib_s && back.run_ms == s.run_ms &&
	      back.vcpu_hour == 54000 && back.gib_hour == 16200 && back.cpu == 54000 && back.mem == 16200 &&
	      back.cost == 70200 && !strcmp(back.plan, "free") && back.credit == 5400000 &&
	      back.credit_applied == 70200 && back.amount_due == 0 && back.closed_ms == s.closed_ms));
	/* A second close of the month, with other figures, changes nothing. */
	struct statement_row later = s;
	later.cost = 999, later.vcpu_hour = 1, later.closed_ms = s.closed_ms + 1;
	CHECK(store_statement_insert(st, &later, &inserted) == 0 && !inserted);
	CHECK(store_statement_load(st, a, "2026-11", &back) == 0 && back.cost == 70200 && back.vcpu_hour == 54000 &&
	      back.closed_ms == s.closed_ms);
	/* Other months, and another workspace's. */
	snprintf(s.month, sizeof s.month, "2025-12");
	CHECK(store_statement_insert(st, &s, NULL) == 0);
	snprintf(s.month, sizeof s.month, "2026-02");
	CHECK(store_statement_insert(st, &s, NULL) == 0);
	snprintf(s.workspace, sizeof s.workspace, "%s", b);
	snprintf(s.month, sizeof s.month, "2026-10");
	CHECK(store_statement_insert(st, &s, NULL) == 0);
	CHECK(store_statement_load(st, b, "2026-11", &back) == -ENOENT);
	char months[4][8] = { { 0 } };
	CHECK(store_statement_each(st, a, collect_month, months) == 0);
	CHECK(!strcmp(months[0], "2026-11") && !strcmp(months[1], "2026-02") && !strcmp(months[2], "2025-12") &&
	      !months[3][0]);

	/* Closers racing on one month all answer the same row. */
	closers_store = st;
	snprintf(closers_ws, sizeof closers_ws, "%s", a);
	pthread_t t[CLOSERS];
	for (int i = 0; i < CLOSERS; i++)
		pthread_create(&t[i], NULL, closer, (void *)(intptr_t)i);
	intptr_t got[CLOSERS];
	for (int i = 0; i < CLOSERS; i++) {
		void *ret;
		pthread_join(t[i], &ret);
		got[i] = (intptr_t)ret;
	}
	int same = 1;
	for (int i = 0; i < CLOSERS; i++)
		same &= got[i] == got[0];
	CHECK(same && got[0] >= 1000 && got[0] < 1000 + CLOSERS);
	store_close(st);
}

/* A snapshot record of sandbox in workspace ws, not saved yet. */
static void new_snap(struct snap_row *s, const char *ws, const char *sandbox)
{
	memset(s, 0, sizeof *s);
	make_id(s->id, "snap_");
	snprintf(s->workspace, sizeof s->workspace, "%s", ws);
	snprintf(s->sandbox, sizeof s->sandbox, "%s", sandbox);
	snprintf(s->template, sizeof s->template, "base");
	s->vcpus = 1;
	s->memory_mib = 256;
	s->created_ms = wall_ms();
}

static void snapshots_are_per_workspace(void)
{
	struct store *st = open_fresh();
	char a[ID_MAX], b[ID_MAX];
	CHECK(store_workspace_ensure(st, "snap-a", a) == 0 && store_workspace_ensure(st, "snap-b", b) == 0);
	struct snap_row s;
	new_snap(&s, a, "sbx_x");
	s.disks = strdup("{\"top\":\"/d\"}");
	s.stored_bytes = (int64_t)5 << 30;
	CHECK(store_snapshot_save(st, &s) == 0);
	struct snap_row back;
	CHECK(store_snapshot_load(st, s.id, a, &back) == 0 && !strcmp(back.disks, "{\"top\":\"/d\"}"));
	CHECK(back.stored_bytes == (int64_t)5 << 30);
	snap_row_clear(&back);
	CHECK(store_snapshot_load(st, s.id, b, &back) == -ENOENT);	/* another workspace's */
	s.deleted_ms = wall_ms();
	CHECK(store_snapshot_save(st, &s) == 0);
	CHECK(store_snapshot_load(st, s.id, a, &back) == -ENOENT);	/* deleted */
	/* For good: a record read before the delete (a heartbeat's) saved
	 * after it leaves it deleted. */
	s.deleted_ms = 0;
	CHECK(store_snapshot_save(st, &s) == 0);
	CHECK(store_snapshot_load(st, s.id, a, &back) == -ENOENT);
	snap_row_clear(&s);
	/* store_snapshot_delete: only the owner's, only once. */
	new_snap(&s, a, "sbx_y");
	CHECK(store_snapshot_save(st, &s) == 0);
	CHECK(store_snapshot_delete(st, s.id, b) == -ENOENT);	/* not b's */
	CHECK(store_snapshot_delete(st, s.id, a) == 0);
	CHECK(store_snapshot_delete(st, s.id, a) == -ENOENT);	/* once */
	CHECK(store_snapshot_delete(st, "snap_none", NULL) == -ENOENT);
	CHECK(store_snapshot_load(st, s.id, NULL, &back) == -ENOENT);
	store_close(st);
}

/* Volumes: a name is unique among a workspace's live ones (free again
 * once deleted, and another workspace may use it), looked up by id or
 * name only in its workspace, counted with their sizes; attachments are
 * listed by volume and by sandbox and go with their sandbox. */
static int collect_vol(void *ctx, const struct vol_row *r)
{
	char *out = ctx;
	snprintf(out + strlen(out), 80, "%s:%lld ", r->name, (long long)r->size_mib);
	return 0;
}

static int collect_att(void *ctx, const struct vol_att *a)
{
	char *out = ctx;
	size_t len = strlen(out);
	snprintf(out + len, 256 - len, "%s/%d%s%.32s ", a->sandbox, a->slot, a->read_only ? "ro" : "rw",
		 a->path);
	return 0;
}

/* A database's external port (ops/database.h "External access"): one
 * database a port, one port a database, read back with the database,
 * released and taken by another. */
static void database_external_ports(void)
{
	struct store *st = open_fresh();
	char ws[ID_MAX];
	CHECK(store_workspace_ensure(st, "dbx", ws) == 0);
	struct db_row d = { 0 }, e = { 0 }, back;
	make_id(d.id, "db_");
	snprintf(d.workspace, sizeof d.workspace, "%s", ws);
	snprintf(d.name, sizeof d.name, "one");
	d.created_ms = wall_ms();
	CHECK(store_db_insert(st, &d) == 0);
	e = d;
	make_id(e.id, "db_");
	snprintf(e.name, sizeof e.name, "two");
	CHECK(store_db_insert(st, &e) == 0);
	CHECK(store_db_load(st, ws, d.id, false, &back) == 0 && back.external_port == 0);
	CHECK(store_db_set_external(st, d.id, 54320) == 0);
	CHECK(store_db_load(st, ws, "one", true, &back) == 0 && back.external_port == 54320);
	CHECK(store_db_set_external(st, e.id, 54320) == -EEXIST && strstr(errmsg(), "54320"));	/* d's */
	CHECK(store_db_set_external(st, d.id, 54321) == -EEXIST);	/* d has one */
	CHECK(store_db_set_external(st, e.id, 54321) == 0);
	CHECK(store_db_set_external(st, d.id, 0) == 0);
	CHECK(store_db_load(st, ws, d.id, false, &back) == 0 && back.external_port == 0);
	CHECK(store_db_set_external(st, e.id, 0) == 0 && store_db_set_external(st, e.id, 54320) == 0);
	CHECK(store_db_load(st, ws, e.id, false, &back) == 0 && back.external_port == 54320);
	store_db_set_external(st, e.id, 0);
	store_close(st);
}

static void volumes_round_trip(void)
{
	struct store *st = open_fresh();
	char a[ID_MAX], b[ID_MAX];
	CHECK(store_workspace_ensure(st, "vol-a", a) == 0 && store_workspace_ensure(st, "vol-b", b) == 0);
	struct vol_row v = { 0 }, w = { 0 }, back;
	make_id(v.id, "vol_");
	snprintf(v.workspace, sizeof v.workspace, "%s", a);
	snprintf(v.name, sizeof v.name, "data");
	v.size_mib = 64;
	v.created_ms = wall_ms();
	CHECK(store_volume_insert(st, &v) == 0);
	w = v;
	make_id(w.id, "vol_");
	CHECK(store_volume_insert(st, &w) == -EEXIST && strstr(errmsg(), "'data'"));
	snprintf(w.workspace, sizeof w.workspace, "%s", b);	/* another workspace: fine */
	CHECK(store_volume_insert(st, &w) == 0);
	CHECK(store_volume_load(st, a, v.id, false, &back) == 0 && back.size_mib == 64 &&
	      !strcmp(back.name, "data") && !strcmp(back.workspace, a));
	CHECK(store_volume_load(st, a, "data", true, &back) == 0 && !strcmp(back.id, v.id));
	CHECK(store_volume_load(st, b, v.id, false, &back) == -ENOENT);	/* not b's */
	CHECK(store_volume_load(st, NULL, w.id, false, &back) == 0 && !strcmp(back.workspace, b));
	struct vol_row x = v;
	make_id(x.id, "vol_");
	snprintf(x.name, sizeof x.name, "logs");
	x.size_mib = 10;
	x.created_ms = v.created_ms + 1;
	CHECK(store_volume_insert(st, &x) == 0);
	char list[256] = "";
	CHECK(store_volume_each(st, a, collect_vol, list) == 0 && !strcmp(list, "data:64 logs:10 "));
	int64_t n = 0, mib = 0;
	CHECK(store_volume_usage(st, a, &n, &mib) == 0 && n == 2 && mib == 74);

	struct vol_att at = { 0 };
	snprintf(at.volume, sizeof at.volume, "%s", v.id);
	snprintf(at.sandbox, sizeof at.sandbox, "sbx_one");
	at.slot = 1;
	snprintf(at.path, sizeof at.path, "/data");
	at.created_ms = wall_ms();
	CHECK(store_volume_attach(st, &at) == 0);
	snprintf(at.volume, sizeof at.volume, "%s", x.id);
	at.slot = 0;
	at.read_only = true;
	snprintf(at.path, sizeof at.path, "/logs");
	CHECK(store_volume_attach(st, &at) == 0);
	CHECK(store_volume_attach(st, &at) < 0);	/* the slot is taken */
	snprintf(at.sandbox, sizeof at.sandbox, "sbx_two");
	CHECK(store_volume_attach(st, &at) == 0);
	list[0] = 0;
	CHECK(store_volume_attachments(st, NULL, "sbx_one", collect_att, list) == 0 &&
	      !strcmp(list, "sbx_one/0ro/logs sbx_one/1rw/data "));
	list[0] = 0;
	CHECK(store_volume_attachments(st, x.id, NULL, collect_att, list) == 0 &&
	      !strcmp(list, "sbx_one/0ro/logs sbx_two/0ro/logs "));
	CHECK(store_volume_detach_sandbox(st, "sbx_one") == 0);
	list[0] = 0;
	CHECK(store_volume_attachments(st, NULL, "sbx_one", collect_att, list) == 0 && !list[0]);
	CHECK(store_volume_attachments(st, x.id, NULL, collect_att, list) == 0 &&
	      !strcmp(list, "sbx_two/0ro/logs "));

	/* A restart lets go of what ended sandboxes (or ones without a
	 * record) still hold: sbx_two has no record, live's stays. */
	struct sbx_row live = { 0 }, dead = { 0 };
	snprintf(live.id, sizeof live.id, "sbx_live");
	snprintf(dead.id, sizeof dead.id, "sbx_dead");
	snprintf(live.workspace, sizeof live.workspace, "%s", a);
	snprintf(dead.workspace, sizeof dead.workspace, "%s", a);
	live.state = SBX_HIBERNATED;
	dead.state = SBX_DELETED;
	live.created_ms = dead.created_ms = wall_ms();
	CHECK(store_sandbox_save(st, &live) == 0 && store_sandbox_save(st, &dead) == 0);
	snprintf(at.sandbox, sizeof at.sandbox, "sbx_live");
	CHECK(store_volume_attach(st, &at) == 0);
	snprintf(at.sandbox, sizeof at.sandbox, "sbx_dead");
	CHECK(store_volume_attach(st, &at) == 0);
	int64_t freed = 0;
	CHECK(store_volume_detach_ended(st, &freed) == 0 && freed == 2);
	list[0] = 0;
	CHECK(store_volume_attachments(st, x.id, NULL, collect_att, list) == 0 && !strcmp(list, "sbx_live/0ro/logs "));

	CHECK(store_volume_delete(st, b, v.id) == -ENOENT);	/* not b's */
	CHECK(store_volume_delete(st, a, v.id) == 0);
	CHECK(store_volume_delete(st, a, v.id) == -ENOENT);	/* once */
	CHECK(store_volume_load(st, a, "data", true, &back) == -ENOENT);
	make_id(w.id, "vol_");
	snprintf(w.workspace, sizeof w.workspace, "%s", a);
	CHECK(store_volume_insert(st, &w) == 0);	/* the name is free again */
	CHECK(store_volume_usage(st, a, &n, &mib) == 0 && n == 2 && mib == 74);
	store_close(st);
}

/* Exposed ports: saved, re-exposed (only public changes), listed in
 * order, removed one by one and all at once with their sandbox. */
static int collect_port(void *ctx, const struct port_row *r)
{
	char *out = ctx;
	snprintf(out + strlen(out), 64, "%d%s ", r->port, r->public ? "p" : "");
	return 0;
}

static void ports_round_trip(void)
{
	struct store *st = open_fresh();
	struct port_row r = { .port = 8080, .created_ms = 1000 }, back;
	char list[256] = "";
	snprintf(r.sandbox, sizeof r.sandbox, "sbx_ports");
	snprintf(r.workspace, sizeof r.workspace, "ws_a");
	CHECK(store_port_save(st, &r) == 0);
	r.port = 22;
	CHECK(store_port_save(st, &r) == 0);
	r.port = 8080, r.public = true, r.created_ms = 2000;
	CHECK(store_port_save(st, &r) == 0);
	CHECK(store_port_load(st, "sbx_ports", 8080, &back) == 0 && back.public &&
	      back.created_ms == 1000 && !strcmp(back.workspace, "ws_a"));
	CHECK(store_port_load(st, "sbx_ports", 9090, &back) == -ENOENT);
	CHECK(store_port_load(st, "sbx_other", 8080, &back) == -ENOENT);
	CHECK(store_port_each(st, "sbx_ports", collect_port, list) == 0 && !strcmp(list, "22 8080p "));
	CHECK(store_port_delete(st, "sbx_ports", 22) == 0);
	CHECK(store_port_delete(st, "sbx_ports", 22) == -ENOENT);
	CHECK(store_port_delete_all(st, "sbx_ports") == 0);
	list[0] = 0;
	CHECK(store_port_each(st, "sbx_ports", collect_port, list) == 0 && !strcmp(list, ""));
	store_close(st);
}

/* Several threads writing at once through the one store: no lost rows. */
static struct store *shared;
static char shared_ws[ID_MAX];

static void *writer(void *arg)
{
	(void)arg;
	for (int i = 0; i < 50; i++) {
		struct sbx_row r;
		new_sbx(&r, shared_ws);
		r.cpu_seconds = 1;
		if (store_sandbox_save(shared, &r) < 0)
			return (void *)1;
	}
	return NULL;
}

static void concurrent_writes_all_land(void)
{
	shared = open_fresh();
	CHECK(store_workspace_ensure(shared, "threads", shared_ws) == 0);
	pthread_t t[8];
	for (int i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, writer, NULL);
	int bad = 0;
	for (int i = 0; i < 8; i++) {
		void *ret;
		pthread_join(t[i], &ret);
		bad += ret != NULL;
	}
	CHECK(bad == 0);
	struct usage u;
	CHECK(store_usage_sum(shared, shared_ws, &u) == 0 && u.sandboxes == 400 && u.cpu_seconds == 400);
	store_close(shared);
}

static void ids_are_distinct(void)
{
	char a[ID_MAX], b[ID_MAX];
	CHECK(make_id(a, "sbx_") == 0 && make_id(b, "sbx_") == 0 && strcmp(a, b) != 0);
	CHECK(make_id(a, "a_prefix_that_is_far_too_long_for_an_id_") < 0);
}

/* Every parameter type through the driver and back, with the values at
 * the edges: what the store's statements rely on. */
struct typed {
	struct dbv v[8];
	char text[3][256];
	int n;
};

static int row_typed(void *ctx, const struct dbv *c, int n)
{
	struct typed *t = ctx;
	t->n = n;
	for (int i = 0; i < n && i < 8; i++) {
		t->v[i] = c[i];
		if (c[i].type == DBV_TEXT && i < 3)
			snprintf(t->text[i], sizeof t->text[i], "%s", c[i].s);
	}
	return 0;
}

static void params_of_each_type(void)
{
	struct db *db;
	const struct db_driver *d = raw_drv(dbpath);
	CHECK(d->open(raw_target(dbpath), &db) == 0);
	const char *odd = "it's \"quoted\" \\ 100% _x_ ünïcødé ∑ $1";
	struct dbv p[] = { DBV_S(odd), DBV_S(""), DBV_I(INT64_MAX), DBV_I(INT64_MIN), DBV_D(-1.5e300),
			   DBV_S(NULL), DBV_D(0.1) };
	struct typed t = { 0 };
	CHECK(d->exec(db, NULL, "SELECT $1, $2, $3, $4, $5, $6, $7", p, 7, row_typed, &t, NULL) == 0);
	CHECK(t.n == 7);
	CHECK(t.v[0].type == DBV_TEXT && !strcmp(t.text[0], odd));
	CHECK(t.v[1].type == DBV_TEXT && !strcmp(t.text[1], ""));
	CHECK(t.v[2].type == DBV_INT && t.v[2].i == INT64_MAX);
	CHECK(t.v[3].type == DBV_INT && t.v[3].i == INT64_MIN);
	CHECK(t.v[4].type == DBV_REAL && t.v[4].d == -1.5e300);
	CHECK(t.v[5].type == DBV_NULL);
	CHECK(t.v[6].type == DBV_REAL && t.v[6].d == 0.1);
	/* Integers compare with BIGINT columns, text with TEXT ones; a NULL
	 * parameter takes its column's type; LIKE with its escapes and ||
	 * concatenation mean the same on both. */
	CHECK(d->script(db, NULL, "CREATE TABLE t (k TEXT PRIMARY KEY, n BIGINT, x DOUBLE PRECISION)") == 0);
	struct dbv ins[] = { DBV_S("a_1%"), DBV_I(5), DBV_S(NULL) };
	int64_t changes = -1;
	CHECK(d->exec(db, NULL, "INSERT INTO t (k, n, x) VALUES ($1, $2, $3)", ins, 3, NULL, NULL, &changes) == 0 &&
	      changes == 1);
	struct dbv up[] = { DBV_S("a_1%"), DBV_I(7), DBV_D(2.5) };
	CHECK(d->exec(db, NULL, "INSERT INTO t (k, n, x) VALUES ($1, $2, $3) ON CONFLICT (k) DO UPDATE SET "
		      "n = excluded.n + t.n, x = excluded.x", up, 3, NULL, NULL, &changes) == 0 && changes == 1);
	/* Numbered in order of first use (db.h: SQLite binds by that order). */
	struct dbv q[] = { DBV_S("-"), DBV_I(12), DBV_S("a\\_1\\%") };
	memset(&t, 0, sizeof t);
	CHECK(d->exec(db, NULL, "SELECT k || $1 || k, n, x, n >= $2 FROM t WHERE n = $2 AND k LIKE $3 ESCAPE '\\'",
		      q, 3, row_typed, &t, NULL) == 0);
	CHECK(t.n == 4 && !strcmp(t.text[0], "a_1%-a_1%") && t.v[1].type == DBV_INT && t.v[1].i == 12 &&
	      t.v[2].type == DBV_REAL && t.v[2].d == 2.5 && dbv_int(&t.v[3]) == 1);
	struct dbv none[] = { DBV_I(13) };
	t.n = -1;
	CHECK(d->exec(db, NULL, "SELECT k FROM t WHERE n = $1", none, 1, row_typed, &t, NULL) == 0 && t.n == -1);
	CHECK(d->exec(db, NULL, "UPDATE t SET x = NULL WHERE n = $1", none, 1, NULL, NULL, &changes) == 0 &&
	      changes == 0);
	/* Bad SQL and wrong parameter counts are errors, not crashes. */
	CHECK(d->exec(db, NULL, "SELEC nonsense", NULL, 0, NULL, NULL, NULL) == -EIO);
	CHECK(d->exec(db, NULL, "SELECT $1, $2", q, 1, NULL, NULL, NULL) < 0);
	CHECK(d->exec(db, NULL, "SELECT 1", q, -1, NULL, NULL, NULL) < 0);
	CHECK(d->script(db, NULL, "DROP TABLE t") == 0);
	d->close(db);
}

struct plan_walk {
	int n;
	char names[64];
};

static int plandef_name(void *ctx, const char *name, const char *limits, int64_t updated_ms)
{
	struct plan_walk *w = ctx;
	(void)limits, (void)updated_ms;
	w->n++;
	size_t len = strlen(w->names);
	snprintf(w->names + len, sizeof w->names - len, "%s ", name);
	return 0;
}

static void plans_and_creates_round_trip(void)
{
	struct store *st = open_fresh();
	char ws[ID_MAX], plan[NAME_MAX_LEN], *limits = NULL;
	CHECK(store_workspace_ensure(st, "plans", ws) == 0);
	CHECK(store_plan_get(st, ws, plan, &limits) == -ENOENT && !limits);
	CHECK(store_plan_set(st, ws, "pro", NULL, false) == 0);
	CHECK(store_plan_get(st, ws, plan, &limits) == 0 && !strcmp(plan, "pro") && !limits);
	CHECK(store_plan_set(st, ws, "team", "{\"max_running\":3}", false) == 0);
	CHECK(store_plan_get(st, ws, plan, &limits) == 0 && !strcmp(plan, "team") && limits &&
	      !strcmp(limits, "{\"max_running\":3}"));
	free(limits);
	/* The operator's plans, by name, replaced whole by a second set. */
	struct plan_walk pw = { 0, "" };
	CHECK(store_plandef_set(st, "gold", "{\"running\":1}") == 0);
	CHECK(store_plandef_set(st, "free", "{}") == 0);
	CHECK(store_plandef_set(st, "gold", "{\"running\":2}") == 0);
	CHECK(store_plandef_each(st, plandef_name, &pw) == 0 && pw.n == 2 && !strcmp(pw.names, "free gold "));
	int64_t ms = 0;
	CHECK(store_plandef_get(st, "gold", &limits, &ms) == 0 && !strcmp(limits, "{\"running\":2}") && ms > 0);
	free(limits);
	CHECK(store_plandef_get(st, "silver", &limits, &ms) == -ENOENT && !limits);
	/* A plan of the operator's: a workspace is put on it only while it
	 * is there; it is deleted only while no live workspace is on it, and
	 * a deleted workspace's row on it goes with it. */
	char ws2[ID_MAX];
	int64_t in_use = -1;
	CHECK(store_workspace_ensure(st, "plans-two", ws2) == 0);
	CHECK(store_plan_set(st, ws2, "silver", NULL, true) == -ENOENT);
	CHECK(store_plan_get(st, ws2, plan, &limits) == -ENOENT);
	CHECK(store_plan_set(st, ws2, "gold", NULL, true) == 0);
	CHECK(store_plandef_delete(st, "gold", &in_use) == -EBUSY && in_use == 1);
	CHECK(store_plandef_get(st, "gold", &limits, &ms) == 0);
	free(limits);
	CHECK(store_workspace_delete(st, ws2) == 0);
	CHECK(store_plandef_delete(st, "gold", &in_use) == 0 && in_use == 0);
	CHECK(store_plandef_get(st, "gold", &limits, &ms) == -ENOENT && !limits);
	CHECK(store_plan_get(st, ws2, plan, &limits) == -ENOENT);
	CHECK(store_plandef_delete(st, "gold", &in_use) == -ENOENT);
	CHECK(store_plan_set(st, ws2, "gold", NULL, true) == -ENOENT);
	/* Creation times since a moment, oldest first, at most cap. */
	int64_t base = wall_ms() - 100000;
	for (int i = 0; i < 5; i++) {
		struct sbx_row r;
		new_sbx(&r, ws);
		r.created_ms = base + 1000 * (4 - i);
		CHECK(store_sandbox_save(st, &r) == 0);
	}
	int64_t times[8];
	int n = -1;
	CHECK(store_creates_since(st, ws, base + 1000, times, 8, &n) == 0 && n == 4 &&
	      times[0] == base + 1000 && times[3] == base + 4000);
	CHECK(store_creates_since(st, ws, base, times, 2, &n) == 0 && n == 2 && times[1] == base + 1000);
	CHECK(store_creates_since(st, "ws_none", 0, times, 8, &n) == 0 && n == 0);
	store_close(st);
}

/* store_tx: a transaction that fails leaves nothing; one that succeeds
 * leaves all; inside, calls see the transaction's own writes. */
struct tx_ctx {
	const char *sandbox;
	int fail;
	bool saw;
};

static int tx_body(struct store *tx, void *ctx)
{
	struct tx_ctx *c = ctx;
	struct port_row r = { .port = 80, .created_ms = 1 };
	snprintf(r.sandbox, sizeof r.sandbox, "%s", c->sandbox);
	snprintf(r.workspace, sizeof r.workspace, "ws_tx");
	int rc = store_port_save(tx, &r);
	r.port = 81;
	rc = rc ?: store_port_save(tx, &r);
	struct port_row back;
	c->saw = rc == 0 && store_port_load(tx, c->sandbox, 81, &back) == 0;
	if (rc == 0 && c->fail)
		return errf(c->fail, "the test's failure");
	return rc;
}

static int tx_nested(struct store *tx, void *ctx)
{
	/* store_tx inside a transaction joins it: its failure rolls back all. */
	return store_tx(tx, tx_body, ctx);
}

static void transactions_commit_or_leave_nothing(void)
{
	struct store *st = open_fresh();
	struct port_row back;
	struct tx_ctx c = { "sbx_tx_rollback", EIO, false };
	CHECK(store_tx(st, tx_body, &c) == -EIO && c.saw);
	CHECK(store_port_load(st, c.sandbox, 80, &back) == -ENOENT);
	CHECK(store_port_load(st, c.sandbox, 81, &back) == -ENOENT);
	c.saw = false;
	CHECK(store_tx(st, tx_nested, &c) == -EIO && c.saw);
	CHECK(store_port_load(st, c.sandbox, 80, &back) == -ENOENT);
	struct tx_ctx ok = { "sbx_tx_commit", 0, false };
	CHECK(store_tx(st, tx_body, &ok) == 0 && ok.saw);
	CHECK(store_port_load(st, ok.sandbox, 80, &back) == 0 && store_port_load(st, ok.sandbox, 81, &back) == 0);
	CHECK(store_tx_lock(st, "outside") == -EINVAL);	/* only in a transaction */
	store_close(st);
}

/* A workspace moved onto an operator's plan while the plan is deleted, by
 * two stores at once (two replicas: connections of their own), round
 * after round with the start of one shifted by a few microseconds each
 * time: one of them wins, the other is refused (the move: ENOENT, the
 * plan is gone; the delete: EBUSY, the plan is in use), and never does a
 * workspace end on a deleted plan (store_plan_set and
 * store_plandef_delete take the plan's lock in their transaction). */
#define PLAN_RACE_ROUNDS 200
static pthread_barrier_t plan_race_go, plan_race_done;
static char plan_race_ws[ID_MAX];
static int plan_race_rc[2][PLAN_RACE_ROUNDS];

static void *plan_racer(void *arg)
{
	int who = (int)(intptr_t)arg;	/* 0 moves, 1 deletes */
	struct store *st = NULL;
	int rc = store_open(dbpath, &st);
	for (int i = 0; i < PLAN_RACE_ROUNDS; i++) {
		pthread_barrier_wait(&plan_race_go);
		if (rc < 0) {
			plan_race_rc[who][i] = rc;
		} else {
			int shift = (i * 37) % 400 - 200;	/* who starts first, by how much */
			if ((who == 0) == (shift > 0))
				usleep((useconds_t)(shift > 0 ? shift : -shift));
			int64_t in_use = 0;
			plan_race_rc[who][i] = who == 0 ? store_plan_set(st, plan_race_ws, "racy", NULL, true)
							: store_plandef_delete(st, "racy", &in_use);
		}
		pthread_barrier_wait(&plan_race_done);
	}
	store_close(st);
	return NULL;
}

static void plan_move_races_plan_delete(void)
{
	struct store *st = open_fresh();
	CHECK(store_workspace_ensure(st, "plan-race", plan_race_ws) == 0);
	pthread_barrier_init(&plan_race_go, NULL, 3);
	pthread_barrier_init(&plan_race_done, NULL, 3);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, plan_racer, (void *)(intptr_t)i);
	int moved = 0, deleted = 0, bad = 0;
	for (int i = 0; i < PLAN_RACE_ROUNDS; i++) {
		/* The plan there again, the workspace on a server plan. */
		int rc = store_plandef_set(st, "racy", "{\"running\":2}");
		rc = rc ?: store_plan_set(st, plan_race_ws, "pro", NULL, false);
		if (rc < 0)
			printf("  round %d: setting up: %s\n", i, errmsg());
		pthread_barrier_wait(&plan_race_go);
		pthread_barrier_wait(&plan_race_done);
		int mv = plan_race_rc[0][i], del = plan_race_rc[1][i];
		char plan[NAME_MAX_LEN], *limits = NULL, *def = NULL;
		int64_t ms;
		bool on_racy = store_plan_get(st, plan_race_ws, plan, &limits) == 0 && !strcmp(plan, "racy");
		bool plan_there = store_plandef_get(st, "racy", &def, &ms) == 0;
		free(limits);
		free(def);
		bool ok = (mv == 0 && del == -EBUSY && on_racy && plan_there) ||
			  (del == 0 && mv == -ENOENT && !on_racy && !plan_there);
		moved += mv == 0, deleted += del == 0;
		if (!ok && bad++ < 5)
			printf("  round %d: move %d, delete %d, the workspace %s racy, the plan %s\n", i, mv, del,
			       on_racy ? "on" : "not on", plan_there ? "there" : "gone");
		/* The invariant, by the tables: no workspace on a plan that is
		 * in neither the operator's plans nor the server's. */
		char orphans[256];
		CHECK(raw_text(dbpath, "SELECT CAST(COUNT(*) AS TEXT) FROM workspace_plans p "
				       "WHERE p.plan NOT IN ('free', 'pro', 'team', 'enterprise') "
				       "AND NOT EXISTS (SELECT 1 FROM plans d WHERE d.name = p.plan)", orphans) == 0 &&
		      !strcmp(orphans, "0"));
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&plan_race_go);
	pthread_barrier_destroy(&plan_race_done);
	CHECK(bad == 0 && moved + deleted == PLAN_RACE_ROUNDS);
	/* Both orders happened (or the rounds raced nothing). */
	CHECK(moved > 0 && deleted > 0);
	printf("  %d rounds: the move won %d, the delete %d\n", PLAN_RACE_ROUNDS, moved, deleted);
	store_close(st);
}

/* Threads adding ports to one sandbox at once, at most 5 allowed: exactly
 * 5 land (the count and the insert are one transaction under a lock). */
#define ADDERS 8
static struct store *adders_store;
static int added[ADDERS];

static void *adder(void *arg)
{
	int i = (int)(intptr_t)arg;
	struct port_row r = { .port = 1000 + i, .created_ms = wall_ms() };
	snprintf(r.sandbox, sizeof r.sandbox, "sbx_adders");
	snprintf(r.workspace, sizeof r.workspace, "ws_a");
	bool existed = true;
	int rc = store_port_add(adders_store, &r, 5, &existed);
	added[i] = rc == 0 && !existed ? 1 : rc == -ENOSPC ? 0 : -1;
	if (added[i] < 0)
		printf("  adder %d: %d %s\n", i, rc, errmsg());
	return NULL;
}

static int count_ports(void *ctx, const struct port_row *r)
{
	(void)r;
	(*(int *)ctx)++;
	return 0;
}

static void port_limit_holds_under_races(void)
{
	adders_store = open_fresh();
	for (int round = 0; round < 3; round++) {
		CHECK(store_port_delete_all(adders_store, "sbx_adders") == 0);
		pthread_t t[ADDERS];
		for (int i = 0; i < ADDERS; i++)
			pthread_create(&t[i], NULL, adder, (void *)(intptr_t)i);
		int ok = 0, bad = 0, n = 0;
		for (int i = 0; i < ADDERS; i++) {
			pthread_join(t[i], NULL);
			ok += added[i] == 1;
			bad += added[i] < 0;
		}
		CHECK(ok == 5 && bad == 0);
		CHECK(store_port_each(adders_store, "sbx_adders", count_ports, &n) == 0 && n == 5);
	}
	/* One that exists is changed, full or not. */
	struct port_row r = { .port = 0, .public = true };
	int n = 0;
	bool existed = false;
	CHECK(store_port_each(adders_store, "sbx_adders", count_ports, &n) == 0 && n == 5);
	struct port_row first;
	for (int p = 1000; p < 1000 + ADDERS; p++)
		if (store_port_load(adders_store, "sbx_adders", p, &first) == 0)
			break;
	r = first;
	r.public = true;
	CHECK(store_port_add(adders_store, &r, 5, &existed) == 0 && existed);
	CHECK(store_port_load(adders_store, "sbx_adders", r.port, &first) == 0 && first.public);
	store_close(adders_store);
}

/* PostgreSQL: the pool runs calls at once. Four sleeps of 1 s on a pool
 * of four take about 1 s, not 4 (the bound leaves room for a loaded
 * machine: CI runs npm beside the unit phase). */
static struct db *pool_db;

static void *sleeper(void *arg)
{
	(void)arg;
	int rc = db_pg.exec(pool_db, NULL, "SELECT pg_sleep(1)", NULL, 0, NULL, NULL, NULL);
	return rc < 0 ? (void *)1 : NULL;
}

static void pool_runs_calls_at_once(void)
{
	char url[1200];
	snprintf(url, sizeof url, "%s%spool=4", pg_url, strchr(pg_url, '?') ? "&" : "?");
	CHECK(db_pg.open(url, &pool_db) == 0);
	if (!pool_db)
		return;
	double t0 = now_s();
	pthread_t t[4];
	int bad = 0;
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, sleeper, NULL);
	for (int i = 0; i < 4; i++) {
		void *ret;
		pthread_join(t[i], &ret);
		bad += ret != NULL;
	}
	double took = now_s() - t0;
	CHECK(bad == 0 && took < 3.0);
	printf("  4 x pg_sleep(1) on pool=4: %.2f s\n", took);
	db_pg.close(pool_db);
	pool_db = NULL;
}

/* PostgreSQL: the server stops; calls fail with -EAGAIN and "database
 * unavailable" (503 through the API), a transaction too; the server
 * comes back; the same store works again, without reopening. */
static void outage_then_recovery(void)
{
	const char *stop = getenv("KILN_TEST_PG_STOP"), *start = getenv("KILN_TEST_PG_START");
	CHECK(stop && start);	/* tests/unit/pg.sh sets them */
	if (!stop || !start)
		return;
	char url[1200];
	snprintf(url, sizeof url, "%s%spool=3", pg_url, strchr(pg_url, '?') ? "&" : "?");
	struct store *st = NULL;
	CHECK(store_open(url, &st) == 0);
	if (!st)
		return;
	char ws[ID_MAX], again[ID_MAX];
	struct usage u;
	CHECK(store_workspace_ensure(st, "outage", ws) == 0);
	CHECK(system(stop) == 0);
	for (int i = 0; i < 4; i++) {	/* every pooled connection, not only the first */
		int rc = store_usage_sum(st, ws, &u);
		CHECK(rc == -EAGAIN && strstr(errmsg(), "database unavailable"));
		if (i == 0)
			printf("  while stopped: %s\n", errmsg());
		const char *code;
		CHECK(errno_status(rc, &code) == 503);
	}
	struct tx_ctx c = { "sbx_outage", 0, false };
	CHECK(store_tx(st, tx_body, &c) == -EAGAIN);
	CHECK(system(start) == 0);
	CHECK(store_usage_sum(st, ws, &u) == 0);
	CHECK(store_workspace_ensure(st, "outage", again) == 0 && !strcmp(ws, again));
	CHECK(store_tx(st, tx_body, &c) == 0);
	/* A restart while idle: the pooled connections are broken unknown to
	 * libpq; the next calls notice before sending and reconnect. */
	CHECK(system(stop) == 0 && system(start) == 0);
	for (int i = 0; i < 4; i++)
		CHECK(store_usage_sum(st, ws, &u) == 0);
	store_close(st);
}

static int collect_ws(void *ctx, const struct workspace_row *w)
{
	char *names = ctx;
	if (!strncmp(w->name, "adm-", 4))
		strcat(strcat(names, w->name), " ");
	return 0;
}

static int collect_op(void *ctx, const struct operator_row *o)
{
	struct operator_row *want = ctx;
	if (!strcmp(o->id, want->id))
		*want = *o;
	return 0;
}

/* What the operator's API keeps (store_admin.c): workspaces made, found,
 * suspended (the key lookup says so) and deleted (refused while a
 * sandbox is live; then its keys are revoked), made again; and operator
 * credentials looked up by hash and revoked. */
static void workspaces_and_operators(void)
{
	struct store *st = open_fresh();
	char a[ID_MAX], b[ID_MAX], again[ID_MAX], kid[ID_MAX], names[256] = "";
	CHECK(store_workspace_create(st, "adm-a", a) == 0);
	CHECK(store_workspace_create(st, "adm-a", again) == -EEXIST);
	CHECK(store_workspace_ensure(st, "adm-b", b) == 0);
	struct workspace_row w;
	CHECK(store_workspace_find(st, "adm-a", &w) == 0 && !strcmp(w.id, a) && !w.suspended && w.created_ms > 0);
	CHECK(store_workspace_find(st, "adm-none", &w) == -ENOENT);
	CHECK(store_workspace_each(st, collect_ws, names) == 0 && !strcmp(names, "adm-a adm-b "));

	CHECK(store_key_add(st, a, "k", "adm-hash-a", "kiln_adma", KEY_FULL, 0, kid) == 0);
	struct key_auth who;
	CHECK(store_key_lookup(st, "adm-hash-a", &who) == 0 && !who.suspended &&
	      !strcmp(who.workspace_name, "adm-a"));
	/* A port of its sandbox carries the suspension (the proxy's check). */
	struct port_row pr = { .port = 8080, .public = true, .created_ms = 1 }, back;
	snprintf(pr.sandbox, sizeof pr.sandbox, "sbx_adm");
	snprintf(pr.workspace, sizeof pr.workspace, "%s", a);
	CHECK(store_port_save(st, &pr) == 0);
	bool susp = true;
	CHECK(store_workspace_suspended(st, a, &susp) == 0 && !susp);
	CHECK(store_port_load(st, "sbx_adm", 8080, &back) == 0 && !back.suspended);
	CHECK(store_workspace_suspend(st, a, true) == 0);
	CHECK(store_key_lookup(st, "adm-hash-a", &who) == 0 && who.suspended);
	CHECK(store_workspace_find(st, "adm-a", &w) == 0 && w.suspended);
	CHECK(store_workspace_suspended(st, a, &susp) == 0 && susp);
	CHECK(store_workspace_suspended(st, b, &susp) == 0 && !susp);
	CHECK(store_workspace_suspended(st, "ws_none", &susp) == 0 && !susp);
	CHECK(store_port_load(st, "sbx_adm", 8080, &back) == 0 && back.suspended && back.public);
	CHECK(store_workspace_suspend(st, a, false) == 0);
	CHECK(store_key_lookup(st, "adm-hash-a", &who) == 0 && !who.suspended);
	CHECK(store_port_load(st, "sbx_adm", 8080, &back) == 0 && !back.suspended);
	CHECK(store_port_delete(st, "sbx_adm", 8080) == 0);

	struct sbx_row r;
	new_sbx(&r, a);
	CHECK(store_sandbox_save(st, &r) == 0);
	int64_t live = -1;
	CHECK(store_workspace_live(st, a, &live) == 0 && live == 1);
	CHECK(store_workspace_delete(st, a) == -EBUSY && strstr(errmsg(), "1 live sandbox"));
	CHECK(store_key_lookup(st, "adm-hash-a", &who) == 0);	/* refused: nothing changed */
	r.state = SBX_DELETED;
	r.deleted_ms = wall_ms();
	CHECK(store_sandbox_save(st, &r) == 0);
	CHECK(store_workspace_live(st, a, &live) == 0 && live == 0);
	CHECK(store_workspace_delete(st, a) == 0);
	CHECK(store_key_lookup(st, "adm-hash-a", &who) == -ENOENT);
	CHECK(store_workspace_find(st, "adm-a", &w) == -ENOENT);
	CHECK(store_workspace_suspend(st, a, true) == -ENOENT);
	CHECK(store_workspace_delete(st, a) == -ENOENT);
	names[0] = 0;
	CHECK(store_workspace_each(st, collect_ws, names) == 0 && !strcmp(names, "adm-b "));
	/* Made again: the same workspace, live. */
	CHECK(store_workspace_create(st, "adm-a", again) == 0 && !strcmp(again, a));
	CHECK(store_workspace_find(st, "adm-a", &w) == 0 && !w.suspended);

	char oid[ID_MAX];
	struct operator_row o;
	CHECK(store_operator_add(st, "ops", "adm-op-hash", "kilnop_abcdefgh", oid) == 0);
	CHECK(store_operator_lookup(st, "adm-op-hash", &o) == 0 && !strcmp(o.id, oid) &&
	      !strcmp(o.name, "ops") && !strcmp(o.prefix, "kilnop_abcdefgh") && o.revoked_ms == 0);
	CHECK(store_operator_lookup(st, "adm-hash-a", &o) == -ENOENT);	/* keys are not operators */
	CHECK(store_operator_revoke(st, "kilnop_abcdefgh") == 0);
	CHECK(store_operator_lookup(st, "adm-op-hash", &o) == -ENOENT);
	CHECK(store_operator_revoke(st, oid) == -ENOENT);
	struct operator_row listed = { 0 };
	snprintf(listed.id, sizeof listed.id, "%s", oid);
	CHECK(store_operator_each(st, collect_op, &listed) == 0 && listed.revoked_ms > 0);
	store_close(st);
}

/* ---- placement (hostif/placement.h, store/cluster.h store_place) ---------- */

#define TMPL_MINIMAL "[{\"name\":\"minimal\",\"version\":1,\"vcpus\":1,\"memory_mib\":256}]"

static void load_of(struct host_load *h, const char *name, int64_t vcpus, int64_t mem, int64_t used_v,
		    int64_t used_m, const char *templates)
{
	memset(h, 0, sizeof *h);
	snprintf(h->host.name, sizeof h->host.name, "%s", name);
	h->host.vcpus = vcpus, h->host.memory_mib = mem;
	h->host.templates = (char *)templates;
	h->vcpus = used_v, h->memory_mib = used_m;
}

static void placement_rule_spread_pack_room(void)
{
	struct host_load h[3];
	int64_t v = 0, m = 0;
	load_of(&h[0], "a", 2, 1024, 0, 512, TMPL_MINIMAL);	/* 512 free */
	load_of(&h[1], "b", 2, 1024, 0, 0, TMPL_MINIMAL);	/* 1024 free */
	load_of(&h[2], "c", 2, 4096, 0, 0, "[]");		/* no template */
	struct placement_rule spread = { .policy = PLACE_SPREAD, .vcpu_overcommit = 8, .template = "minimal" }, pack = { .policy = PLACE_PACK, .vcpu_overcommit = 8, .template = "minimal" };
	CHECK(placement_choose(&spread, h, 3, &v, &m) == 1 && v == 1 && m == 256);
	CHECK(placement_choose(&pack, h, 3, &v, &m) == 0);
	/* Full by memory: a has 128 free. */
	h[0].memory_mib = 896;
	CHECK(placement_choose(&pack, h, 3, &v, &m) == 1);
	/* Full by vCPUs: b has 2 x 8 placed already. */
	h[1].vcpus = 16;
	CHECK(placement_choose(&spread, h, 3, &v, &m) == -EAGAIN && strstr(errmsg(), "no host has room"));
	struct placement_rule none = { .policy = PLACE_SPREAD, .vcpu_overcommit = 8, .template = "base" };
	CHECK(placement_choose(&none, h, 3, &v, &m) == -ENOENT && strstr(errmsg(), "'base'"));
	/* Ties: the first (the host that joined first). */
	load_of(&h[0], "a", 2, 1024, 0, 0, TMPL_MINIMAL);
	load_of(&h[1], "b", 2, 1024, 0, 0, TMPL_MINIMAL);
	CHECK(placement_choose(&spread, h, 2, &v, &m) == 0 && placement_choose(&pack, h, 2, &v, &m) == 0);
	CHECK(placement_choose(&spread, h, 0, &v, &m) == -ENOENT);
}

/* A template's copy to a host is claimed by one replica: the other is
 * refused while the claim holds; its own claimer may claim again (a new
 * lease); a claim past its lease or a released one is anyone's; each
 * version and host is claimed apart. */
static void template_copy_claims(void)
{
	struct store *st = open_fresh();
	CHECK(store_template_copy_claim(st, "w1_tpl", 2, "h_b", "api_one", 60000) == 1);
	CHECK(store_template_copy_claim(st, "w1_tpl", 2, "h_b", "api_two", 60000) == 0);
	CHECK(store_template_copy_claim(st, "w1_tpl", 2, "h_b", "api_one", 60000) == 1);
	CHECK(store_template_copy_claim(st, "w1_tpl", 2, "h_c", "api_two", 60000) == 1);
	CHECK(store_template_copy_claim(st, "w1_tpl", 3, "h_b", "api_two", 60000) == 1);
	/* Its claimer's new lease, here one already past (-1 ms): anyone's. */
	CHECK(store_template_copy_claim(st, "w1_tpl", 2, "h_b", "api_one", -1) == 1);
	CHECK(store_template_copy_claim(st, "w1_tpl", 2, "h_b", "api_two", 60000) == 1);
	CHECK(store_template_copy_claim(st, "w1_tpl", 2, "h_b", "api_one", 60000) == 0);
	CHECK(store_template_copy_release(st, "w1_tpl", 2, "h_b", "api_one") == 0);	/* not its claim: kept */
	CHECK(store_template_copy_claim(st, "w1_tpl", 2, "h_b", "api_one", 60000) == 0);
	CHECK(store_template_copy_release(st, "w1_tpl", 2, "h_b", "api_two") == 0);
	CHECK(store_template_copy_claim(st, "w1_tpl", 2, "h_b", "api_one", 60000) == 1);
	store_close(st);
}

/* A copy's claim as a replica holds it (tclaim.h): a lease of 1 s,
 * renewed while the copy runs, so another replica is refused after two
 * leases have passed; its claimer dead (the renewing stops, nothing
 * released), another takes it within a lease. Ended with the copy made,
 * it is held keep_ms; with the copy failed, released. */
static void template_copy_claim_renewed(void)
{
	struct store *st = open_fresh();
	struct tclaim c, d;
	CHECK(tclaim_take(&c, st, "w2_tcl", 1, "h_b", "api_one", 1000) == 1);
	CHECK(tclaim_take(&d, st, "w2_tcl", 1, "h_b", "api_two", 1000) == 0);
	usleep(2200 * 1000);
	CHECK(store_template_copy_claim(st, "w2_tcl", 1, "h_b", "api_two", 1000) == 0);
	/* Its replica killed mid-copy: the thread that renewed is gone. */
	periodic_stop(&c.renew);
	CHECK(c.renewals >= 4 && !c.lost);
	CHECK(store_template_copy_claim(st, "w2_tcl", 1, "h_b", "api_two", 60000) == 0);
	usleep(1100 * 1000);
	CHECK(store_template_copy_claim(st, "w2_tcl", 1, "h_b", "api_two", 60000) == 1);
	CHECK(tclaim_take(&c, st, "w2_tcl", 2, "h_b", "api_one", 1000) == 1);
	CHECK(tclaim_end(&c, 60000) == 0);
	CHECK(store_template_copy_claim(st, "w2_tcl", 2, "h_b", "api_two", 1000) == 0);
	CHECK(tclaim_take(&c, st, "w2_tcl", 3, "h_b", "api_one", 60000) == 1);
	CHECK(tclaim_end(&c, 0) == 0);
	CHECK(store_template_copy_claim(st, "w2_tcl", 3, "h_b", "api_two", 1000) == 1);
	store_close(st);
}

/* A workspace's template (copied between hosts): only a host with the
 * newest version listed, and none below min_version (the highest the name
 * had before it was deleted, plus one); another template goes anywhere it
 * is built, whatever its version. */
#define TMPL_W(v) "[{\"name\":\"w0123456789_t\",\"version\":" #v ",\"vcpus\":1,\"memory_mib\":256}]"
static void placement_rule_versions(void)
{
	struct host_load h[3];
	int64_t v = 0, m = 0;
	CHECK(placement_workspace_template("w0123456789_t") && !placement_workspace_template("minimal") &&
	      !placement_workspace_template("w012345678x_t") && !placement_workspace_template("w0123456789_"));
	load_of(&h[0], "a", 2, 1024, 0, 512, TMPL_W(3));	/* the newest, less free */
	load_of(&h[1], "b", 2, 1024, 0, 0, TMPL_W(2));		/* a copy on its way */
	load_of(&h[2], "c", 2, 4096, 0, 0, "[]");
	struct placement_rule any = { .policy = PLACE_SPREAD, .vcpu_overcommit = 8, .template = "w0123456789_t" };
	struct placement_rule newest = { .policy = PLACE_SPREAD, .vcpu_overcommit = 8, .template = "w0123456789_t", .newest = true };
	CHECK(placement_choose(&any, h, 3, &v, &m) == 1);
	CHECK(placement_choose(&newest, h, 3, &v, &m) == 0 && m == 256);
	/* Deleted at v3 and built again: what the hosts have is old. */
	newest.min_version = 4;
	CHECK(placement_choose(&newest, h, 3, &v, &m) == -ENOENT && strstr(errmsg(), "w0123456789_t"));
	/* The new build's v4 on b: b only. */
	load_of(&h[1], "b", 2, 1024, 0, 0, TMPL_W(4));
	CHECK(placement_choose(&newest, h, 3, &v, &m) == 1);
	/* The floor alone, without newest. */
	any.min_version = 3;
	load_of(&h[1], "b", 2, 1024, 0, 0, TMPL_W(2));
	CHECK(placement_choose(&any, h, 3, &v, &m) == 0);
}

/* A new version in service only on a full host, and a host with room
 * that has an older one (or none) yet: -EAGAIN saying the version is
 * being copied there, not that the cluster is full; with no host of
 * room left, the plain "no host has room"; another template's rule
 * (not newest) never waits for a copy. */
static void placement_waits_for_copy(void)
{
	struct host_load h[3];
	int64_t v = 0, m = 0;
	load_of(&h[0], "a", 2, 1024, 0, 1024, TMPL_W(3));	/* v3, full */
	load_of(&h[1], "b", 2, 1024, 0, 0, TMPL_W(2));		/* v2, room */
	load_of(&h[2], "c", 2, 1024, 0, 1024, "[]");		/* nothing, full */
	struct placement_rule newest = { .policy = PLACE_SPREAD, .vcpu_overcommit = 8, .template = "w0123456789_t",
					 .newest = true, .min_version = 3 };
	CHECK(placement_choose(&newest, h, 3, &v, &m) == -EAGAIN &&
	      strstr(errmsg(), "'w0123456789_t' v3 is in service only on hosts that are full; it is being copied"));
	CHECK(placement_copy_pending(&newest, h, 3) == 3);
	/* The host with room has none of it yet: the same. */
	load_of(&h[1], "b", 2, 1024, 0, 0, "[]");
	CHECK(placement_copy_pending(&newest, h, 3) == 3);
	/* It has too little room for the version's 256 MiB: full. */
	load_of(&h[1], "b", 2, 1024, 0, 900, TMPL_W(2));
	CHECK(placement_copy_pending(&newest, h, 3) == 0);
	CHECK(placement_choose(&newest, h, 3, &v, &m) == -EAGAIN && strstr(errmsg(), "no host has room"));
	/* Every host with the newest: full is full. */
	load_of(&h[1], "b", 2, 1024, 0, 1024, TMPL_W(3));
	load_of(&h[2], "c", 2, 1024, 0, 1024, TMPL_W(3));
	CHECK(placement_copy_pending(&newest, h, 3) == 0);
	/* Only versions from before the floor: nothing new to wait for. */
	newest.min_version = 4;
	load_of(&h[2], "c", 2, 1024, 0, 0, "[]");
	CHECK(placement_copy_pending(&newest, h, 3) == 0);
	struct placement_rule any = { .policy = PLACE_SPREAD, .vcpu_overcommit = 8, .template = "w0123456789_t" };
	CHECK(placement_copy_pending(&any, h, 3) == 0);
}

/* The builder of a template: the fewest sandboxes, then the most memory
 * offered, then the first; none: -EAGAIN naming it. */
static void placement_builder_choice(void)
{
	struct host_row h[3];
	memset(h, 0, sizeof h);
	h[0].sandboxes = 2, h[0].memory_mib = 4096;
	h[1].sandboxes = 1, h[1].memory_mib = 512;
	h[2].sandboxes = 1, h[2].memory_mib = 1024;
	CHECK(placement_builder(h, 3) == 2);
	h[2].memory_mib = 512;
	CHECK(placement_builder(h, 3) == 1);
	CHECK(placement_builder(h, 1) == 0);
	CHECK(placement_builder(h, 0) == -EAGAIN && strstr(errmsg(), "no host is up and active to build"));
}

static int choose_spread(void *ctx, const struct host_load *h, int n)
{
	struct placement *p = ctx;
	struct placement_rule r = { .policy = PLACE_SPREAD, .vcpu_overcommit = 8, .template = "minimal" };
	return placement_choose(&r, h, n, &p->vcpus, &p->memory_mib);
}

/* Join host name offering mem MiB and 2 vCPUs, with minimal built. */
static void join_host(struct store *st, const char *name, int64_t mem, char id[ID_MAX])
{
	char cred[64], key[64];
	snprintf(cred, sizeof cred, "cred-%s", name);
	snprintf(key, sizeof key, "kiln_hk_%s", name);
	struct host_join j = { .token_hash = "place-token", .credential_hash = cred, .api_key = key, .name = name,
			       .url = "http://127.0.0.1:1", .version = "t", .templates = TMPL_MINIMAL,
			       .vcpus = 2, .memory_mib = mem };
	CHECK(store_host_join(st, &j, id) == 0);
}

struct placed_count {
	int n;
	char host[ID_MAX];
};

static int count_on(void *ctx, const char *id, const char *ws, const struct host_row *h)
{
	struct placed_count *c = ctx;
	(void)id, (void)ws;
	c->n += !strcmp(h->id, c->host);
	return 0;
}

static int on_host(struct store *st, const char *host)
{
	struct placed_count c = { 0 };
	snprintf(c.host, sizeof c.host, "%s", host);
	CHECK(store_placement_each(st, NULL, "sandbox", count_on, &c) == 0);
	return c.n;
}

/* Place once in workspace ws under caps (NULL: none) and take a sandbox
 * id for it, as a create that succeeded. */
static int place_in(struct store *st, const char *ws, const struct place_caps *caps, struct place_count *count,
		    char host[ID_MAX], char id[ID_MAX])
{
	struct placement p = { ws, "sandbox", 0, 0, .caps = caps, .count = count };
	char res[1][ID_MAX];
	struct host_row h;
	int rc = store_place(st, &p, choose_spread, &p, res, &h);
	if (rc < 0)
		return rc;
	snprintf(host, ID_MAX, "%s", h.id);
	host_row_clear(&h);
	make_id(id, "sbx_");
	return store_placement_rename(st, res[0], id, p.vcpus, p.memory_mib);
}

static int place_one(struct store *st, char host[ID_MAX], char id[ID_MAX])
{
	return place_in(st, "ws_place", NULL, NULL, host, id);
}

static void placement_reserves_in_the_store(void)
{
	char url[1024], a[ID_MAX], b[ID_MAX], c[ID_MAX], d[ID_MAX], host[ID_MAX], id[ID_MAX], first[ID_MAX];
	fresh_url("kiln_place", url, sizeof url);
	struct store *st = NULL;
	CHECK(store_open(url, &st) == 0);
	if (!st)
		return;
	char tok[ID_MAX];
	CHECK(store_join_token_add(st, "place-token", "kjt_place", wall_ms() + 3600000, -1, tok) == 0);
	join_host(st, "a", 1024, a);
	join_host(st, "b", 512, b);
	join_host(st, "c", 4096, c);
	join_host(st, "d", 4096, d);
	CHECK(store_host_set_admin(st, "c", "cordoned") == 0);
	char sql[256];
	snprintf(sql, sizeof sql, "UPDATE hosts SET health = 'down' WHERE id = '%s'", d);
	CHECK(raw_script(url, sql) == 0);
	/* a: 4 x 256, b: 2; c cordoned and d down take none. */
	int placed = 0;
	while (place_one(st, host, id) == 0) {
		if (!placed)
			snprintf(first, sizeof first, "%s", id);
		placed++;
	}
	CHECK(placed == 6 && strstr(errmsg(), "no host has room"));
	CHECK(on_host(st, a) == 4 && on_host(st, b) == 2 && on_host(st, c) == 0 && on_host(st, d) == 0);
	/* An ended sandbox frees its room; a reservation left by an API that
	 * died mid-create holds it until it is stale. */
	/* And its exposed ports go (one-box kilnd's host drops its own). */
	struct port_row pr = { .port = 8080, .public = true, .created_ms = wall_ms() }, got;
	snprintf(pr.sandbox, sizeof pr.sandbox, "%s", first);
	snprintf(pr.workspace, sizeof pr.workspace, "ws_place");
	bool existed = true;
	CHECK(store_port_add(st, &pr, 5, &existed) == 0 && !existed);
	CHECK(store_port_load(st, first, 8080, &got) == 0);
	CHECK(store_placement_end(st, first) == 0 && store_placement_end(st, first) == 0);
	CHECK(store_port_load(st, first, 8080, &got) == -ENOENT);
	snprintf(sql, sizeof sql, "INSERT INTO placements (id, workspace_id, host_id, kind, vcpus, memory_mib, "
				  "created_ms) VALUES ('res_dead', 'ws_place', '%s', 'sandbox', 1, 256, %lld)",
		 a, (long long)wall_ms());
	CHECK(raw_script(url, sql) == 0);
	CHECK(place_one(st, host, id) == -EAGAIN);
	CHECK(raw_script(url, "UPDATE placements SET created_ms = 1 WHERE id = 'res_dead'") == 0);
	CHECK(place_one(st, host, id) == 0 && !strcmp(host, a));
	struct host_row h;
	bool ended = true;
	CHECK(store_placement_host(st, "ws_place", id, &h, &ended) == 0 && !strcmp(h.id, a) && !ended &&
	      !strcmp(h.api_key, "kiln_hk_a"));
	host_row_clear(&h);
	CHECK(store_placement_host(st, "ws_other", id, &h, &ended) == -ENOENT);
	store_close(st);
}

/* API replicas placing at once, each with its own store (connections):
 * together they place exactly what the hosts have room for, never more. */
#define PLACERS 4
static char place_url[1024];
static pthread_barrier_t place_start;

static void *placer(void *arg)
{
	int *made = arg;
	struct store *st = NULL;
	if (store_open(place_url, &st) < 0)
		return (void *)1;
	pthread_barrier_wait(&place_start);
	char host[ID_MAX], id[ID_MAX];
	for (int i = 0; i < 10; i++)
		if (place_one(st, host, id) == 0)
			(*made)++;
	store_close(st);
	return NULL;
}

/* PLACERS threads of fn at once, each its own store (an API replica):
 * how many they placed in all; *bad how many could not open a store. */
static int race(void *(*fn)(void *), int *bad)
{
	pthread_t t[PLACERS];
	int made[PLACERS] = { 0 }, total = 0;
	pthread_barrier_init(&place_start, NULL, PLACERS);
	for (int i = 0; i < PLACERS; i++)
		pthread_create(&t[i], NULL, fn, &made[i]);
	for (int i = 0; i < PLACERS; i++) {
		void *ret;
		pthread_join(t[i], &ret);
		*bad += ret != NULL;
		total += made[i];
	}
	pthread_barrier_destroy(&place_start);
	return total;
}

static void placement_races_never_overplace(void)
{
	char a[ID_MAX], b[ID_MAX], tok[ID_MAX];
	fresh_url("kiln_place_race", place_url, sizeof place_url);
	struct store *st = NULL;
	CHECK(store_open(place_url, &st) == 0);
	if (!st)
		return;
	CHECK(store_join_token_add(st, "place-token", "kjt_place", wall_ms() + 3600000, -1, tok) == 0);
	join_host(st, "a", 2048, a);	/* 8 */
	join_host(st, "b", 1024, b);	/* 4 */
	int bad = 0, total = race(placer, &bad);
	CHECK(bad == 0);
	CHECK(total == 12 && on_host(st, a) == 8 && on_host(st, b) == 4);
	store_close(st);
}

/* Mark sandbox id of workspace ws as in state (its host's record). */
static void record_state(struct store *st, const char *ws, const char *id, enum sbx_state state)
{
	struct sbx_row r = { 0 };
	snprintf(r.id, sizeof r.id, "%s", id);
	snprintf(r.workspace, sizeof r.workspace, "%s", ws);
	snprintf(r.template, sizeof r.template, "minimal");
	r.state = state;
	r.vcpus = 1, r.memory_mib = 256;
	r.created_ms = r.active_ms = wall_ms();
	CHECK(store_sandbox_save(st, &r) == 0);
}

/* A workspace's caps counted over every host (issue 13 on the cluster):
 * its running sandboxes wherever they are, reservations included; a
 * hibernated one holds no slot; the window counts every sandbox placed,
 * ended or not, and not a create that failed. */
static void placement_counts_workspace_caps(void)
{
	char url[1024], a[ID_MAX], b[ID_MAX], tok[ID_MAX], host[ID_MAX], ids[8][ID_MAX];
	fresh_url("kiln_place_caps", url, sizeof url);
	struct store *st = NULL;
	CHECK(store_open(url, &st) == 0);
	if (!st)
		return;
	CHECK(store_join_token_add(st, "place-token", "kjt_place", wall_ms() + 3600000, -1, tok) == 0);
	join_host(st, "a", 8192, a);
	join_host(st, "b", 8192, b);
	char ws[ID_MAX];
	CHECK(store_workspace_ensure(st, "capped", ws) == 0);
	struct place_caps caps = { .running = 3, .creates = 5, .window_ms = 3600000 };
	struct place_count count;
	int on_a = 0;
	for (int i = 0; i < 3; i++) {
		CHECK(place_in(st, ws, &caps, &count, host, ids[i]) == 0);
		on_a += !strcmp(host, a);
	}
	CHECK(on_a > 0 && on_a < 3);	/* spread: both hosts count */
	CHECK(count.creates_used == 3 && count.reset_ms > wall_ms() && !count.limit[0]);
	CHECK(place_in(st, ws, &caps, &count, host, ids[3]) == -EDQUOT);
	CHECK(!strcmp(count.limit, "running") && count.value == 3 && strstr(errmsg(), "its limit is 3"));
	/* Retry-After: soon while some of the three are starting (no record
	 * yet, or creating), a poll interval once all run. */
	CHECK(count.retry_after_ms == RETRY_RUNNING_STARTING_MS);
	record_state(st, ws, ids[0], SBX_RUNNING);
	record_state(st, ws, ids[1], SBX_RUNNING);
	record_state(st, ws, ids[2], SBX_CREATING);
	CHECK(place_in(st, ws, &caps, &count, host, ids[3]) == -EDQUOT &&
	      count.retry_after_ms == RETRY_RUNNING_STARTING_MS);
	record_state(st, ws, ids[2], SBX_RUNNING);
	CHECK(place_in(st, ws, &caps, &count, host, ids[3]) == -EDQUOT &&
	      count.retry_after_ms == RETRY_RUNNING_FULL_MS && count.running == 3);
	/* Another workspace is not held to this one's count. */
	CHECK(place_in(st, "other", &caps, &count, host, ids[7]) == 0 && count.creates_used == 1);
	/* Hibernated on its host: no longer running; running is. */
	record_state(st, ws, ids[0], SBX_HIBERNATED);
	record_state(st, ws, ids[1], SBX_RUNNING);
	CHECK(place_in(st, ws, &caps, &count, host, ids[3]) == 0 && count.creates_used == 4);
	CHECK(place_in(st, ws, &caps, &count, host, ids[4]) == -EDQUOT && !strcmp(count.limit, "running"));
	/* Deleted: its slot is free, its create still counted. */
	CHECK(store_placement_end(st, ids[1]) == 0);
	CHECK(place_in(st, ws, &caps, &count, host, ids[4]) == 0 && count.creates_used == 5);
	CHECK(store_placement_end(st, ids[2]) == 0);
	CHECK(place_in(st, ws, &caps, &count, host, ids[5]) == -EDQUOT && !strcmp(count.limit, "creates"));
	CHECK(count.value == 5 && count.retry_after_ms > 3500000 && count.retry_after_ms <= 3600000);
	CHECK(strstr(errmsg(), "5 sandboxes were made in this workspace in the window"));
	/* A create that failed drops its reservation: no create. */
	CHECK(store_placement_drop(st, ids[4]) == 0);
	CHECK(place_in(st, ws, &caps, &count, host, ids[5]) == 0 && count.creates_used == 5);
	/* The window slides: creates older than it leave it. */
	char sql[256];
	snprintf(sql, sizeof sql, "UPDATE placements SET created_ms = %lld WHERE workspace_id = '%s'",
		 (long long)(wall_ms() - 3600001), ws);
	CHECK(raw_script(url, sql) == 0);
	/* A fork's children: where the parent is, all or none. */
	struct placement f = { ws, "sandbox", 1, 256, .n = 2, .host_id = b, .caps = &caps, .count = &count };
	char res[2][ID_MAX];
	struct host_row none;
	int before = on_host(st, b);
	CHECK(store_place(st, &f, NULL, NULL, res, &none) == -EDQUOT && !strcmp(count.limit, "running"));
	CHECK(!res[0][0] && !none.id[0] && on_host(st, b) == before);
	f.n = 1;
	CHECK(store_place(st, &f, NULL, NULL, res, &none) == 0 && res[0][0] && count.creates_used == 1);
	CHECK(make_id(ids[6], "sbx_") == 0 && store_placement_rename(st, res[0], ids[6], 1, 256) == 0);
	CHECK(on_host(st, b) == before + 1);
	CHECK(place_in(st, ws, &caps, &count, host, ids[7]) == -EDQUOT && !strcmp(count.limit, "running"));
	/* Wakes: a hibernated sandbox held as running while it wakes; two
	 * wakes of it hold one slot; a wake is no create; done, it frees. */
	store_close(st);
	CHECK(store_open(url, &st) == 0);
	char wws[ID_MAX], w1[ID_MAX], w2[ID_MAX], w3[ID_MAX];
	CHECK(store_workspace_ensure(st, "waking", wws) == 0);
	struct place_caps wc = { .running = 2, .creates = 10, .window_ms = 3600000 };
	CHECK(place_in(st, wws, &wc, &count, host, w1) == 0 && place_in(st, wws, &wc, &count, host, w2) == 0);
	record_state(st, wws, w1, SBX_HIBERNATED);
	record_state(st, wws, w2, SBX_HIBERNATED);
	struct placement wk = { wws, "wake", 0, 0, .n = 1, .host_id = a, .caps = &wc, .count = &count, .wake_of = w1 };
	char hold[1][ID_MAX];
	CHECK(store_place(st, &wk, NULL, NULL, hold, &none) == 0 && !strncmp(hold[0], "wake_", 5));
	CHECK(store_place(st, &wk, NULL, NULL, hold, &none) == 0 && count.running == 0);	/* its own: not counted */
	CHECK(place_in(st, wws, &wc, &count, host, w3) == 0 && count.running == 1 && count.creates_used == 3);
	wk.wake_of = w2;
	CHECK(store_place(st, &wk, NULL, NULL, hold, &none) == -EDQUOT && count.running == 2);
	CHECK(store_wake_done(st, w1) == 0);
	CHECK(store_place(st, &wk, NULL, NULL, hold, &none) == 0 && count.running == 1);
	snprintf(sql, sizeof sql, "UPDATE placements SET created_ms = %lld WHERE kind = 'wake'",
		 (long long)(wall_ms() - 3 * 60 * 1000));
	CHECK(raw_script(url, sql) == 0);
	CHECK(place_in(st, wws, &wc, &count, host, ids[7]) == 0 && count.running == 1);	/* stale hold gone */
	store_close(st);
}

/* Two API replicas creating at once in one workspace with a running cap
 * of 5 (issue 13: 20 parallel creates against a limit of 5): exactly 5. */
static void *capped_placer(void *arg)
{
	int *made = arg;
	struct store *st = NULL;
	if (store_open(place_url, &st) < 0)
		return (void *)1;
	pthread_barrier_wait(&place_start);
	struct place_caps caps = { .running = 5 };
	struct place_count count;
	char host[ID_MAX], id[ID_MAX];
	for (int i = 0; i < 5; i++)
		if (place_in(st, "ws_race", &caps, &count, host, id) == 0)
			(*made)++;
	store_close(st);
	return NULL;
}

static void placement_caps_race_exactly(void)
{
	char a[ID_MAX], b[ID_MAX], tok[ID_MAX];
	fresh_url("kiln_place_caps_race", place_url, sizeof place_url);
	struct store *st = NULL;
	CHECK(store_open(place_url, &st) == 0);
	if (!st)
		return;
	CHECK(store_join_token_add(st, "place-token", "kjt_place", wall_ms() + 3600000, -1, tok) == 0);
	join_host(st, "a", 8192, a);
	join_host(st, "b", 8192, b);
	int bad = 0, total = race(capped_placer, &bad);
	CHECK(bad == 0);
	CHECK(total == 5 && on_host(st, a) + on_host(st, b) == 5 && on_host(st, a) >= 2 && on_host(st, b) >= 2);
	store_close(st);
}

int main(void)
{
	int failures = 0;
	snprintf(dir, sizeof dir, "/tmp/kiln-unit-store.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	pg_url = getenv("KILN_TEST_STORE");
	if (pg_url && !*pg_url)
		pg_url = NULL;
	if (pg_url && strncmp(pg_url, "postgres", 8) != 0) {
		printf("FAIL store: KILN_TEST_STORE=%s: want a postgresql:// URL\n", pg_url);
		return 1;
	}
	if (pg_url) {
		char shown[256];
		db_url_redact(pg_url, shown, sizeof shown);
		printf("store tests on %s\n", shown);
		/* A database of the tests' own, made fresh each run. */
		fresh_url("kiln_unit", dbpath, sizeof dbpath);
	} else {
		snprintf(dbpath, sizeof dbpath, "sqlite:%s/kilnd.db", dir);
	}
	RUN(store_creates_schema_and_reopens);
	RUN(store_urls_fail_clearly);
	RUN(keys_are_stored_hashed_and_revocable);
	RUN(key_shapes);
	RUN(key_scope_expiry_use);
	RUN(audit_log);
	RUN(params_of_each_type);
	RUN(sandbox_rows_round_trip);
	RUN(plans_and_creates_round_trip);
	RUN(schema_v1_is_migrated);
	RUN(concurrent_opens_migrate_once);
	RUN(usage_sums_per_workspace);
	RUN(sandbox_states_counted);
	RUN(callbacks_may_use_the_store);
	RUN(usage_hours_add_up);
	RUN(workspaces_and_operators);
	RUN(statements_are_written_once);
	RUN(month_boundary_bill);
	RUN(midnight_sample_split);
	RUN(meter_rounding_carries);
	RUN(template_deletions_round_trip);
	RUN(notices_round_trip);
	RUN(snapshots_are_per_workspace);
	RUN(volumes_round_trip);
	RUN(database_external_ports);
	RUN(ports_round_trip);
	RUN(transactions_commit_or_leave_nothing);
	RUN(port_limit_holds_under_races);
	RUN(plan_move_races_plan_delete);
	RUN(placement_rule_spread_pack_room);
	RUN(template_copy_claims);
	RUN(template_copy_claim_renewed);
	RUN(placement_rule_versions);
	RUN(placement_waits_for_copy);
	RUN(placement_builder_choice);
	RUN(placement_reserves_in_the_store);
	RUN(placement_races_never_overplace);
	RUN(placement_counts_workspace_caps);
	RUN(placement_caps_race_exactly);
	RUN(concurrent_writes_all_land);
	RUN(ids_are_distinct);
	if (pg_url) {
		RUN(pool_runs_calls_at_once);
		RUN(outage_then_recovery);
	} else {
		RUN(bare_path_is_sqlite);
	}
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		failures++;
	return failures ? 1 : 0;
}
