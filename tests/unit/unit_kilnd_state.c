/* Unit tests for a sandbox's lifecycle state (src/store/sbx_state.c): the
 * transition table, legal and illegal moves, names, and that the store
 * keeps the name (the API's word) in its state column. */
#include "store/sbx_state.h"
#include "store/store.h"
#include "common/err.h"
#include "test.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

/* Every legal move, as the lifecycle in sbx_state.h says; any pair not
 * here must be refused. */
static const struct { enum sbx_state from, to; } moves[] = {
	{ SBX_CREATING, SBX_RUNNING },
	{ SBX_CREATING, SBX_DELETED },
	{ SBX_RUNNING, SBX_HIBERNATED },
	{ SBX_RUNNING, SBX_FAILED },
	{ SBX_RUNNING, SBX_DELETING },
	{ SBX_RUNNING, SBX_PAUSED },
	{ SBX_PAUSED, SBX_RUNNING },
	{ SBX_PAUSED, SBX_HIBERNATED },
	{ SBX_PAUSED, SBX_FAILED },
	{ SBX_PAUSED, SBX_DELETING },
	{ SBX_HIBERNATED, SBX_RUNNING },
	{ SBX_HIBERNATED, SBX_FAILED },
	{ SBX_HIBERNATED, SBX_DELETING },
	{ SBX_FAILED, SBX_RUNNING },
	{ SBX_FAILED, SBX_DELETING },
	{ SBX_DELETING, SBX_DELETED },
};

static bool listed(enum sbx_state from, enum sbx_state to)
{
	for (size_t i = 0; i < sizeof moves / sizeof moves[0]; i++)
		if (moves[i].from == from && moves[i].to == to)
			return true;
	return false;
}

static void transition_table_is_exactly_the_lifecycle(void)
{
	int legal = 0;
	for (int f = 0; f < SBX_NSTATES; f++)
		for (int t = 0; t < SBX_NSTATES; t++) {
			bool want = listed(f, t);
			if (sbx_state_legal(f, t) != want) {
				printf("  %s -> %s: legal is %d, want %d\n", sbx_state_name(f),
				       sbx_state_name(t), !want, want);
				CHECK(sbx_state_legal(f, t) == want);
			}
			legal += want;
		}
	CHECK(legal == (int)(sizeof moves / sizeof moves[0]));
	/* Nothing leaves deleted, and nothing stays put. */
	for (int t = 0; t < SBX_NSTATES; t++)
		CHECK(!sbx_state_legal(SBX_DELETED, t));
	for (int s = 0; s < SBX_NSTATES; s++)
		CHECK(!sbx_state_legal(s, s));
	/* Values outside the enum are never legal either way. */
	CHECK(!sbx_state_legal(SBX_NSTATES, SBX_RUNNING));
	CHECK(!sbx_state_legal(SBX_CREATING, SBX_NSTATES));
	CHECK(!sbx_state_legal((enum sbx_state)-1, SBX_RUNNING));
}

static void moves_apply_or_refuse(void)
{
	/* A whole life: create, hibernate, wake, delete. */
	enum sbx_state s = SBX_CREATING;
	CHECK(sbx_state_move(&s, SBX_RUNNING) == 0 && s == SBX_RUNNING);
	CHECK(sbx_state_move(&s, SBX_HIBERNATED) == 0 && s == SBX_HIBERNATED);
	CHECK(sbx_state_move(&s, SBX_RUNNING) == 0 && s == SBX_RUNNING);
	CHECK(sbx_state_move(&s, SBX_DELETING) == 0 && s == SBX_DELETING);
	CHECK(sbx_state_move(&s, SBX_DELETED) == 0 && s == SBX_DELETED);
	/* Refused: the state stays, the message names both ends. */
	CHECK(sbx_state_move(&s, SBX_RUNNING) == -EBUSY && s == SBX_DELETED);
	CHECK(strstr(errmsg(), "deleted") && strstr(errmsg(), "running"));
	s = SBX_CREATING;
	CHECK(sbx_state_move(&s, SBX_HIBERNATED) == -EBUSY && s == SBX_CREATING);
	s = SBX_FAILED;
	CHECK(sbx_state_move(&s, SBX_HIBERNATED) == -EBUSY && s == SBX_FAILED);
	s = SBX_RUNNING;
	CHECK(sbx_state_move(&s, SBX_DELETED) == -EBUSY && s == SBX_RUNNING);	/* via deleting */
	CHECK(sbx_state_move(&s, SBX_CREATING) == -EBUSY && s == SBX_RUNNING);
}

