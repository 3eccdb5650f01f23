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
 * DOUBLE PRECISION. The schema lives in schema.c.
 */
#ifndef KILN_STORE_DB_H
#define KILN_STORE_DB_H

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

struct db_driver {
	const char *name;
	/* Open the database named by target (a file for SQLite, a conninfo
	 * string for PostgreSQL). */
	int (*open)(const char *target, struct db **out);
	void (*close)(struct db *db);
	/* Run one statement. Rows, if any, go to fn (may be NULL). Returns 0,
	 * fn's non-zero value, or -errno with errmsg() set. *changes (may be
	 * NULL) gets the number of rows an INSERT/UPDATE/DELETE touched. */
	int (*exec)(struct db *db, const char *sql, const struct dbv *params, int nparams,
		    db_row_fn *fn, void *ctx, int64_t *changes);
	/* Run a script of several statements without parameters (schema). */
	int (*script)(struct db *db, const char *sql);
};

extern const struct db_driver db_sqlite;

/* Column helpers for row callbacks: NULL reads as 0 / 0.0 / "". */
int64_t dbv_int(const struct dbv *v);
double dbv_real(const struct dbv *v);
const char *dbv_text(const struct dbv *v);

#endif
