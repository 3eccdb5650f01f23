/*
 * render: the JSON shapes of the API's resources (docs/api.md, components
 * Sandbox and Snapshot), and text helpers: RFC 3339 times, output bytes as
 * JSON strings.
 */
#ifndef KILN_API_RENDER_H
#define KILN_API_RENDER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

json_t *render_sandbox(const struct sbx_row *r);
json_t *render_snapshot(const struct snap_row *s);
/* An ExecResult with every field docs/api.md lists, always: stdout and
 * stderr ("" when empty or NULL: the stream sends output as events),
 * exit_code, signal (null if none), timed_out, duration_ms, truncated. */
json_t *render_exec_result(const void *out, size_t out_len, const void *err, size_t err_len, int exit_code,
			   int signal, bool timed_out, double duration_ms, bool truncated);
/* "2025-05-20T12:34:56.789Z" */
json_t *render_time(int64_t ms);
/* Bytes as a JSON string: invalid UTF-8 sequences become U+FFFD. */
json_t *render_text(const void *p, size_t n);
/* Whether p is valid UTF-8 (NUL included: JSON escapes it). */
int utf8_valid(const void *p, size_t n);
/* Standard base64 of p (malloc'd). */
char *base64_of(const void *p, size_t n);
/* A piece of a stream's output as an SSE event's data: {"data": text}
 * when it is UTF-8, else {"data_b64": base64}; NULL when out of memory. */
json_t *render_chunk(const void *p, size_t n);

#endif
