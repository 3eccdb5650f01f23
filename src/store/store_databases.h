/*
 * store_databases: the records of managed databases (docs/databases.md)
 * and of their backups. A database is a PostgreSQL server in a sandbox
 * of template `postgres` (ops/database.h has the rules); its record says
 * which sandbox, by name and id in its workspace. Its password is not
 * kept here (nor anywhere in kiln): it is set in the server and shown
 * once. A backup is a snapshot of the database's sandbox: its record
 * (the snapshot's id) outlives the database, so a deleted database can
 * still be restored into a new one.
 */
#ifndef KILN_STORE_STORE_DATABASES_H
#define KILN_STORE_STORE_DATABASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct db_row {
	char id[ID_MAX], workspace[ID_MAX];
	char name[NAME_MAX_LEN];
	char sandbox[ID_MAX];		/* "" while it is being made */
	char from_backup[ID_MAX];	/* restored from this backup, or "" */
	int64_t created_ms, deleted_ms;
	/* Its backup schedule (database_schedules; 0s: none): a backup
	 * every interval_s, the next at next_ms, the newest kept of the
	 * scheduled ones kept (manual ones are the caller's to delete). */
	int64_t backup_interval_s, backups_kept, next_backup_ms;
	/* The host's TCP port kilnd proxies to its server from outside
	 * (database_external; 0: no external access). */
	int64_t external_port;
};

struct db_backup_row {
	char id[ID_MAX];		/* the snapshot's */
	char database[ID_MAX], workspace[ID_MAX];
	int64_t created_ms;
	char kind[16];			/* "manual" or "scheduled" */
};

/* -EEXIST "a database named N exists" for a live name of the workspace. */
int store_db_insert(struct store *st, const struct db_row *r);
/* The workspace's live database by id, or by name: -ENOENT otherwise. */
int store_db_load(struct store *st, const char *workspace, const char *key, bool by_name, struct db_row *r);
int store_db_set_sandbox(struct store *st, const char *id, const char *sandbox);
/* Its schedule set from r's backup_* fields (interval 0: none). */
int store_db_set_schedule(struct store *st, const struct db_row *r);
/* Its idle period (seconds without connections before it hibernates;
 * 0: never): *secs as set, or dflt if never set. */
int store_db_idle(struct store *st, const char *id, int64_t dflt, int64_t *secs);
int store_db_set_idle(struct store *st, const char *id, int64_t secs);
/* Its external port: port 0 takes it away; another port is taken only
 * if no database has it and this one has none (-EEXIST otherwise). */
int store_db_set_external(struct store *st, const char *id, int64_t port);
/* Its server's TLS certificate (PEM, validated by the caller): into
 * pem (cap bytes, "" when it has none). */
int store_db_tls(struct store *st, const char *id, char *pem, size_t cap);
int store_db_set_tls(struct store *st, const char *id, const char *pem);
/* Marked deleted: -ENOENT if it was not live. */
int store_db_delete(struct store *st, const char *workspace, const char *id);
typedef int store_db_fn(void *ctx, const struct db_row *r);
/* The workspace's live databases, oldest first; workspace NULL: every
 * workspace's. */
int store_db_each(struct store *st, const char *workspace, store_db_fn *fn, void *ctx);

int store_db_backup_insert(struct store *st, const struct db_backup_row *r);
/* The workspace's backup id: -ENOENT "backup ID not found" otherwise. */
int store_db_backup_load(struct store *st, const char *workspace, const char *id, struct db_backup_row *r);
/* The backup's record gone (its snapshot is the caller's). */
int store_db_backup_delete(struct store *st, const char *id);
typedef int store_db_backup_fn(void *ctx, const struct db_backup_row *r);
/* A database's backups, oldest first. */
int store_db_backup_each(struct store *st, const char *workspace, const char *database, store_db_backup_fn *fn,
			 void *ctx);

/* An event of a database's (kind "restart": its VM was started again;
 * text says why), numbered per database; the newest DB_EVENTS_KEPT are
 * kept. */
#define DB_EVENTS_KEPT 100
int store_db_event(struct store *st, const char *database, const char *kind, const char *text);
typedef int store_db_event_fn(void *ctx, int64_t ts_ms, const char *kind, const char *text);
/* The database's events, oldest first. */
int store_db_events(struct store *st, const char *database, store_db_event_fn *fn, void *ctx);

#endif
