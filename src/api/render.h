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

#include "ops/fields.h"
#include "store/store.h"

json_t *render_sandbox(const struct sbx_row *r);
json_t *render_snapshot(const struct snap_row *s);
/* An ExecResult with every field docs/api.md lists, always: stdout and
 * stderr ("" when empty or NULL: the stream sends output as events),
 * exit_code, signal (null if none), timed_out, duration_ms, truncated. */
json_t *render_exec_result(const void *out, size_t out_len, const void *err, size_t err_len, int exit_code,
			   int signal, bool timed_out, double duration_ms, bool truncated);
/* The operations' objects as the API answers them, with its times
 * (created_at, not created_ms): render_volume takes ops_volume_json's
 * (NULL passes through), render_app is ops_app_json's, render_database
 * ops_db_json's. */
struct ops_caller;
struct app_row;
struct db_row;
json_t *render_volume(json_t *ops_json);
json_t *render_app(const struct ops_caller *c, const struct app_row *a, const char *url);
json_t *render_database(const struct ops_caller *c, const struct db_row *d, const char *password);
/* A template as GET /v1/templates lists it (docs/api.md, Template):
 * what a version in service has is null before one is built. GET
 * /v1/templates/{name} answers the same fields. */
struct hostif_template;
json_t *render_template(const struct hostif_template *t);
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

/* The objects above and the API's others as field tables (ops/fields.h,
 * render_fields.c): every key, its type, always there or not, null or
 * not. The MCP tools' outputSchemas are made from them. */
extern const struct field render_sandbox_fields[];
extern const struct field render_snapshot_fields[];
extern const struct field render_exec_result_fields[];
extern const struct field render_volume_fields[];	/* ops_volume_json, created_at */
extern const struct field render_app_fields[];		/* ops_app_json, created_at, updated_at */
extern const struct field render_database_fields[];	/* ops_db_json, created_at */
extern const struct field render_db_backup_fields[];	/* ops_db_backup_json */
extern const struct field render_port_fields[];
extern const struct field render_process_fields[];
extern const struct field render_process_output_fields[];
extern const struct field render_template_fields[];
extern const struct field render_code_execution_fields[];	/* code.c, a cell run */
extern const struct field render_dir_entry_fields[];	/* stat_json(st, "name", ...) */

#endif
