/*
 * database: managed PostgreSQL databases (docs/databases.md). A database
 * is a sandbox of template `postgres` (Debian's server, its cluster made
 * when the image was built, images/postgres-setup) that kiln keeps for
 * it: persistent, no TTL (never deleted by time), hibernated when it
 * has had no connections for its idle_seconds (default DB_IDLE_DEFAULT_S,
 * 0: never) and woken by the next connection to its port, which waits
 * for the wake and is then served (host/portwake.c), or by any API use
 * that needs its server; its
 * server started under the apps' supervisor (ops/app.h: restarted when
 * it exits), and its port 5432 open to the other sandboxes of its
 * workspace alone (netpolicy workspace_ports; every other sandbox, and
 * the internet, is refused by the host's firewall). Its credentials are
 * the server's superuser `postgres` with a random password set at
 * create and at each reset, answered then and kept nowhere in kiln.
 * A backup is a snapshot of the database's sandbox (memory and disk, so
 * the server's state is whole); a new database restored from one has the
 * data as it was, and a new password.
 * Its VM that dies is booted again from its own disk by the database
 * watch (below), committed data kept; backups may be made on a schedule.
 * Its server speaks TLS with a key of its own, made in its guest at
 * create and at a restore (never the backup's, nor the image's), its
 * certificate checked (ops/dbcert.h) and kept in the store: the root its
 * external clients verify it by (docs/databases.md "TLS").
 *
 * Errors as ops.h: -EINVAL naming the field, -ENOENT "database X not
 * found" (another workspace's too), -EEXIST for a name the workspace has,
 * -ETIMEDOUT when the server did not come up; the rest as ops_create.
 */
#ifndef KILN_OPS_DATABASE_H
#define KILN_OPS_DATABASE_H

#include <jansson.h>

#include "ops/ops.h"
#include "store/store_databases.h"

#define DB_TEMPLATE "postgres"
#define DB_PORT 5432
#define DB_USER "postgres"
#define DB_DBNAME "postgres"
#define DB_PASSWORD_LEN 24		/* [a-z0-9], 120 random bits */
#define DB_READY_S 120			/* the server listening, in an emulated guest too */
#define DB_COMMAND "/usr/local/bin/kiln-postgres"
#define DB_IDLE_DEFAULT_S 3600		/* without connections, then hibernated */
#define DB_IDLE_MAX_S 2592000		/* 30 days */
#define DB_BACKUP_MIN_S 300		/* the shortest backup interval (kilnd --db-backup-min) */
#define DB_BACKUP_INTERVAL_MAX (366 * 86400)
#define DB_BACKUPS_KEPT_DEFAULT 7
#define DB_BACKUPS_KEPT_MAX 100

/* External access (docs/databases.md "From outside"): off unless asked
 * for (external_access at create or PATCH). A database with it has a TCP
 * port of the host's, from port_lo..port_hi, kept in the store (so it is
 * the same after a restart of kilnd) and released when access is turned
 * off or the database is deleted. The kilnd that serves the API listens
 * on it (proxy/dbport.h: at bind, default loopback) and relays each
 * connection to the database's port 5432, waking it if it hibernates;
 * TLS connections only. host: what its external_url names (default the
 * bind address). */
struct db_external {
	char bind[64];
	char host[256];
	int port_lo, port_hi;
	int conns_max;			/* relayed connections of one database at a time */
};
#define DB_EXTERNAL_BIND "127.0.0.1"
#define DB_EXTERNAL_PORT_LO 54320
#define DB_EXTERNAL_PORT_HI 54419
#define DB_EXTERNAL_CONNS 32		/* of the server's 50 (images/postgres-setup) */
extern struct db_external ops_db_external;
/* Called when a database's external port may have changed (a create, a
 * PATCH, a delete) and at each pass of the database watch: the front end
 * that listens makes its listeners what the store says. NULL: none. */
extern void (*ops_db_external_sync)(void);

/* The shortest backup_interval_seconds taken (DB_BACKUP_MIN_S unless
 * kilnd was told otherwise). */
extern int64_t ops_db_backup_min_s;

/* The fields ops_db_create accepts, and ops_db_update (ops/fields.h). */
extern const struct field ops_db_fields[];
extern const struct field ops_db_update_fields[];

/* Whether s is a database's name: [a-z0-9][a-z0-9-]*, at most 63. */
bool ops_db_name_ok(const char *s);

/* POST /v1/databases {name?, from_backup?, backup_interval_seconds?,
 * backups_kept?, idle_seconds?, external_access?}: the database made and its server answering; password
 * gets its new password. name defaults to the id's random part. */
int ops_db_create(const struct ops_caller *c, const json_t *args, struct db_row *out,
		  char password[DB_PASSWORD_LEN + 1]);
/* fn on each of the caller's databases, oldest first (fn may use the
 * store: they are read first). */
int ops_db_each(const struct ops_caller *c, store_db_fn *fn, void *ctx);
/* The caller's database by id or name. */
int ops_db_get(const struct ops_caller *c, const char *key, struct db_row *out);
/* The database and its sandbox deleted (its backups are kept). */
int ops_db_delete(const struct ops_caller *c, const char *key);
/* A new random password set in the server; the old one fails from then. */
int ops_db_reset_password(const struct ops_caller *c, const char *key, struct db_row *out,
			  char password[DB_PASSWORD_LEN + 1]);
/* PATCH /v1/databases/{id} {backup_interval_seconds?, backups_kept?,
 * idle_seconds? (0..DB_IDLE_MAX_S, 0: never hibernated), external_access?
 * (a port of the range given, -EAGAIN when none is free; false: taken
 * away, its connections cut)}: its idle
 * period, and its backup schedule (interval 0: none, else at least
 * ops_db_backup_min_s; the first backup one interval from now). The
 * watch makes them (kind "scheduled") and deletes the oldest scheduled
 * ones past backups_kept (1..100, default 7); manual ones are kept. */
int ops_db_update(const struct ops_caller *c, const char *key, const json_t *args, struct db_row *out);
/* A backup now (kind "manual"): a snapshot of its sandbox. */
int ops_db_backup(const struct ops_caller *c, const char *key, struct db_backup_row *out);
/* {backups: [{id, database_id, kind, created_ms}]} of the caller's database. */
int ops_db_backups(const struct ops_caller *c, const char *key, json_t **out);

/* {id, name, status (its sandbox's: running, hibernated, failed, ...),
 * sandbox_id, host, port, user, database, url, from_backup, created_ms,
 * idle_seconds, external_access, external_host, external_port,
 * external_url (sslmode=verify-ca, sslrootcert=ID.crt), tls_certificate,
 * tls_certificate_sha256, ...};
 * password (NULL: left out) goes in password and the url. */
json_t *ops_db_json(const struct ops_caller *c, const struct db_row *r, const char *password);
json_t *ops_db_backup_json(const struct db_backup_row *b);

/* The database watch: every period_ms, a database whose VM died is
 * started again from its disk (a cold boot; PostgreSQL's recovery replays
 * its WAL), its server under its supervisor; each restart, and each that
 * failed (tried again DB_RETRY_MS later), is an event of the database's
 * (its JSON's events and vm_restarts). Scheduled backups are made there
 * too, and idle ones hibernated (its connections counted in its guest). */
int db_watch_start(struct store *st, struct hostif *hi, const struct plans *plans, int period_ms);
void db_watch_stop(void);

#endif
