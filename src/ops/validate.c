#include "ops/validate.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *v_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number";
	case JSON_TRUE: case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

int v_known_keys(const json_t *obj, const char *const allowed[])
{
	const char *key;
	json_t *v;
	if (!obj)
		return 0;
	json_object_foreach((json_t *)obj, key, v) {
		bool ok = false;
		for (size_t i = 0; allowed[i]; i++)
			if (strcmp(allowed[i], key) == 0) {
				ok = true;
				break;
			}
		if (!ok)
			return errf(EINVAL, "unknown field '%.64s'", key);
	}
	return 0;
}

/* The value of key, NULL if absent or null. */
static json_t *field(const json_t *obj, const char *key)
{
	json_t *v = obj ? json_object_get(obj, key) : NULL;
	return v && !json_is_null(v) ? v : NULL;
}

int v_str(const json_t *obj, const char *key, bool required, size_t maxlen, const char **out)
{
	json_t *v = field(obj, key);
	if (!v)
		return required ? errf(EINVAL, "field '%s' is required", key) : 0;
	if (!json_is_string(v))
		return errf(EINVAL, "field '%s' must be a string, not %s", key, v_type_name(v));
	if (json_string_length(v) > maxlen)
		return errf(EINVAL, "field '%s' is longer than %zu bytes", key, maxlen);
	*out = json_string_value(v);
	return 0;
}

int v_int(const json_t *obj, const char *key, bool required, int64_t min, int64_t max, int64_t *out)
{
	json_t *v = field(obj, key);
	if (!v)
		return required ? errf(EINVAL, "field '%s' is required", key) : 0;
	if (!json_is_integer(v))
		return errf(EINVAL, "field '%s' must be an integer, not %s", key, v_type_name(v));
	json_int_t n = json_integer_value(v);
	if (n < min || n > max)
		return errf(EINVAL, "field '%s' must be from %lld to %lld", key, (long long)min,
			    (long long)max);
	*out = n;
	return 0;
}

int v_bool(const json_t *obj, const char *key, bool *out)
{
	json_t *v = field(obj, key);
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return errf(EINVAL, "field '%s' must be a boolean, not %s", key, v_type_name(v));
	*out = json_is_true(v);
	return 0;
}

static bool env_name(const char *s)
{
	if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
		return false;
	for (s++; *s; s++)
		if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

int v_str_map(const json_t *obj, const char *key, size_t max, size_t max_key, size_t max_val,
	      bool env_names, json_t **out)
{
	json_t *v = field(obj, key);
	if (!v)
		return 0;
	if (!json_is_object(v))
		return errf(EINVAL, "field '%s' must be an object of strings, not %s", key, v_type_name(v));
	if (json_object_size(v) > max)
		return errf(EINVAL, "field '%s' has more than %zu entries", key, max);
	const char *k;
	json_t *e;
	json_object_foreach(v, k, e) {
		if (strlen(k) == 0 || strlen(k) > max_key)
			return errf(EINVAL, "field '%s': keys must be 1 to %zu bytes", key, max_key);
		if (env_names && !env_name(k))
			return errf(EINVAL, "field '%s': '%.64s' is not a variable name", key, k);
		if (!json_is_string(e))
			return errf(EINVAL, "field '%s': '%.64s' must be a string, not %s", key, k,
				    v_type_name(e));
		if (json_string_length(e) > max_val)
			return errf(EINVAL, "field '%s': '%.64s' is longer than %zu bytes", key, k, max_val);
	}
	*out = v;
	return 0;
}

int v_str_array(const json_t *obj, const char *key, size_t max, size_t maxlen, const char ***out)
{
	json_t *v = field(obj, key);
	if (!v)
		return 0;
	if (!json_is_array(v))
		return errf(EINVAL, "field '%s' must be an array of strings, not %s", key, v_type_name(v));
	size_t n = json_array_size(v);
	if (n == 0 || n > max)
		return errf(EINVAL, "field '%s' must have 1 to %zu items", key, max);
	const char **a = calloc(n + 1, sizeof *a);
	if (!a)
		return errf(ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(v, i);
		if (!json_is_string(e) || json_string_length(e) > maxlen ||
		    strlen(json_string_value(e)) != json_string_length(e)) {
			free(a);
			return errf(EINVAL, "field '%s': item %zu must be a string of at most %zu bytes",
				    key, i, maxlen);
		}
		a[i] = json_string_value(e);
	}
	*out = a;
	return 0;
}

bool v_is_id(const char *s, const char *prefix)
{
	size_t pl = strlen(prefix);
	if (strncmp(s, prefix, pl) != 0)
		return false;
	size_t n = 0;
	for (s += pl; *s; s++, n++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')) || n >= 32)
			return false;
	return n > 0;
}

bool v_is_name(const char *s)
{
	size_t n = 0;
	if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
		return false;
	for (; *s; s++, n++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-') || n >= 16)
			return false;
	return true;
}

int v_guest_path(const char *s, const char *param)
{
	if (!s || !*s)
		return errf(EINVAL, "query parameter '%s' is required", param);
	if (s[0] != '/')
		return errf(EINVAL, "'%s' must be an absolute guest path", param);
	if (strlen(s) > 4095)
		return errf(EINVAL, "'%s' is longer than 4095 bytes", param);
	return 0;
}

bool v_is_domain(const char *s)
{
	size_t n = strlen(s), label = 0;
	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i <= n; i++) {
		char ch = s[i];
		if (ch == '.' || ch == 0) {
			if (label == 0 || label > 63 || s[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-'))
			return false;
		if (label == 0 && ch == '-')
			return false;
		label++;
	}
	return true;
}

int v_port(const char *s)
{
	int port = 0;
	if (!s || s[0] < '1' || s[0] > '9')
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		port = port * 10 + (*s - '0');
		if (port > 65535)
			return 0;
	}
	return port;
}
