/*
 * db_pg: the PostgreSQL driver of the store (several kilnd replicas, one
 * database), through libpq.
 *
 * A pool of connections (pool=N in the URL's query, default 4, at most 64;
 * db_url.h) lets store calls from many threads run at once; a caller waits
 * at most POOL_WAIT_S for a free one. Connections open as they are first
 * needed; the first opens in db_pg_open, so a database that cannot be
 * reached fails kilnd's start with libpq's reason.
 *
 * The database going away: a statement on a broken connection fails with
 * -EAGAIN and "database unavailable: <libpq's message>" (the API answers
 * 503). Such a statement is not sent again (it may have committed before
 * the connection broke). Before each use an idle connection is checked
 * without a round trip (has the server closed it or said why it would?),
 * and a broken one is reset, so the first call after the server returns
 * succeeds and kilnd recovers without a restart. Connection attempts are
 * bounded by connect_timeout (5 s unless the URL says otherwise) and TCP
 * keepalives notice a peer that vanished.
 *
 * Parameters go as text with their types: BIGINT (int8) and DOUBLE
 * PRECISION (float8) for numbers, so that comparisons with BIGINT columns
 * type-check; text and NULL with no type, for the server to infer from the
 * column. Result columns: int2/int4/int8 read as DBV_INT, float4/float8/
 * numeric (SUM of a BIGINT) as DBV_REAL, NULL as DBV_NULL, bool as 0/1,
 * the rest as text.
 */
#include "store/db.h"
#include "store/db_url.h"
#include "common/err.h"
#include "common/log.h"

#include <errno.h>
#include <libpq-fe.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL_WAIT_S 30
#define PARAMS_MAX 64
#define COLS_MAX 64

/* Type OIDs (src/include/catalog/pg_type.dat): stable across versions. */
enum { OID_BOOL = 16, OID_INT8 = 20, OID_INT2 = 21, OID_INT4 = 23, OID_FLOAT4 = 700,
       OID_FLOAT8 = 701, OID_NUMERIC = 1700 };

struct slot {
	PGconn *c;	/* NULL until first needed */
	bool busy;	/* lent to a call or a transaction */
};

struct db {
	pthread_mutex_t lock;
	pthread_cond_t freed;
	char *conninfo;	/* the URL without pool= */
	int n;
	struct slot slot[DB_POOL_MAX];
};

struct db_tx {
	struct slot *s;
};

/* libpq's message on one line, without the trailing newline, its tabs and
 * newlines as spaces, and no password in it. */
static void one_line(const struct db *db, const char *msg, char *out, size_t cap)
{
	snprintf(out, cap, "%s", msg && msg[0] ? msg : "no message from libpq");
	char *w = out;
	for (const char *p = out; *p; p++) {
		char ch = *p == '\n' || *p == '\t' || *p == '\r' ? ' ' : *p;
		if (ch != ' ' || (w > out && w[-1] != ' '))
			*w++ = ch;
	}
	*w = 0;
	size_t n = strlen(out);
	while (n > 0 && out[n - 1] == ' ')
		out[--n] = 0;
	if (db)
		db_url_scrub(db->conninfo, out, cap);
}

static int unavailable(const struct db *db, const char *msg)
{
	char m[400];
	one_line(db, msg, m, sizeof m);
	return errf(EAGAIN, "database unavailable: %s", m);
}

/* Server notices (CREATE TABLE IF NOT EXISTS's "already exists, skipping",
 * a shutdown's FATAL to an idle connection) would go to stderr. */
static void notice(void *arg, const char *msg)
{
	(void)arg;
	char m[400];
	one_line(NULL, msg, m, sizeof m);
	log_debug("postgresql: %s", m);
}

static PGconn *connect_one(const struct db *db)
{
	/* Defaults first: the URL's own settings, expanded from dbname,
	 * come later and so win (libpq keeps the last value of a key). */
	static const char *const keys[] = { "connect_timeout", "keepalives_idle", "keepalives_interval",
					    "keepalives_count", "tcp_user_timeout", "application_name",
					    "dbname", NULL };
	const char *vals[] = { "5", "10", "5", "3", "15000", "kilnd", db->conninfo, NULL };
	PGconn *c = PQconnectdbParams(keys, vals, 1);
	if (c)
		PQsetNoticeProcessor(c, notice, NULL);
	return c;
}

/* Has the server closed this idle connection (a restart, an idle
 * timeout, a terminated backend)? A poll, no round trip: an idle
 * connection has nothing to read unless the server hung up or is about
 * to. */
static bool gone(PGconn *c)
{
	if (PQstatus(c) != CONNECTION_OK)
		return true;
	struct pollfd p = { .fd = PQsocket(c), .events = POLLIN };
	if (p.fd < 0)
		return true;
	/* A server going down sends its reason, then closes: one read may
	 * take only the reason, the next finds the end. */
	for (int i = 0; i < 4 && poll(&p, 1, 0) > 0; i++)
		if (!PQconsumeInput(c) || PQstatus(c) != CONNECTION_OK)
			return true;
	return false;
}

