/*
 * fields: what an operation's JSON body may hold, declared once as a
 * table. The operation checks a request against its table (fields_check:
 * an unknown field refused by name, each field's type and bounds with the
 * field named in the error, the messages of validate.h), and the MCP
 * front end turns the same table into the tool's inputSchema
 * (fields_schema), so that what a tool's schema promises and what the
 * operation accepts cannot drift apart (tests/unit/unit_kilnd_ops.c
 * checks every field of every table both ways).
 *
 * What a table cannot say stays in the operation, after fields_check: a
 * bound that depends on the caller's plan (given as a field_cap), a
 * pattern (a name's letters), a rule between fields (template or
 * from_snapshot, not both).
 */
#ifndef KILN_OPS_FIELDS_H
#define KILN_OPS_FIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

enum field_type {
	FIELD_END = 0,		/* the end of a table */
	FIELD_STRING,		/* max: bytes (0: no bound); choices: the values allowed */
	FIELD_INTEGER,		/* min..max; max FIELD_NO_MAX: only the caller's cap (field_cap) */
	FIELD_BOOLEAN,
	FIELD_MAP,		/* an object of strings: max entries, key_max and item_max bytes */
	FIELD_STRINGS,		/* an array of strings: min..max items, item_max bytes each (0: no bound) */
	FIELD_INTEGERS,		/* an array of min..max integers, each 1 to item_max (ports) */
	FIELD_OBJECTS,		/* an array of min..max objects, each of the fields of items */
	FIELD_SCALAR,		/* a string or an integer (a signal: a name or a number) */
	FIELD_INCLUDE,		/* the fields of table items, here (fields two operations share) */
	/* Only in a response's table (fields_out_schema): */
	FIELD_NUMBER,		/* a number, integer or not */
	FIELD_OBJECT,		/* an object of the fields of items (NULL: of its own shape) */
};

/* No static maximum: the server's or the plan's, known at the call. */
#define FIELD_NO_MAX INT64_MAX

struct field {
	const char *name;
	enum field_type type;
	bool required;
	bool env_names;			/* FIELD_MAP: keys are shell variable names */
	bool nullable;			/* a response's: the value may be null */
	int64_t min, max;
	int64_t key_max, item_max;
	const char *const *choices;	/* FIELD_STRING: NULL-terminated */
	const struct field *items;	/* FIELD_OBJECTS, FIELD_INCLUDE */
	/* The field is checked by its own parser (the egress policy's CIDRs,
	 * volumes' entries), whose messages the REST API has always given;
	 * the table still says its type and bounds for the schema. */
	int (*check)(const json_t *obj, const char *name);
	const char *description;
};

/* A bound known only at the call (a plan's max TTL): max for the
 * integer field name. A list ends with name NULL. */
struct field_cap {
	const char *name;
	int64_t max;
};

/* obj (NULL: an empty body) against table t: -EINVAL with errmsg()
 * naming the first field that breaks it, in the table's order (unknown
 * fields first); caps (NULL: none) bound FIELD_NO_MAX integers. JSON
 * null is an absent optional field. */
int fields_check(const struct field *t, const json_t *obj, const struct field_cap *caps);

/* fields_check in two halves, for a front end that checks a request
 * before it calls the operation (MCP: a bad argument is a JSON-RPC error
 * there, a refusal of the operation the tool's answer):
 * fields_check_shape is what the table's schema says (unknown fields,
 * types, static bounds) and fields_check_rest the operation's part after
 * it, the fields' own parsers (check), the caller's caps and an env's
 * variable names. One after
 * the other they are fields_check, each rule checked once. */
int fields_check_shape(const struct field *t, const json_t *obj);
int fields_check_rest(const struct field *t, const json_t *obj, const struct field_cap *caps);

/* One field of obj against f alone (the operation's other fields are a
 * front end's to check). */
int fields_check_one(const struct field *f, const json_t *obj, const struct field_cap *caps);

/* The field of t (or of a table it includes) of that name, or NULL. */
const struct field *fields_find(const struct field *t, const char *name);

/* JSON Schema of an object of t's fields (additionalProperties false),
 * as MCP's inputSchema: type, the bounds (minimum, maximum, maxLength,
 * maxProperties, propertyNames, minItems, maxItems), enum, required,
 * description. NULL when out of memory. */
json_t *fields_schema(const struct field *t);

/* A response's table: what an object of it holds, as MCP's outputSchema
 * (and the REST API's shape: the front ends render the same object).
 * required: the key is always there; nullable: its value may be null;
 * no other key (additionalProperties false), so that an object the
 * renderer grew a key for fails a client's check until its table says
 * it. FIELD_OBJECTS and FIELD_OBJECT of items NULL: any object. NULL
 * when out of memory. */
json_t *fields_out_schema(const struct field *t);

/* The value of a field fields_check accepted: absent or null gives dflt. */
const char *field_str(const json_t *obj, const char *name, const char *dflt);
int64_t field_int(const json_t *obj, const char *name, int64_t dflt);
bool field_bool(const json_t *obj, const char *name, bool dflt);
/* The field's value, NULL when absent or null (borrowed). */
json_t *field_get(const json_t *obj, const char *name);

#endif
