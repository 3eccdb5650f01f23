/*
 * out: what the kiln CLI prints for people: aligned tables, relative times,
 * status words in colour (only on a terminal, never with NO_COLOR), and a
 * progress line on stderr for requests that take over a second. Also the
 * query strings of GET requests.
 */
#ifndef KILN_CLI_OUT_H
#define KILN_CLI_OUT_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

struct opts;

#define TABLE_COLS 8
#define TABLE_ROWS_MAX 100000

struct table {
	int ncols;
	char *head[TABLE_COLS];
	char **cells;			/* rows * ncols strings */
	size_t rows, cap;
};

/* head: the column names, space-separated. */
void table_init(struct table *t, const char *head);
/* ncols strings, then NULL. */
void table_row(struct table *t, ...);
/* Columns padded to their widest cell (the last is not); frees t. */
void table_print(struct table *t, FILE *f);

/* An RFC 3339 time as "5s ago", "in 3m"; "-" stays "-". */
const char *ago(const char *rfc3339, char *buf, size_t len);
/* An RFC 3339 UTC time as Unix seconds into *t; -1 if it is none. */
int rfc3339_seconds(const char *rfc3339, long long *t);

/* Micro-dollars (a JSON integer) as "$1.234567", by integer arithmetic,
 * never through a float; "-" for anything else. */
const char *dollars(json_t *v, char *buf, size_t len);
/* o[k], a JSON number, through printf's fmt ("%.3f"), or "-". */
const char *number(json_t *o, const char *k, const char *fmt, char *buf, size_t len);
/* A status word, in colour when stdout is a terminal. */
const char *status_word(const char *status);
/* Whether stdout may get colour (a terminal, NO_COLOR unset, TERM not dumb). */
int use_colour(int fd);

/* "what..." with a spinner on stderr once a second has passed (only on a
 * terminal, never with --json); progress_end clears it. */
void progress_start(const struct opts *o, const char *what);
void progress_end(void);

struct query {
	char buf[8192];
	size_t len;
};
/* Add name=value (both percent-encoded) unless value is NULL. */
void query_add(struct query *q, const char *name, const char *value);
/* base + "?" + the query (malloc'd). */
char *query_path(const char *base, const struct query *q);

#endif
