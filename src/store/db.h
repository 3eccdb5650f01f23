/*
 * db: the small driver interface under kilnd's store. A driver runs one
 * SQL statement with typed parameters and hands result rows to a callback;
 * that is all the store needs, so SQLite (one box) and PostgreSQL (several
 * hosts) can serve the same statements.
 *
 * The statements are written to run unchanged on both: parameters are
 * `$1, $2, ...` numbered in order of first use (SQLite takes `$1` as a named
 * parameter and binds it by that order), upserts are `INSERT ... ON CONFLICT
 * (key) DO UPDATE SET col = excluded.col`, and types are TEXT, BIGINT and
 * DOUBLE PRECISION. The schema lives in schema.c. Integers compared with
 * BIGINT columns go as BIGINT (PostgreSQL does not compare int8 with text),
 * text concatenation is ||, and booleans are BIGINT 0/1.
 */
#ifndef KILN_STORE_DB_H
#define KILN_STORE_DB_H

#include <stdbool.h>
#include <stdint.h>

enum dbv_type { DBV_NULL, DBV_INT, DBV_REAL, DBV_TEXT };

/* A parameter or a result column. Text is NUL-terminated; in a result row
 * it is valid only during the row callback. */
struct dbv {
	enum dbv_type type;
	int64_t i;
	double d;
	const char *s;
};

#define DBV_I(x) ((struct dbv){ .type = DBV_INT, .i = (x) })
#define DBV_D(x) ((struct dbv){ .type = DBV_REAL, .d = (x) })
/* Text, or NULL for a NULL string. */
static inline struct dbv dbv_s(const char *s)
{
	return (struct dbv){ .type = s ? DBV_TEXT : DBV_NULL, .s = s };
}
#define DBV_S(x) dbv_s(x)

/* Called once per result row; a non-zero return stops the query and is
 * returned by db_exec. */
typedef int db_row_fn(void *ctx, const struct dbv *cols, int ncols);

struct db;
/* A transaction: the one connection it is pinned to (db_pg) or the
 * database itself (db_sqlite, under the store's lock). */
struct db_tx;

struct db_driver {
	const char *name;
	/* One connection that must not be used by two threads at once: the
	 * store serializes every call (and holds the lock through a
	 * transaction). A driver with its own pool leaves this false and is
	 * called from many threads at once. */
	bool serialized;
	/* Open the database named by target (a file for SQLite, a libpq URI
	 * for PostgreSQL). Fails if the database cannot be reached now. */
	int (*open)(const char *target, struct db **out);
	void (*close)(struct db *db);
	/* Run one statement, in tx (or, tx NULL, on its own). Rows, if any, go
	 * to fn (may be NULL). Returns 0, fn's non-zero value, or -errno with
	 * errmsg() set: -EAGAIN ("database unavailable: ...") when the server
	 * cannot be reached; the next call tries to reconnect. *changes (may
	 * be NULL) gets the number of rows an INSERT/UPDATE/DELETE touched. */
	int (*exec)(struct db *db, struct db_tx *tx, const char *sql, const struct dbv *params,
		    int nparams, db_row_fn *fn, void *ctx, int64_t *changes);
	/* Run a script of several statements without parameters (schema,
	 * migrations), in tx or on its own. */
	int (*script)(struct db *db, struct db_tx *tx, const char *sql);
	/* Start a transaction: its statements see one another and commit or
	 * roll back together. begin takes a write lock where the database
	 * has one (SQLite: BEGIN IMMEDIATE); end commits if commit is true,
	 * else rolls back, and frees tx either way. */
	int (*begin)(struct db *db, struct db_tx **tx);
	int (*end)(struct db *db, struct db_tx *tx, bool commit);
	/* Serialize with every other transaction that takes the same key,
	 * until tx ends (PostgreSQL: pg_advisory_xact_lock; SQLite: nothing
	 * to do, its transactions are serialized already). */
	int (*lock)(struct db *db, struct db_tx *tx, int64_t key);
};

extern const struct db_driver db_sqlite;
extern const struct db_driver db_pg;

/* Column helpers for row callbacks: NULL reads as 0 / 0.0 / "". */
int64_t dbv_int(const struct dbv *v);
double dbv_real(const struct dbv *v);
const char *dbv_text(const struct dbv *v);

#endif