/* Make s's connection usable: open, or reset a broken one. */
static int ready(const struct db *db, struct slot *s)
{
	if (s->c && !gone(s->c))
		return 0;
	if (s->c)
		PQreset(s->c);
	else if (!(s->c = connect_one(db)))
		return errf(ENOMEM, "postgresql: out of memory");
	if (PQstatus(s->c) != CONNECTION_OK)
		return unavailable(db, PQerrorMessage(s->c));
	return 0;
}

/* Lend a connection: one already open if any is free, else a free slot
 * to open. */
static int acquire(struct db *db, struct slot **out)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += POOL_WAIT_S;
	pthread_mutex_lock(&db->lock);
	for (;;) {
		struct slot *pick = NULL;
		for (int i = 0; i < db->n; i++) {
			struct slot *s = &db->slot[i];
			if (!s->busy && (!pick || (s->c && !pick->c)))
				pick = s;
		}
		if (pick) {
			pick->busy = true;
			pthread_mutex_unlock(&db->lock);
			*out = pick;
			return 0;
		}
		if (pthread_cond_timedwait(&db->freed, &db->lock, &until) == ETIMEDOUT) {
			pthread_mutex_unlock(&db->lock);
			return errf(EAGAIN, "database busy: all %d connections in use for %d s (pool=N in the store URL)",
				    db->n, POOL_WAIT_S);
		}
	}
}

static void release(struct db *db, struct slot *s)
{
	/* A connection left inside a transaction (a failed COMMIT, a broken
	 * link) must not carry it into the next caller's statements. */
	if (s->c && PQtransactionStatus(s->c) != PQTRANS_IDLE) {
		PQfinish(s->c);
		s->c = NULL;
	}
	pthread_mutex_lock(&db->lock);
	s->busy = false;
	pthread_cond_signal(&db->freed);
	pthread_mutex_unlock(&db->lock);
}

/* 0 for a result that succeeded, else -errno: -EAGAIN for a connection
 * that broke or a server that is going away or starting, -EAGAIN too for
 * a serialization failure or deadlock (try again), -EIO otherwise. */
static int result_error(const struct db *db, PGconn *c, const PGresult *res)
{
	ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY)
		return 0;
	if (PQstatus(c) != CONNECTION_OK)
		return unavailable(db, PQerrorMessage(c));
	const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(c);
	const char *code = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	code = code ? code : "";
	/* 08: connection exception; 57P01-3: admin or crash shutdown,
	 * cannot connect now; 53300: too many connections. */
	if (!strncmp(code, "08", 2) || !strncmp(code, "57P0", 4) || !strcmp(code, "53300"))
		return unavailable(db, msg);
	char m[400];
	one_line(db, msg, m, sizeof m);
	if (!strcmp(code, "40001") || !strcmp(code, "40P01"))
		return errf(EAGAIN, "database conflict, try again: %s", m);
	return errf(EIO, "postgresql: %s", m);
}

static void db_pg_close(struct db *db)
{
	if (!db)
		return;
	for (int i = 0; i < DB_POOL_MAX; i++)
		if (db->slot[i].c)
			PQfinish(db->slot[i].c);
	pthread_cond_destroy(&db->freed);
	pthread_mutex_destroy(&db->lock);
	free(db->conninfo);
	free(db);
}

static int db_pg_open(const char *target, struct db **out)
{
	if (!PQisthreadsafe())
		return errf(ENOTSUP, "postgresql: this libpq is not thread-safe");
	struct db *db = calloc(1, sizeof *db);
	if (!db)
		return errf(ENOMEM, "postgresql: out of memory");
	int rc = db_url_take_pool(target, &db->conninfo, &db->n);
	if (rc < 0) {
		free(db);
		return rc;
	}
	pthread_mutex_init(&db->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&db->freed, &ca);
	pthread_condattr_destroy(&ca);
	/* The first connection now: a bad URL or an unreachable server
	 * fails here, with libpq's reason. */
	rc = ready(db, &db->slot[0]);
	if (rc < 0) {
		db_pg_close(db);
		return rc;
	}
	*out = db;
	return 0;
}

/* Parameters as text, typed as db.h says; buf holds the numbers' text. */
static int params_text(const struct dbv *p, int n, Oid *types, const char **vals, char (*buf)[32])
{
	if (n < 0 || n > PARAMS_MAX)
		return errf(EINVAL, "postgresql: %d parameters (at most %d)", n, PARAMS_MAX);
	for (int i = 0; i < n; i++) {
		switch (p[i].type) {
		case DBV_INT:
			types[i] = OID_INT8;
			snprintf(buf[i], sizeof buf[i], "%lld", (long long)p[i].i);
			vals[i] = buf[i];
			break;
		case DBV_REAL:
			types[i] = OID_FLOAT8;
			/* %.17g round-trips a double; float8in spells the
			 * non-finite ones this way. */
			if (isnan(p[i].d))
				snprintf(buf[i], sizeof buf[i], "NaN");
			else if (isinf(p[i].d))
				snprintf(buf[i], sizeof buf[i], "%s", p[i].d > 0 ? "Infinity" : "-Infinity");
			else
				snprintf(buf[i], sizeof buf[i], "%.17g", p[i].d);
			vals[i] = buf[i];
			break;
		case DBV_TEXT:
			types[i] = 0;
			vals[i] = p[i].s;
			break;
		default:
			types[i] = 0;
			vals[i] = NULL;
			break;
		}
	}
	return 0;
}

