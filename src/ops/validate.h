/*
 * validate: strict checks of request JSON. Unknown fields, wrong types and
 * out-of-range values are refused with -EINVAL and a message naming the
 * field, which the handler sends back as a 400. A JSON null counts as an
 * absent optional field. Every string and collection has a bound.
 */
#ifndef KILN_OPS_VALIDATE_H
#define KILN_OPS_VALIDATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "a string", "an integer"...: what a JSON value is, for messages. */
const char *v_type_name(const json_t *v);
/* obj (NULL: an empty body) has only keys from the NULL-terminated list. */
int v_known_keys(const json_t *obj, const char *const allowed[]);
/* The value of key if present, else leaves *out alone (-EINVAL if
 * required and absent). */
int v_str(const json_t *obj, const char *key, bool required, size_t maxlen, const char **out);
int v_int(const json_t *obj, const char *key, bool required, int64_t min, int64_t max, int64_t *out);
int v_bool(const json_t *obj, const char *key, bool *out);
/* An object of string values (metadata, env): at most max entries, keys
 * and values within their lengths. With env_names, keys must be shell
 * variable names. *out is borrowed from obj. */
int v_str_map(const json_t *obj, const char *key, size_t max, size_t max_key, size_t max_val,
	      bool env_names, json_t **out);
/* An array of strings (argv), 1..max items, each within maxlen. *out is a
 * malloc'd NULL-terminated array of borrowed strings. */
int v_str_array(const json_t *obj, const char *key, size_t max, size_t maxlen, const char ***out);

/* A resource id: prefix then [a-z0-9]{1,32}. */
bool v_is_id(const char *s, const char *prefix);
/* A template name: [a-z0-9][a-z0-9-]{0,15} (short: it is part of socket paths). */
bool v_is_name(const char *s);
/* A DNS name for host routing: dot-separated labels of [a-z0-9-], none
 * empty or starting or ending with '-', at most 253 bytes, lower case. */
bool v_is_domain(const char *s);
/* A TCP port in a path segment: decimal 1..65535, no sign or leading zero;
 * 0 when it is not one. */
int v_port(const char *s);
/* A guest path from a query parameter: absolute, 1..4095 bytes. Paths are
 * taken literally (".." included): they name files inside the guest, where
 * the agent resolves them, so nothing on the host is reachable by them. */
int v_guest_path(const char *s, const char *param);

#endif