static void names_round_trip(void)
{
	static const char *const want[SBX_NSTATES] = {
		"creating", "running", "hibernated", "failed", "deleting", "deleted", "lost", "paused",
	};
	for (int s = 0; s < SBX_NSTATES; s++) {
		enum sbx_state back = SBX_NSTATES;
		CHECK(strcmp(sbx_state_name(s), want[s]) == 0);
		CHECK(sbx_state_parse(want[s], &back) == 0 && back == (enum sbx_state)s);
	}
	enum sbx_state x = SBX_RUNNING;
	CHECK(sbx_state_parse("zombie", &x) == -EINVAL && x == SBX_RUNNING);
	CHECK(strstr(errmsg(), "zombie") != NULL);
	CHECK(sbx_state_parse("", &x) == -EINVAL && sbx_state_parse(NULL, &x) == -EINVAL);
	CHECK(sbx_state_parse("Running", &x) == -EINVAL);
	CHECK(strcmp(sbx_state_name(SBX_NSTATES), "invalid") == 0);
}

static char *column(const char *path, const char *id)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	char *v = NULL;
	if (sqlite3_open(path, &db) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT state FROM sandboxes WHERE id = ?", -1, &q, NULL) == SQLITE_OK &&
	    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
		v = strdup((const char *)sqlite3_column_text(q, 0));
	sqlite3_finalize(q);
	sqlite3_close(db);
	return v;
}

static void store_keeps_the_name(void)
{
	char path[128];
	snprintf(path, sizeof path, "%s/kilnd.db", dir);
	struct store *st = NULL;
	CHECK(store_open(path, &st) == 0);
	if (!st)
		return;
	char ws[ID_MAX];
	CHECK(store_workspace_ensure(st, "states", ws) == 0);
	struct sbx_row r = { 0 };
	CHECK(make_id(r.id, "sbx_") == 0);
	snprintf(r.workspace, sizeof r.workspace, "%s", ws);
	snprintf(r.template, sizeof r.template, "minimal");
	r.state = SBX_HIBERNATED;
	CHECK(store_sandbox_save(st, &r) == 0);
	char *v = column(path, r.id);
	CHECK(v && strcmp(v, "hibernated") == 0);
	free(v);
	struct sbx_row back;
	CHECK(store_sandbox_load(st, r.id, &back) == 0 && back.state == SBX_HIBERNATED);
	sbx_row_clear(&back);
	/* A state this kilnd does not know is an error naming it, not a guess. */
	sqlite3 *db = NULL;
	char sql[160];
	snprintf(sql, sizeof sql, "UPDATE sandboxes SET state = 'zombie' WHERE id = '%s'", r.id);
	CHECK(sqlite3_open(path, &db) == SQLITE_OK && sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	CHECK(store_sandbox_load(st, r.id, &back) == -EIO);
	CHECK(strstr(errmsg(), "zombie") && strstr(errmsg(), r.id));
	store_close(st);
}

int main(void)
{
	int failures = 0;
	snprintf(dir, sizeof dir, "/tmp/kiln-unit-state.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	RUN(transition_table_is_exactly_the_lifecycle);
	RUN(moves_apply_or_refuse);
	RUN(names_round_trip);
	RUN(store_keeps_the_name);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		failures++;
	return failures ? 1 : 0;
}
