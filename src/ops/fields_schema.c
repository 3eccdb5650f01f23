/*
 * fields_schema: an operation's field table (fields.h) as JSON Schema, the
 * inputSchema of the MCP tool over it. Every bound the table holds is
 * written out (a client or model sees what the operation will refuse);
 * a FIELD_NO_MAX integer has no maximum (the caller's plan sets it).
 */
#include "ops/fields.h"

#include <string.h>

static json_t *field_schema(const struct field *f);

/* t's fields (included tables' too) into props, required names into req. */
static int add_fields(const struct field *t, json_t *props, json_t *req)
{
	for (; t->type != FIELD_END; t++) {
		if (t->type == FIELD_INCLUDE) {
			if (add_fields(t->items, props, req) < 0)
				return -1;
			continue;
		}
		json_t *s = field_schema(t);
		if (!s || json_object_set_new(props, t->name, s) < 0)
			return -1;
		if (t->required && json_array_append_new(req, json_string(t->name)) < 0)
			return -1;
	}
	return 0;
}

json_t *fields_schema(const struct field *t)
{
	json_t *props = json_object(), *req = json_array();
	json_t *s = json_pack("{s:s,s:b}", "type", "object", "additionalProperties", 0);
	if (!props || !req || !s || add_fields(t, props, req) < 0) {
		json_decref(props);
		json_decref(req);
		json_decref(s);
		return NULL;
	}
	if (json_array_size(req))
		json_object_set_new(s, "required", req);
	else
		json_decref(req);
	json_object_set_new(s, "properties", props);
	return s;
}

static void set_int(json_t *s, const char *key, int64_t v)
{
	json_object_set_new(s, key, json_integer((json_int_t)v));
}

static json_t *string_schema(int64_t max)
{
	json_t *s = json_pack("{s:s}", "type", "string");
	if (s && max)
		set_int(s, "maxLength", max);
	return s;
}

static json_t *field_schema(const struct field *f)
{
	json_t *s = NULL;
	switch (f->type) {
	case FIELD_STRING:
		s = string_schema(f->max);
		if (s && f->choices) {
			json_t *e = json_array();
			for (const char *const *c = f->choices; *c; c++)
				json_array_append_new(e, json_string(*c));
			json_object_set_new(s, "enum", e);
		}
		break;
	case FIELD_INTEGER:
		s = json_pack("{s:s}", "type", "integer");
		if (s) {
			set_int(s, "minimum", f->min);
			if (f->max != FIELD_NO_MAX)
				set_int(s, "maximum", f->max);
		}
		break;
	case FIELD_BOOLEAN:
		s = json_pack("{s:s}", "type", "boolean");
		break;
	case FIELD_MAP:
		s = json_pack("{s:s,s:I,s:{s:i,s:I},s:o}", "type", "object", "maxProperties", (json_int_t)f->max,
			      "propertyNames", "minLength", 1, "maxLength", (json_int_t)f->key_max,
			      "additionalProperties", string_schema(f->item_max));
		break;
	case FIELD_STRINGS:
	case FIELD_OBJECTS:
		s = json_pack("{s:s,s:I,s:o}", "type", "array", "maxItems", (json_int_t)f->max, "items",
			      f->type == FIELD_STRINGS ? string_schema(f->item_max) : fields_schema(f->items));
		if (s && f->min)
			set_int(s, "minItems", f->min);
		break;
	case FIELD_INTEGERS:
		s = json_pack("{s:s,s:I,s:{s:s,s:i,s:I}}", "type", "array", "maxItems", (json_int_t)f->max, "items",
			      "type", "integer", "minimum", 1, "maximum", (json_int_t)f->item_max);
		if (s && f->min)
			set_int(s, "minItems", f->min);
		break;
	case FIELD_SCALAR:
		s = json_pack("{s:[s,s]}", "type", "string", "integer");
		break;
	default:
		break;
	}
	if (s && f->description)
		json_object_set_new(s, "description", json_string(f->description));
	return s;
}
