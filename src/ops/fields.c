/*
 * fields: checking a request against its operation's table (fields.h).
 * The messages are validate.c's (v_str, v_int, ...), which the REST API
 * has always answered: a table changes where the bounds are written, not
 * what a client is told.
 */
#include "ops/fields.h"
#include "ops/validate.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>

const struct field *fields_find(const struct field *t, const char *name)
{
	for (; t && t->type != FIELD_END; t++) {
		if (t->type == FIELD_INCLUDE) {
			const struct field *f = fields_find(t->items, name);
			if (f)
				return f;
		} else if (!strcmp(t->name, name)) {
			return t;
		}
	}
	return NULL;
}

json_t *field_get(const json_t *obj, const char *name)
{
	json_t *v = obj ? json_object_get(obj, name) : NULL;
	return v && !json_is_null(v) ? v : NULL;
}

const char *field_str(const json_t *obj, const char *name, const char *dflt)
{
	const char *s = json_string_value(field_get(obj, name));
	return s ? s : dflt;
}

int64_t field_int(const json_t *obj, const char *name, int64_t dflt)
{
	json_t *v = field_get(obj, name);
	return json_is_integer(v) ? json_integer_value(v) : dflt;
}

bool field_bool(const json_t *obj, const char *name, bool dflt)
{
	json_t *v = field_get(obj, name);
	return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static int64_t cap_of(const struct field *f, const struct field_cap *caps)
{
	for (; caps && caps->name; caps++)
		if (!strcmp(caps->name, f->name))
			return caps->max < f->max ? caps->max : f->max;
	return f->max;
}

/* "always, on-failure or never": a choice field's values, for its message. */
static void choices_text(const char *const *c, char *buf, size_t size)
{
	size_t n = 0, len = 0;
	while (c[n])
		n++;
	buf[0] = 0;
	for (size_t i = 0; i < n && len < size; i++) {
		const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
		int w = snprintf(buf + len, size - len, "%s%s", sep, c[i]);
		len += w > 0 ? (size_t)w : 0;
	}
}

/* An array field of f->min to f->max items of kind: 0 with *n its count. */
static int check_array(const struct field *f, const json_t *v, const char *kind, size_t *n)
{
	if (!json_is_array(v))
		return errf(EINVAL, "field '%s' must be an array of %s, not %s", f->name, kind, v_type_name(v));
	*n = json_array_size(v);
	if ((int64_t)*n < f->min || (int64_t)*n > f->max)
		return errf(EINVAL, "field '%s' must have %lld to %lld items", f->name, (long long)f->min,
			    (long long)f->max);
	return 0;
}

static int check_strings(const struct field *f, const json_t *v)
{
	size_t n;
	int rc = check_array(f, v, "strings", &n);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(v, i);
		if (!json_is_string(e) || (f->item_max && json_string_length(e) > (size_t)f->item_max) ||
		    strlen(json_string_value(e)) != json_string_length(e))
			return errf(EINVAL, "field '%s': item %zu must be a string of at most %lld bytes", f->name, i,
				    (long long)f->item_max);
	}
	return 0;
}

static int check_integers(const struct field *f, const json_t *v)
{
	size_t n = json_is_array(v) ? json_array_size(v) : 0;
	if (!json_is_array(v) || (int64_t)n < f->min || (int64_t)n > f->max)
		return errf(EINVAL, "field '%s' must be an array of %lld to %lld integers", f->name, (long long)f->min,
			    (long long)f->max);
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(v, i);
		if (!json_is_integer(e) || json_integer_value(e) < 1 || json_integer_value(e) > f->item_max)
			return errf(EINVAL, "field '%s': item %zu must be an integer from 1 to %lld", f->name, i,
				    (long long)f->item_max);
	}
	return 0;
}

static int check_objects(const struct field *f, const json_t *v)
{
	size_t n;
	int rc = check_array(f, v, "objects", &n);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(v, i);
		rc = json_is_object(e) ? fields_check(f->items, e, NULL)
				       : errf(EINVAL, "field '%s': item %zu must be an object, not %s", f->name, i,
					      v_type_name(e));
		if (rc < 0) {
			char why[400];
			snprintf(why, sizeof why, "%s", errmsg());
			return errf(EINVAL, "field '%s': item %zu: %s", f->name, i, why);
		}
	}
	return 0;
}

