/* Unit tests for kilnd's store (src/store/store.c over the SQLite driver),
 * on a real database file in a temporary directory. */
#include "store/store.h"
#include "store/db.h"
#include "api/keys.h"
#include "common/err.h"
#include "test.h"

#include <errno.h>
#include <sqlite3.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64], dbpath[128];

static struct store *open_fresh(void)
{
	struct store *st = NULL;
	CHECK(store_open(dbpath, &st) == 0);
	return st;
}

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
	CHECK(store_open("postgres://x", &st) == -ENOTSUP);
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
	CHECK(store_key_add(st, ws, "ci", hash, shown, kid) == 0);
	char found[ID_MAX] = "";
	CHECK(store_key_lookup(st, hash, found) == 0 && strcmp(found, ws) == 0);
	/* The key itself is nowhere in the database file. */
	FILE *f = fopen(dbpath, "rb");
	char *blob = calloc(1, 1 << 22);
	size_t n = f ? fread(blob, 1, (1 << 22) - 1, f) : 0;
	if (f)
		fclose(f);
	CHECK(n > 0 && !memmem(blob, n, key, strlen(key)));
	free(blob);
	char other[KEY_HASH_LEN];
	key_hash("kiln_nope", 9, other);
	CHECK(store_key_lookup(st, other, found) == -ENOENT);
	CHECK(store_key_revoke(st, kid) == 0);
	CHECK(store_key_lookup(st, hash, found) == -ENOENT);
	CHECK(store_key_revoke(st, kid) == -ENOENT);
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
	CHECK(store_sandbox_save(st, &r) == 0);
	struct sbx_row back;
	CHECK(store_sandbox_load(st, r.id, &back) == 0);
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
	sbx_row_clear(&r);
	store_close(st);
}

static int count_live(void *ctx, struct sbx_row *r)
{
	(*(int *)ctx)++;
	sbx_row_clear(r);
	return 0;
}

