/*
 * fields_schema: a field table (fields.h) as JSON Schema: an operation's
 * request table as the inputSchema of the MCP tool over it (fields_schema),
 * a response's table as the outputSchema of the tools that return it
 * (fields_out_schema). Every bound a request table holds is written out (a
 * client or model sees what the operation will refuse); a FIELD_NO_MAX
 * integer has no maximum (the caller's plan sets it). A response's table
 * is beside the code that renders the object (api/render.h), so the REST
 * API's shape and the schema a client checks a tool's result by are one
 * declaration (tests/unit/unit_kilnd_fields.c renders objects of each
 * kind against their tables).
 */
#include "ops/fields.h"

#include <string.h>

typedef json_t *field_fn(const struct field *f);
static json_t *field_schema(const struct field *f);
static json_t *out_field(const struct field *f);

/* t's fields (included tables' too), each as one makes it, into props,
 * required names into req. */
static int add_fields(const struct field *t, field_fn *one, json_t *props, json_t *req)
{
	for (; t->type != FIELD_END; t++) {
		if (t->type == FIELD_INCLUDE) {
			if (add_fields(t->items, one, props, req) < 0)
				return -1;
			continue;
		}
		json_t *s = one(t);
		if (!s || json_object_set_new(props, t->name, s) < 0)
			return -1;
		if (t->required && json_array_append_new(req, json_string(t->name)) < 0)
			return -1;
	}
	return 0;
}

/* An object of t's fields and no others. */
static json_t *object_schema(const struct field *t, field_fn *one)
{
	json_t *props = json_object(), *req = json_array();
	json_t *s = json_pack("{s:s,s:b}", "type", "object", "additionalProperties", 0);
	if (!props || !req || !s || add_fields(t, one, props, req) < 0) {
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

json_t *fields_schema(const struct field *t)
{
	return object_schema(t, field_schema);
}

json_t *fields_out_schema(const struct field *t)
{
	return object_schema(t, out_field);
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

/* A FIELD_STRING's choices, null too where nullable (a response's). */
static json_t *enum_of(const struct field *f)
{
	json_t *e = json_array();
	for (const char *const *c = f->choices; *c; c++)
		json_array_append_new(e, json_string(*c));
	if (f->nullable)
		json_array_append_new(e, json_null());
	return e;
}

static json_t *field_schema(const struct field *f)
{
	json_t *s = NULL;
	switch (f->type) {
	case FIELD_STRING:
		s = string_schema(f->max);
		if (s && f->choices)
			json_object_set_new(s, "enum", enum_of(f));
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

/* ---- responses: types, null where nullable, no bounds ----------------------------------------- */

static json_t *any_object(const struct field *items)
{
	return items ? fields_out_schema(items) : json_pack("{s:s}", "type", "object");
}

static json_t *out_field(const struct field *f)
{
	json_t *s = NULL;
	switch (f->type) {
	case FIELD_STRING:
		s = json_pack("{s:s}", "type", "string");
		if (s && f->choices)
			json_object_set_new(s, "enum", enum_of(f));
		break;
	case FIELD_INTEGER:
		s = json_pack("{s:s}", "type", "integer");
		break;
	case FIELD_NUMBER:
		s = json_pack("{s:s}", "type", "number");
		break;
	case FIELD_BOOLEAN:
		s = json_pack("{s:s}", "type", "boolean");
		break;
	case FIELD_MAP:
		s = json_pack("{s:s,s:{s:s}}", "type", "object", "additionalProperties", "type", "string");
		break;
	case FIELD_STRINGS:
		s = json_pack("{s:s,s:{s:s}}", "type", "array", "items", "type", "string");
		break;
	case FIELD_INTEGERS:
		s = json_pack("{s:s,s:{s:s}}", "type", "array", "items", "type", "integer");
		break;
	case FIELD_OBJECTS:
		s = json_pack("{s:s,s:o}", "type", "array", "items", any_object(f->items));
		break;
	case FIELD_OBJECT:
		s = any_object(f->items);
		break;
	case FIELD_SCALAR:
		s = json_pack("{s:[s,s]}", "type", "string", "integer");
		break;
	default:
		break;
	}
	if (s && f->nullable) {
		/* "type": "string" becomes ["string", "null"] */
		json_t *ty = json_object_get(s, "type");
		json_t *a = json_is_array(ty) ? json_incref(ty) : json_pack("[O]", ty);
		json_array_append_new(a, json_string("null"));
		json_object_set_new(s, "type", a);
	}
	if (s && f->description)
		json_object_set_new(s, "description", json_string(f->description));
	return s;
}