/* Which rules of a field check_one applies (fields.h: fields_check is
 * the two halves, fields_check_shape and fields_check_rest). */
enum part { ALL, SHAPE, REST };

static bool capped(const struct field *f, const struct field_cap *caps)
{
	for (; caps && caps->name; caps++)
		if (!strcmp(caps->name, f->name))
			return true;
	return false;
}

static int check_one(const struct field *f, const json_t *obj, const struct field_cap *caps, enum part part)
{
	json_t *v = field_get(obj, f->name);
	if (f->check && part != SHAPE)
		return !v && f->required ? errf(EINVAL, "field '%s' is required", f->name) : f->check(obj, f->name);
	/* The rest: what the schema does not say (a cap; an env's names,
	 * whose pattern it does not show). */
	if (part == REST && !(v && (capped(f, caps) || f->env_names)))
		return 0;
	if (!v)
		return f->required ? errf(EINVAL, "field '%s' is required", f->name) : 0;
	const char *s = NULL;
	int64_t n;
	bool b;
	json_t *m;
	switch (f->type) {
	case FIELD_STRING: {
		int rc = v_str(obj, f->name, f->required, f->max ? (size_t)f->max : SIZE_MAX, &s);
		if (rc < 0 || !f->choices)
			return rc;
		for (const char *const *c = f->choices; *c; c++)
			if (!strcmp(*c, s))
				return 0;
		char list[200];
		choices_text(f->choices, list, sizeof list);
		return errf(EINVAL, "field '%s' is %s, not '%.20s'", f->name, list, s);
	}
	case FIELD_INTEGER:
		return v_int(obj, f->name, f->required, f->min, cap_of(f, caps), &n);
	case FIELD_BOOLEAN:
		return v_bool(obj, f->name, &b);
	case FIELD_MAP:
		return v_str_map(obj, f->name, (size_t)f->max, (size_t)f->key_max, (size_t)f->item_max,
				 f->env_names && part != SHAPE, &m);
	case FIELD_STRINGS:
		return check_strings(f, v);
	case FIELD_OBJECTS:
		return check_objects(f, v);
	case FIELD_INTEGERS:
		return check_integers(f, v);
	case FIELD_SCALAR:
		return json_is_string(v) || json_is_integer(v)
			       ? 0
			       : errf(EINVAL, "field '%s' must be a string or an integer, not %s", f->name,
				      v_type_name(v));
	default:
		return errf(EINVAL, "field '%s': a table entry of no type", f->name);
	}
}

int fields_check_one(const struct field *f, const json_t *obj, const struct field_cap *caps)
{
	return check_one(f, obj, caps, ALL);
}

static int check_all(const struct field *t, const json_t *obj, const struct field_cap *caps, enum part part)
{
	for (; t->type != FIELD_END; t++) {
		int rc = t->type == FIELD_INCLUDE ? check_all(t->items, obj, caps, part) : check_one(t, obj, caps, part);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int check(const struct field *t, const json_t *obj, const struct field_cap *caps, enum part part)
{
	const char *key;
	json_t *v;
	if (obj && !json_is_object(obj))
		return errf(EINVAL, "the body must be a JSON object, not %s", v_type_name(obj));
	json_object_foreach((json_t *)obj, key, v)
		if (part != REST && !fields_find(t, key))
			return errf(EINVAL, "unknown field '%.64s'", key);
	return check_all(t, obj, caps, part);
}

int fields_check(const struct field *t, const json_t *obj, const struct field_cap *caps)
{
	return check(t, obj, caps, ALL);
}

int fields_check_shape(const struct field *t, const json_t *obj)
{
	return check(t, obj, NULL, SHAPE);
}

int fields_check_rest(const struct field *t, const json_t *obj, const struct field_cap *caps)
{
	return check(t, obj, caps, REST);
}
