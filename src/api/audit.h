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

struct store;
/* Retention: entries older than days are removed now and every hour
 * after, by every kilnd with the API (the deletes of replicas sharing a
 * database agree). days 0: kept for ever, nothing started. */
int audit_retention_start(struct store *st, int days);
void audit_retention_stop(void);

#endif