static struct dbv column(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return (struct dbv){ .type = DBV_NULL };
	const char *v = PQgetvalue(res, row, col);
	switch (PQftype(res, col)) {
	case OID_INT2: case OID_INT4: case OID_INT8:
		return DBV_I(strtoll(v, NULL, 10));
	case OID_FLOAT4: case OID_FLOAT8: case OID_NUMERIC:
		return DBV_D(strtod(v, NULL));
	case OID_BOOL:
		return DBV_I(v[0] == 't');
	default:
		return (struct dbv){ .type = DBV_TEXT, .s = v };
	}
}

/* Hand the rows to fn; its first non-zero return stops them. */
static int rows(const PGresult *res, db_row_fn *fn, void *ctx)
{
	if (!fn || PQresultStatus(res) != PGRES_TUPLES_OK)
		return 0;
	int nrows = PQntuples(res), ncols = PQnfields(res);
	if (ncols > COLS_MAX)
		ncols = COLS_MAX;
	for (int r = 0; r < nrows; r++) {
		struct dbv cols[COLS_MAX];
		for (int c = 0; c < ncols; c++)
			cols[c] = column(res, r, c);
		int rc = fn(ctx, cols, ncols);
		if (rc)
			return rc;
	}
	return 0;
}

/* The connection a statement runs on: tx's, or one lent from the pool
 * and made ready. */
static int take(struct db *db, struct db_tx *tx, struct slot **s)
{
	if (tx) {
		*s = tx->s;
		return 0;
	}
	int rc = acquire(db, s);
	if (rc == 0 && (rc = ready(db, *s)) < 0)
		release(db, *s);
	return rc;
}

static int db_pg_exec(struct db *db, struct db_tx *tx, const char *sql, const struct dbv *params,
		      int nparams, db_row_fn *fn, void *ctx, int64_t *changes)
{
	Oid types[PARAMS_MAX];
	const char *vals[PARAMS_MAX];
	char buf[PARAMS_MAX][32];
	int rc = params_text(params, nparams, types, vals, buf);
	struct slot *s;
	if (rc < 0 || (rc = take(db, tx, &s)) < 0)
		return rc;
	PGresult *res = PQexecParams(s->c, sql, nparams, types, vals, NULL, NULL, 0);
	rc = result_error(db, s->c, res);
	if (rc == 0 && changes)
		*changes = strtoll(PQcmdTuples(res), NULL, 10);
	/* The rows are all in res: the connection goes back before fn runs,
	 * so a slow callback holds no connection. */
	if (!tx)
		release(db, s);
	if (rc == 0)
		rc = rows(res, fn, ctx);
	PQclear(res);
	return rc;
}

static int db_pg_script(struct db *db, struct db_tx *tx, const char *sql)
{
	struct slot *s;
	int rc = take(db, tx, &s);
	if (rc < 0)
		return rc;
	/* Several statements in one PQexec run as one implicit transaction
	 * (or inside tx's); the result is the last one's, or the error. */
	PGresult *res = PQexec(s->c, sql);
	rc = result_error(db, s->c, res);
	PQclear(res);
	if (!tx)
		release(db, s);
	return rc;
}

static int db_pg_begin(struct db *db, struct db_tx **out)
{
	struct db_tx *tx = malloc(sizeof *tx);
	if (!tx)
		return errf(ENOMEM, "postgresql: out of memory");
	int rc = take(db, NULL, &tx->s);
	if (rc == 0 && (rc = db_pg_script(db, tx, "BEGIN")) < 0)
		release(db, tx->s);
	if (rc < 0) {
		free(tx);
		return rc;
	}
	*out = tx;
	return 0;
}

static int db_pg_end(struct db *db, struct db_tx *tx, bool commit)
{
	PGconn *c = tx->s->c;
	PGresult *res = PQexec(c, commit ? "COMMIT" : "ROLLBACK");
	int rc = result_error(db, c, res);
	/* COMMIT of a transaction that had failed answers ROLLBACK. */
	if (rc == 0 && commit && strcmp(PQcmdStatus(res), "COMMIT") != 0)
		rc = errf(EIO, "postgresql: the transaction was rolled back");
	PQclear(res);
	release(db, tx->s);
	free(tx);
	return rc;
}

static int db_pg_lock(struct db *db, struct db_tx *tx, int64_t key)
{
	const struct dbv k = DBV_I(key);
	return db_pg_exec(db, tx, "SELECT pg_advisory_xact_lock($1)", &k, 1, NULL, NULL, NULL);
}

const struct db_driver db_pg = {
	.name = "postgresql",
	.serialized = false,
	.open = db_pg_open,
	.close = db_pg_close,
	.exec = db_pg_exec,
	.script = db_pg_script,
	.begin = db_pg_begin,
	.end = db_pg_end,
	.lock = db_pg_lock,
};
