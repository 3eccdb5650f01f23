/*
 * db_sqlite: the SQLite driver of the store (the single-box default).
 *
 * The database runs in WAL mode with synchronous=NORMAL: a commit is in the
 * WAL before it returns, so a kilnd killed with SIGKILL loses nothing it
 * acknowledged (only a power cut can drop the last commits, which WAL then
 * rolls back cleanly). Readers never block the writer. A busy timeout lets
 * `kilnd keys create` run while the daemon holds the database.
 */
#include "store/db.h"
#include "common/err.h"

#include <errno.h>
#include <sqlite3.h>
#include <unistd.h>
#include <stdlib.h>

struct db {
	sqlite3 *h;
};

static int sqlite_fail(sqlite3 *h, const char *what)
{
	return errf(EIO, "sqlite: %s: %s", what, sqlite3_errmsg(h));
}

static int db_sqlite_open(const char *target, struct db **out)
{
	struct db *db = calloc(1, sizeof *db);
	if (!db)
		return errf(ENOMEM, "sqlite: out of memory");
	int rc = sqlite3_open_v2(target, &db->h,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
	if (rc != SQLITE_OK) {
		int e = db->h ? errf(EIO, "sqlite: open %s: %s", target, sqlite3_errmsg(db->h))
			      : errf(ENOMEM, "sqlite: open %s: out of memory", target);
		sqlite3_close(db->h);
		free(db);
		return e;
	}
	sqlite3_busy_timeout(db->h, 5000);
	char *msg = NULL;
	/* Turning a new database to WAL takes its exclusive lock, and SQLite
	 * answers BUSY at once, without the busy timeout, where waiting could
	 * deadlock (several openers of a new database at once: kilnd and a
	 * `kilnd keys create`, or a migration under way). So wait here, up to
	 * the same 5 s, in 10 ms steps. */
	rc = SQLITE_BUSY;
	for (int i = 0; i < 500 && (rc == SQLITE_BUSY || rc == SQLITE_LOCKED); i++) {
		if (i) {
			sqlite3_free(msg);
			msg = NULL;
			usleep(10000);
		}
		rc = sqlite3_exec(db->h, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
				  NULL, NULL, &msg);
	}
	if (rc != SQLITE_OK) {
		int e = errf(EIO, "sqlite: %s: setting WAL mode: %s", target, msg ? msg : "?");
		sqlite3_free(msg);
		sqlite3_close(db->h);
		free(db);
		return e;
	}
	*out = db;
	return 0;
}

static void db_sqlite_close(struct db *db)
{
	if (!db)
		return;
	sqlite3_close(db->h);
	free(db);
}

static int bind_all(sqlite3 *h, sqlite3_stmt *st, const struct dbv *p, int n)
{
	if (sqlite3_bind_parameter_count(st) != n)
		return errf(EINVAL, "sqlite: statement wants %d parameters, got %d",
			    sqlite3_bind_parameter_count(st), n);
	for (int i = 0; i < n; i++) {
		int rc;
		switch (p[i].type) {
		case DBV_INT: rc = sqlite3_bind_int64(st, i + 1, p[i].i); break;
		case DBV_REAL: rc = sqlite3_bind_double(st, i + 1, p[i].d); break;
		case DBV_TEXT: rc = sqlite3_bind_text(st, i + 1, p[i].s, -1, SQLITE_TRANSIENT); break;
		default: rc = sqlite3_bind_null(st, i + 1); break;
		}
		if (rc != SQLITE_OK)
			return sqlite_fail(h, "bind");
	}
	return 0;
}

#define MAX_COLS 64

static int db_sqlite_exec(struct db *db, struct db_tx *tx, const char *sql, const struct dbv *params,
			  int nparams, db_row_fn *fn, void *ctx, int64_t *changes)
{
	(void)tx;	/* one connection: a transaction is simply open on it */
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK)
		return sqlite_fail(db->h, "prepare");
	int rc = bind_all(db->h, st, params, nparams);
	while (rc == 0) {
		int s = sqlite3_step(st);
		if (s == SQLITE_DONE)
			break;
		if (s != SQLITE_ROW) {
			rc = sqlite_fail(db->h, "step");
			break;
		}
		if (!fn)
			continue;
		struct dbv cols[MAX_COLS];
		int n = sqlite3_column_count(st);
		if (n > MAX_COLS)
			n = MAX_COLS;
		for (int i = 0; i < n; i++) {
			switch (sqlite3_column_type(st, i)) {
			case SQLITE_INTEGER: cols[i] = DBV_I(sqlite3_column_int64(st, i)); break;
			case SQLITE_FLOAT: cols[i] = DBV_D(sqlite3_column_double(st, i)); break;
			case SQLITE_NULL: cols[i] = (struct dbv){ .type = DBV_NULL }; break;
			default:
				cols[i] = (struct dbv){ .type = DBV_TEXT,
							.s = (const char *)sqlite3_column_text(st, i) };
				if (!cols[i].s)
					cols[i].type = DBV_NULL;
				break;
			}
		}
		rc = fn(ctx, cols, n);
	}
	if (rc == 0 && changes)
		*changes = sqlite3_changes(db->h);
	sqlite3_finalize(st);
	return rc;
}

static int db_sqlite_script(struct db *db, struct db_tx *tx, const char *sql)
{
	(void)tx;
	char *msg = NULL;
	if (sqlite3_exec(db->h, sql, NULL, NULL, &msg) != SQLITE_OK) {
		int e = errf(EIO, "sqlite: %s", msg ? msg : sqlite3_errmsg(db->h));
		sqlite3_free(msg);
		return e;
	}
	return 0;
}

/* A transaction is the connection itself: the store holds its lock from
 * begin to end, so no other statement runs in between. IMMEDIATE takes
 * the write lock at once (waiting out another process, such as a
 * `kilnd keys` command, for the busy timeout), so two transactions never
 * both read and then fail to upgrade to write. */
static int db_sqlite_begin(struct db *db, struct db_tx **tx)
{
	int rc = db_sqlite_script(db, NULL, "BEGIN IMMEDIATE");
	if (rc == 0)
		*tx = (struct db_tx *)db;
	return rc;
}

static int db_sqlite_end(struct db *db, struct db_tx *tx, bool commit)
{
	(void)tx;
	int rc = db_sqlite_script(db, NULL, commit ? "COMMIT" : "ROLLBACK");
	/* A failed COMMIT (SQLITE_BUSY) leaves the transaction open. */
	if (rc < 0 && sqlite3_get_autocommit(db->h) == 0)
		sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

static int db_sqlite_lock(struct db *db, struct db_tx *tx, int64_t key)
{
	(void)db, (void)tx, (void)key;
	return 0;
}

const struct db_driver db_sqlite = {
	.name = "sqlite",
	.serialized = true,
	.open = db_sqlite_open,
	.close = db_sqlite_close,
	.exec = db_sqlite_exec,
	.script = db_sqlite_script,
	.begin = db_sqlite_begin,
	.end = db_sqlite_end,
	.lock = db_sqlite_lock,
};
