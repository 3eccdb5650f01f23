/*
 * render: the JSON shapes of the API's resources (docs/api.md, components
 * Sandbox and Snapshot), and text helpers: RFC 3339 times, output bytes as
 * JSON strings.
 */
#ifndef KILN_API_RENDER_H
#define KILN_API_RENDER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

json_t *render_sandbox(const struct sbx_row *r);
json_t *render_snapshot(const struct snap_row *s);
/* "2025-05-20T12:34:56.789Z" */
json_t *render_time(int64_t ms);
/* Bytes as a JSON string: invalid UTF-8 sequences become U+FFFD. */
json_t *render_text(const void *p, size_t n);
/* Whether p is valid UTF-8 (NUL included: JSON escapes it). */
int utf8_valid(const void *p, size_t n);
/* Standard base64 of p (malloc'd). */
char *base64_of(const void *p, size_t n);

#endif
