/*
 * json: a small, strict JSON reader for control messages (the VMM's control
 * socket, configuration). It parses a whole document into a tree; strings
 * are decoded to UTF-8 and NUL-terminated (a string with an embedded NUL is
 * rejected). Depth and size are bounded so hostile input cannot exhaust the
 * stack. Writing JSON is done with strbuf_printf/strbuf_json_str.
 */
#ifndef KILN_JSON_H
#define KILN_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json {
	enum json_type type;
	bool boolean;
	double number;
	char *string;            /* JSON_STRING */
	char *key;               /* set on members of an object */
	struct json *child;      /* first element or member */
	struct json *next;       /* next sibling */
};

#define JSON_MAX_DEPTH 32

/* json_parse: parse len bytes. Returns NULL and sets errmsg() on error. */
struct json *json_parse(const char *text, size_t len);
void json_free(struct json *j);

struct json *json_get(const struct json *obj, const char *key);
/* Typed lookups: return the value of obj[key] if it has that type. */
const char *json_get_str(const struct json *obj, const char *key);
bool json_get_int(const struct json *obj, const char *key, int64_t *out);
bool json_get_bool(const struct json *obj, const char *key, bool *out);

#endif
