/*
 * dbport: external access to managed databases (docs/databases.md "From
 * outside", ops/database.h struct db_external). For each database whose
 * record has an external port, a TCP listener at kilnd's
 * --db-external-bind address and that port; each connection accepted is
 * relayed to the database's port 5432 in its guest (the guest agent's
 * CONNECT, as the HTTP proxy reaches a sandbox's port: hostif_enter
 * wakes a hibernated database first, so the client sees a slow connect
 * and then its server). Nothing else of the database's sandbox is
 * reachable this way: the port is fixed, the client names nothing.
 * TLS only: the client's first message must ask for TLS (an SSLRequest,
 * passed on to the database's server, whose own key the TLS session
 * ends at), else it gets a PostgreSQL error saying so and is closed,
 * before the database is woken (dbport.c "TLS only").
 *
 * At most ops_db_external.conns_max connections of one database at a
 * time, and DBPORT_CONNS_MAX in all: one past them is closed at once.
 * The listeners follow the store (dbport_sync): a port taken away
 * (access turned off, the database deleted) is closed and the
 * connections made through it are cut; a port that could not be opened
 * (another program has it) is tried again at the next sync.
 */
#ifndef KILN_PROXY_DBPORT_H
#define KILN_PROXY_DBPORT_H

struct store;
struct hostif;

#define DBPORT_CONNS_MAX 512		/* relayed connections, all databases together */

/* Open the listeners the store has (a restart of kilnd opens them
 * again) and the thread that accepts on them. */
int dbport_start(struct store *st, struct hostif *hi);
/* The listeners made what the store says now (ops_db_external_sync). */
void dbport_sync(void);
/* Every listener closed and every relayed connection cut. */
void dbport_stop(void);

#endif
