/*
 * schema_check.h: JSON Schema, the subset fields_schema writes (type,
 * properties, required, additionalProperties, enum, minimum, maximum,
 * maxLength, maxProperties, propertyNames, items, minItems, maxItems), as
 * an MCP client checks arguments against a tool's inputSchema before it
 * calls: unit_kilnd_fields checks that the schema made from a table
 * refuses what fields_check refuses, and takes what it takes. (kilnd
 * checks arguments with the table itself, src/mcp/mcp.c.)
 */
#ifndef KILN_TESTS_SCHEMA_CHECK_H
#define KILN_TESTS_SCHEMA_CHECK_H

#include "common/err.h"
#include "ops/validate.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool schema_has_type(const json_t *v, const char *type)
{
	if (!strcmp(type, "string")) return json_is_string(v);
	if (!strcmp(type, "integer")) return json_is_integer(v);
	if (!strcmp(type, "number")) return json_is_number(v);
	if (!strcmp(type, "boolean")) return json_is_boolean(v);
	if (!strcmp(type, "object")) return json_is_object(v);
	if (!strcmp(type, "array")) return json_is_array(v);
	return false;
}

/* v against the subset of JSON Schema our tools' inputSchemas use: type,
 * properties, required, additionalProperties (false or a schema), enum,
 * minimum, maximum, maxLength, maxProperties, propertyNames (its lengths),
 * items, minItems, maxItems.
 * -EINVAL naming the offending argument. */
static int schema_check(const json_t *schema, const json_t *v, const char *where)
{
	const char *type = json_string_value(json_object_get(schema, "type"));
	if (type && !schema_has_type(v, type))
		return errf(EINVAL, "%s must be %s%s, not %s", where,
			    strchr("aeiou", type[0]) ? "an " : "a ", type, v_type_name(v));
	/* A list of types (a signal: a name or a number): one of them. */
	json_t *types = json_object_get(schema, "type"), *ty;
	size_t ti;
	bool any = !json_is_array(types);
	char tnames[80] = "";
	json_array_foreach(types, ti, ty) {
		const char *n = json_string_value(ty);
		any = any || (n && schema_has_type(v, n));
		size_t len = strlen(tnames);
		snprintf(tnames + len, sizeof tnames - len, "%s%s", ti ? " or " : "", n ? n : "?");
	}
	if (!any)
		return errf(EINVAL, "%s must be %s, not %s", where, tnames, v_type_name(v));
	json_t *e = json_object_get(schema, "enum");
	if (e) {
		size_t i;
		json_t *x;
		bool found = false;
		json_array_foreach(e, i, x)
			found = found || json_equal(x, (json_t *)v);
		if (!found)
			return errf(EINVAL, "%s is not one of the allowed values", where);
	}
	json_t *min = json_object_get(schema, "minimum"), *max = json_object_get(schema, "maximum");
	if (json_is_number(v) && ((min && json_number_value(v) < json_number_value(min)) ||
				  (max && json_number_value(v) > json_number_value(max))))
		return errf(EINVAL, "%s must be from %lld to %lld", where,
			    (long long)json_number_value(min), (long long)json_number_value(max));
	json_t *maxlen = json_object_get(schema, "maxLength");
	if (json_is_string(v) && maxlen && json_string_length(v) > (size_t)json_integer_value(maxlen))
		return errf(EINVAL, "%s is longer than %lld bytes", where,
			    (long long)json_integer_value(maxlen));
	char sub[160];
	if (json_is_array(v)) {
		json_t *mi = json_object_get(schema, "minItems"), *ma = json_object_get(schema, "maxItems");
		if ((mi && json_array_size(v) < (size_t)json_integer_value(mi)) ||
		    (ma && json_array_size(v) > (size_t)json_integer_value(ma)))
			return errf(EINVAL, "%s has too few or too many items", where);
		json_t *items = json_object_get(schema, "items"), *x;
		size_t i;
		json_array_foreach(v, i, x) {
			snprintf(sub, sizeof sub, "%s[%zu]", where, i);
			int rc = items ? schema_check(items, x, sub) : 0;
			if (rc < 0)
				return rc;
		}
	}
	if (!json_is_object(v))
		return 0;
	json_t *props = json_object_get(schema, "properties");
	json_t *extra = json_object_get(schema, "additionalProperties");
	json_t *maxp = json_object_get(schema, "maxProperties");
	if (maxp && json_object_size(v) > (size_t)json_integer_value(maxp))
		return errf(EINVAL, "%s has more than %lld entries", where, (long long)json_integer_value(maxp));
	/* An env's names: as long as the operation takes (fields_schema). */
	json_t *names = json_object_get(schema, "propertyNames");
	if (names) {
		const char *k;
		json_t *x;
		json_int_t lo = json_integer_value(json_object_get(names, "minLength"));
		json_int_t hi = json_integer_value(json_object_get(names, "maxLength"));
		json_object_foreach((json_t *)v, k, x)
			if ((json_int_t)strlen(k) < lo || (hi && (json_int_t)strlen(k) > hi))
				return errf(EINVAL, "%s: keys must be %lld to %lld bytes", where, (long long)lo,
					    (long long)hi);
	}
	size_t i;
	json_t *req;
	json_array_foreach(json_object_get(schema, "required"), i, req) {
		json_t *x = json_object_get(v, json_string_value(req));
		if (!x || json_is_null(x))
			return errf(EINVAL, "argument '%s' is required", json_string_value(req));
	}
	const char *k;
	json_t *x;
	json_object_foreach((json_t *)v, k, x) {
		json_t *ps = props ? json_object_get(props, k) : NULL;
		if (!strcmp(where, "arguments"))
			snprintf(sub, sizeof sub, "argument '%.64s'", k);
		else
			snprintf(sub, sizeof sub, "%.80s['%.64s']", where, k);
		if (!ps && json_is_false(extra))
			return errf(EINVAL, "unknown argument '%.64s'", k);
		if (!ps)
			ps = json_is_object(extra) ? extra : NULL;
		/* null is an absent optional argument, as in the REST API */
		int rc = ps && !json_is_null(x) ? schema_check(ps, x, sub) : 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

#endif
