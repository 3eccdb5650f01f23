/*
 * db_url: the parts of a store URL that kiln reads itself, before libpq
 * sees it: the pool size, which libpq would refuse as an unknown
 * parameter, and the password, which no message or log may show.
 */
#ifndef KILN_STORE_DB_URL_H
#define KILN_STORE_DB_URL_H

#include <stddef.h>

#define DB_URL_MAX 4096
#define DB_POOL_DEFAULT 4
#define DB_POOL_MAX 64

/* url with its password (user:PASSWORD@ and ?password=) shown as "***",
 * cut to cap bytes. */
void db_url_redact(const char *url, char *out, size_t cap);

/* Replace, in msg (NUL-terminated, cap bytes, in place), every copy of
 * url's password with "***": libpq quotes bad URI tokens back in its
 * errors. */
void db_url_scrub(const char *url, char *msg, size_t cap);

/* Take "pool=N" (1..DB_POOL_MAX) out of url's query: *conninfo gets the
 * rest (malloc'd), *pool N or DB_POOL_DEFAULT. -EINVAL for a bad N or an
 * over-long url, -ENOMEM. */
int db_url_take_pool(const char *url, char **conninfo, int *pool);

#endif
