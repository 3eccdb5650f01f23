/*
 * reply_buf: an answer with extra headers and a body in memory, for the
 * replies the plain reply_* helpers cannot make (Set-Cookie, caching and
 * Content-Security-Policy headers).
 */
#ifndef KILN_API_REPLY_BUF_H
#define KILN_API_REPLY_BUF_H

#include <jansson.h>
#include <stddef.h>

struct req;

/* body (malloc'd, taken over; may be NULL when len is 0) with headers
 * ({name, value} pairs up to {NULL, NULL}). */
int reply_buf(struct req *r, int status, const char *const headers[][2], char *body, size_t len);
/* json (stolen) with headers; Content-Type is added. */
int reply_json_headers(struct req *r, int status, const char *const headers[][2], json_t *json);

#endif
