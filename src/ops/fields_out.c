/*
 * fields_out: a response's field table (fields.h) as JSON Schema, the
 * outputSchema of the MCP tools that return it. The table is beside the
 * code that renders the object (api/render.h), so that the REST
 * API's shape and the schema a client checks a tool's result by are one
 * declaration (tests/unit/unit_kilnd_fields.c renders one object of each
 * kind against its table).
 */
#include "ops/fields.h"

static json_t *out_field(const struct field *f);

static int add_out(const struct field *t, json_t *props, json_t *req)
{
	for (; t->type != FIELD_END; t++) {
		if (t->type == FIELD_INCLUDE) {
			if (add_out(t->items, props, req) < 0)
				return -1;
			continue;
		}
		json_t *s = out_field(t);
		if (!s || json_object_set_new(props, t->name, s) < 0)
			return -1;
		if (t->required && json_array_append_new(req, json_string(t->name)) < 0)
			return -1;
	}
	return 0;
}

json_t *fields_out_schema(const struct field *t)
{
	json_t *props = json_object(), *req = json_array();
	json_t *s = json_pack("{s:s,s:b}", "type", "object", "additionalProperties", 0);
	if (!props || !req || !s || add_out(t, props, req) < 0) {
		json_decref(props);
		json_decref(req);
		json_decref(s);
		return NULL;
	}
	json_object_set_new(s, "required", req);
	json_object_set_new(s, "properties", props);
	return s;
}

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
		if (s && f->choices) {
			json_t *e = json_array();
			for (const char *const *c = f->choices; *c; c++)
				json_array_append_new(e, json_string(*c));
			if (f->nullable)
				json_array_append_new(e, json_null());
			json_object_set_new(s, "enum", e);
		}
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
