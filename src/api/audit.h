/*
 * audit: the record of what keys changed (docs/security.md). Every request
 * authenticated by a key (or a dashboard session, by its key) to a route
 * that is not ROUTE_READ is appended to the store's audit log once it is
 * answered, refused ones (403, 404, ...) included: who asked for a change
 * matters as much as who made one. GET /v1/audit reads it back.
 */
#ifndef KILN_API_AUDIT_H
#define KILN_API_AUDIT_H

struct req;

/* Append r to the audit log if it is one to keep. Called when the request
 * is over (its answer sent), so the write costs the caller no latency; a
 * failed write is logged, not retried. */
void audit_request(struct req *r);

/* The change an operator's request r (/v1/admin/...) made, in workspace
 * wsid's audit log, or the operator's own (AUDIT_OPERATOR_LOG: changes
 * of no one workspace, as a plan's; GET /v1/admin/audit); the actor its
 * operator credential. target: what it made (NULL: what the path names).
 * A failed write costs the answer nothing: it is logged. */
#define AUDIT_OPERATOR_LOG ""
void audit_operator(struct req *r, const char *wsid, int status, const char *target);

struct store;
/* Retention: entries older than days are removed now and every hour
 * after, by every kilnd with the API (the deletes of replicas sharing a
 * database agree). days 0: kept for ever, nothing started. */
int audit_retention_start(struct store *st, int days);
void audit_retention_stop(void);

#endif