/* A database of schema version 1 (no network columns) gains them. */
static void schema_v1_is_migrated(void)
{
	char path[128];
	snprintf(path, sizeof path, "%s/v1.db", dir);
	static const char v1[] = "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); "
		 "INSERT INTO meta VALUES ('schema_version', '1'); "
		 "CREATE TABLE sandboxes (id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, template TEXT NOT NULL, "
		 "state TEXT NOT NULL, parent_id TEXT, snapshot_id TEXT, vcpus BIGINT NOT NULL, "
		 "memory_mib BIGINT NOT NULL, ttl_seconds BIGINT NOT NULL, metadata TEXT, env TEXT, disks TEXT, "
		 "created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL, deleted_ms BIGINT, active_ms BIGINT NOT NULL, "
		 "ready_ms DOUBLE PRECISION, vmm_pid BIGINT, vmm_start BIGINT, cpu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0, "
		 "cpu_base DOUBLE PRECISION NOT NULL DEFAULT 0, mem_mib_seconds DOUBLE PRECISION NOT NULL DEFAULT 0, "
		 "running_seconds DOUBLE PRECISION NOT NULL DEFAULT 0, rss_bytes BIGINT NOT NULL DEFAULT 0, error TEXT); "
		 "INSERT INTO sandboxes (id, workspace_id, template, state, vcpus, memory_mib, ttl_seconds, created_ms, "
		 "updated_ms, active_ms) VALUES ('sbx_old', 'ws_x', 'base', 'running', 1, 256, 0, 1, 1, 1);";
	sqlite3 *db = NULL;
	CHECK(sqlite3_open(path, &db) == SQLITE_OK && sqlite3_exec(db, v1, NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	struct store *st = NULL;
	CHECK(store_open(path, &st) == 0);
	struct sbx_row r;
	CHECK(st && store_sandbox_load(st, "sbx_old", &r) == 0);
	CHECK(r.net_slot == 0 && r.net_policy == NULL);
	r.net_slot = 3;
	CHECK(store_sandbox_save(st, &r) == 0);
	sbx_row_clear(&r);
	store_close(st);
	CHECK(store_open(path, &st) == 0);	/* once migrated, opened as version 3 */
	CHECK(st && store_sandbox_load(st, "sbx_old", &r) == 0 && r.net_slot == 3);
	/* Version 3: why a sandbox ended is kept with its record. */
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
	store_close(st);
	sqlite3 *check = NULL;
	char *version = NULL;
	CHECK(sqlite3_open(path, &check) == SQLITE_OK);
	sqlite3_stmt *q = NULL;
	if (sqlite3_prepare_v2(check, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &q, NULL) ==
	    SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
		version = strdup((const char *)sqlite3_column_text(q, 0));
	sqlite3_finalize(q);
	sqlite3_close(check);
	CHECK(version && !strcmp(version, "4"));
	free(version);
}

static void usage_sums_per_workspace(void)
{
	struct store *st = open_fresh();
	char a[ID_MAX], b[ID_MAX];
	CHECK(store_workspace_ensure(st, "usage-a", a) == 0 && store_workspace_ensure(st, "usage-b", b) == 0);
	for (int i = 0; i < 3; i++) {
		struct sbx_row r = { 0 };
		make_id(r.id, "sbx_");
		snprintf(r.workspace, sizeof r.workspace, "%s", i < 2 ? a : b);
		snprintf(r.template, sizeof r.template, "minimal");
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

static void snapshots_are_per_workspace(void)
{
	struct store *st = open_fresh();
	char a[ID_MAX], b[ID_MAX];
	CHECK(store_workspace_ensure(st, "snap-a", a) == 0 && store_workspace_ensure(st, "snap-b", b) == 0);
	struct snap_row s = { 0 };
	make_id(s.id, "snap_");
	snprintf(s.workspace, sizeof s.workspace, "%s", a);
	snprintf(s.sandbox, sizeof s.sandbox, "sbx_x");
	snprintf(s.template, sizeof s.template, "base");
	s.vcpus = 1;
	s.memory_mib = 256;
	s.created_ms = wall_ms();
	s.disks = strdup("{\"top\":\"/d\"}");
	CHECK(store_snapshot_save(st, &s) == 0);
	struct snap_row back;
	CHECK(store_snapshot_load(st, s.id, a, &back) == 0 && !strcmp(back.disks, "{\"top\":\"/d\"}"));
	snap_row_clear(&back);
	CHECK(store_snapshot_load(st, s.id, b, &back) == -ENOENT);	/* another workspace's */
	s.deleted_ms = wall_ms();
	CHECK(store_snapshot_save(st, &s) == 0);
	CHECK(store_snapshot_load(st, s.id, a, &back) == -ENOENT);	/* deleted */
	snap_row_clear(&s);
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
		struct sbx_row r = { 0 };
		make_id(r.id, "sbx_");
		snprintf(r.workspace, sizeof r.workspace, "%s", shared_ws);
		snprintf(r.template, sizeof r.template, "minimal");
		r.state = SBX_RUNNING;
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

int main(void)
{
	int failures = 0;
	snprintf(dir, sizeof dir, "/tmp/kiln-unit-store.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(dbpath, sizeof dbpath, "sqlite:%s/kilnd.db", dir);
	RUN(store_creates_schema_and_reopens);
	snprintf(dbpath, sizeof dbpath, "%s/kilnd.db", dir);	/* a bare path works too */
	RUN(keys_are_stored_hashed_and_revocable);
	RUN(key_shapes);
	RUN(sandbox_rows_round_trip);
	RUN(schema_v1_is_migrated);
	RUN(usage_sums_per_workspace);
	RUN(snapshots_are_per_workspace);
	RUN(ports_round_trip);
	RUN(concurrent_writes_all_land);
	RUN(ids_are_distinct);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		failures++;
	return failures ? 1 : 0;
}
