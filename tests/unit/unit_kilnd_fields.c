/* Unit tests for the field tables (src/ops/fields.h): for every field of
 * every table (the operations' and each MCP tool's), the schema made
 * from it and the checks agree. A value just past each bound (one byte
 * too long, one over the maximum, one entry too many, the wrong type, a
 * required field left out) is refused by fields_check naming the field,
 * by MCP's schema check of the generated inputSchema naming the argument,
 * and, where the table is an operation's, by the operation itself; the
 * value at the bound passes both checks; the bound is in the schema. And
 * every MCP tool's inputSchema is the one made from its table. The
 * response tables (api/render.h, the tools' outputSchemas): a real object
 * of each kind (templates: as the host interface gives them), rendered,
 * has exactly the table's keys, of its types, null
 * only where the table says, and each of the table's keys shows up, null
 * too where it may be. */
#include "api/hcommon.h"
#include "api/render.h"
#include "host/guest_conn.h"
#include "hostif/hostif.h"
#include "mcp/mcp.h"
#include "ops/app.h"
#include "ops/database.h"
#include "ops/fields.h"
#include "ops/ops.h"
#include "ops/validate.h"
#include "common/err.h"
#include "schema_check.h"
#include "test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct ops_caller caller = { .hostif = NULL, .workspace = "ws_test", .max_ttl = 3600 };

/* The operations over a table, run on args that must be refused before
 * they reach the host interface (the caller has none) or the store. */
static int op_create(const json_t *a)
{
	struct sbx_row row;
	return ops_create(&caller, a, &row);
}
static int op_app_create(const json_t *a)
{
	struct app_row *row = malloc(sizeof *row);
	int rc = row ? ops_app_create(&caller, a, row) : -ENOMEM;
	free(row);
	return rc;
}
static int op_app_deploy(const json_t *a)
{
	struct app_row *row = malloc(sizeof *row);
	int rc = row ? ops_app_deploy(&caller, "app_x", a, row) : -ENOMEM;
	free(row);
	return rc;
}
static int op_db_create(const json_t *a)
{
	struct db_row d;
	char pw[DB_PASSWORD_LEN + 1];
	return ops_db_create(&caller, a, &d, pw);
}
static int op_db_update(const json_t *a)
{
	struct db_row d;
	return ops_db_update(&caller, "db_x", a, &d);
}
static int op_volume_create(const json_t *a)
{
	struct vol_row v;
	return ops_volume_create(&caller, a, &v);
}
static int op_network(const json_t *a)
{
	struct sbx_row row;
	return ops_set_network(&caller, "nope", a, &row);
}
static int op_lifecycle(const json_t *a)
{
	struct sbx_row row;
	return ops_set_lifecycle(&caller, "nope", a, &row);
}
static int op_exec(const json_t *a)
{
	struct exec_req e;
	int rc = exec_parse_json(a, 1 << 20, &e);
	free(e.argv);
	return rc;
}

static const struct {
	const char *name;
	const struct field *t;
	int (*op)(const json_t *);
} tables[] = {
	{ "ops_create_fields", ops_create_fields, op_create },
	{ "ops_lifecycle_fields", ops_lifecycle_fields, op_lifecycle },
	{ "ops_network_fields", ops_network_fields, op_network },
	{ "ops_fork_fields", ops_fork_fields, NULL },
	{ "ops_volume_entry_fields", ops_volume_entry_fields, NULL },
	{ "ops_volume_create_fields", ops_volume_create_fields, op_volume_create },
	{ "ops_app_fields", ops_app_fields, NULL },
	{ "ops_app_create_fields", ops_app_create_fields, op_app_create },
	{ "ops_app_deploy_fields", ops_app_deploy_fields, op_app_deploy },
	{ "ops_db_fields", ops_db_fields, op_db_create },
	{ "ops_db_update_fields", ops_db_update_fields, op_db_update },
	{ "exec_fields", exec_fields, op_exec },
};

/* A value of f that every check takes; i varies it (volumes are named
 * and mounted once each). */
static json_t *good(const struct field *f, int i);

static json_t *good_object(const struct field *t, int i)
{
	json_t *o = json_object();
	for (; t->type != FIELD_END; t++) {
		if (t->type == FIELD_INCLUDE) {
			json_t *inc = good_object(t->items, i);
			json_object_update(o, inc);
			json_decref(inc);
			continue;
		}
		if (t->required)
			json_object_set_new(o, t->name, good(t, i));
	}
	return o;
}

static json_t *good(const struct field *f, int i)
{
	char s[32];
	switch (f->type) {
	case FIELD_STRING:
		if (f->choices)
			return json_string(f->choices[0]);
		snprintf(s, sizeof s, "%sa%d", !strcmp(f->name, "path") ? "/" : "", i);
		return json_string(s);
	case FIELD_INTEGER:
		return json_integer(f->min);
	case FIELD_BOOLEAN:
		return json_true();
	case FIELD_MAP:
		return json_object();
	case FIELD_SCALAR:
		return json_string("TERM");
	case FIELD_STRINGS:
	case FIELD_OBJECTS:
	case FIELD_INTEGERS: {
		json_t *a = json_array();
		for (int k = 0; k < f->min; k++)
			json_array_append_new(a, f->type == FIELD_STRINGS ? json_string("10.0.0.0/8")
					      : f->type == FIELD_OBJECTS ? good_object(f->items, k) : json_integer(1));
		return a;
	}
	default:
		return json_null();
	}
}

static json_t *repeat(char c, int64_t n)
{
	char *b = malloc((size_t)n + 1);
	memset(b, c, (size_t)n);
	b[n] = 0;
	json_t *s = json_string(b);
	free(b);
	return s;
}

/* An array of n items made by item(k). */
static json_t *items(const struct field *f, int64_t n)
{
	json_t *a = json_array();
	for (int64_t k = 0; k < n; k++)
		json_array_append_new(a, f->type == FIELD_STRINGS ? json_string("10.0.0.0/8")
				      : f->type == FIELD_OBJECTS ? good_object(f->items, (int)k) : json_integer(1));
	return a;
}

static json_t *map(int64_t n, int64_t key_len, int64_t value_len)
{
	json_t *m = json_object();
	for (int64_t k = 0; k < n; k++) {
		char key[32];
		snprintf(key, sizeof key, "K%lld", (long long)k);
		json_object_set_new(m, key, repeat('v', value_len));
	}
	if (key_len) {
		json_t *k = repeat('K', key_len);
		json_object_set_new(m, json_string_value(k), json_string("v"));
		json_decref(k);
	}
	return m;
}

struct ctx {
	const char *table;
	const struct field *t;
	int (*op)(const json_t *);
	json_t *schema, *base;
	int cases;
};

/* base with f set to v (NULL: f left out): refused (want_ok false) or
 * taken by fields_check, by the schema check, and refused by the
 * operation too. Steals v. */
static void try(struct ctx *x, const struct field *f, json_t *v, bool want_ok, const char *what)
{
	json_t *a = json_deep_copy(x->base);
	if (v)
		json_object_set_new(a, f->name, v);
	else
		json_object_del(a, f->name);
	x->cases++;
	int rc = fields_check(x->t, a, NULL);
	/* The halves (MCP's front end, then the operation) agree with it. */
	int split = fields_check_shape(x->t, a);
	split = split ?: fields_check_rest(x->t, a, NULL);
	CHECK(split == rc);
	char why[512];
	snprintf(why, sizeof why, "%s", errmsg());
	bool ok = want_ok ? rc == 0 : rc == -EINVAL && strstr(why, f->name);
	if (!ok)
		printf("  %s.%s %s: fields_check %d '%s'\n", x->table, f->name, what, rc, rc ? why : "");
	CHECK(ok);
	rc = schema_check(x->schema, a, "arguments");
	snprintf(why, sizeof why, "%s", errmsg());
	ok = want_ok ? rc == 0 : rc == -EINVAL && strstr(why, f->name);
	if (!ok)
		printf("  %s.%s %s: the schema's check %d '%s'\n", x->table, f->name, what, rc, rc ? why : "");
	CHECK(ok);
	if (x->op && !want_ok && fields_check(x->t, a, NULL) < 0) {
		rc = x->op(a);
		snprintf(why, sizeof why, "%s", errmsg());
		if (rc != -EINVAL || !strstr(why, f->name))
			printf("  %s.%s %s: the operation %d '%s'\n", x->table, f->name, what, rc, why);
		CHECK(rc == -EINVAL && strstr(why, f->name));
	}
	json_decref(a);
}

static json_int_t num(const json_t *s, const char *key)
{
	json_t *v = json_object_get(s, key);
	return json_is_integer(v) ? json_integer_value(v) : -1;
}

static void field_agrees(struct ctx *x, const struct field *f)
{
	json_t *p = json_object_get(json_object_get(x->schema, "properties"), f->name);
	if (!p)
		printf("  %s.%s: not in the schema\n", x->table, f->name);
	CHECK(p != NULL);
	if (!p)
		return;
	bool listed = false;
	size_t i;
	json_t *r;
	json_array_foreach(json_object_get(x->schema, "required"), i, r)
		listed = listed || !strcmp(json_string_value(r), f->name);
	CHECK(listed == f->required);
	if (f->required)
		try(x, f, NULL, false, "left out");
	if (f->description)
		CHECK(!strcmp(json_string_value(json_object_get(p, "description")), f->description));
	switch (f->type) {
	case FIELD_STRING:
		CHECK(!strcmp(json_string_value(json_object_get(p, "type")), "string"));
		try(x, f, json_integer(5), false, "an integer");
		if (f->max) {
			CHECK(num(p, "maxLength") == f->max);
			try(x, f, repeat('a', f->max + 1), false, "one byte too long");
			if (!f->choices && strcmp(f->name, "path"))
				try(x, f, repeat('a', f->max), true, "at its length");
		} else {
			CHECK(!json_object_get(p, "maxLength"));
		}
		if (f->choices) {
			size_t n = 0;
			while (f->choices[n])
				n++;
			CHECK(json_array_size(json_object_get(p, "enum")) == n);
			try(x, f, json_string("not-a-choice"), false, "not a choice");
			for (size_t k = 0; k < n; k++)
				try(x, f, json_string(f->choices[k]), true, "a choice");
		}
		break;
	case FIELD_INTEGER:
		CHECK(!strcmp(json_string_value(json_object_get(p, "type")), "integer"));
		CHECK(num(p, "minimum") == f->min);
		try(x, f, json_string("1"), false, "a string");
		try(x, f, json_integer(f->min - 1), false, "one under the minimum");
		try(x, f, json_integer(f->min), true, "the minimum");
		if (f->max != FIELD_NO_MAX) {
			CHECK(num(p, "maximum") == f->max);
			try(x, f, json_integer(f->max + 1), false, "one over the maximum");
			try(x, f, json_integer(f->max), true, "the maximum");
		} else {
			CHECK(!json_object_get(p, "maximum"));
		}
		break;
	case FIELD_BOOLEAN:
		try(x, f, json_string("yes"), false, "a string");
		try(x, f, json_false(), true, "false");
		break;
	case FIELD_MAP: {
		CHECK(num(p, "maxProperties") == f->max);
		CHECK(num(json_object_get(p, "propertyNames"), "maxLength") == f->key_max);
		CHECK(num(json_object_get(p, "additionalProperties"), "maxLength") == f->item_max);
		try(x, f, json_array(), false, "an array");
		try(x, f, map(f->max + 1, 0, 1), false, "one entry too many");
		try(x, f, map(f->max, 0, 1), true, "as many entries as it takes");
		try(x, f, map(0, f->key_max + 1, 0), false, "a name one byte too long");
		try(x, f, map(0, f->key_max, 0), true, "a name at its length");
		try(x, f, map(1, 0, f->item_max + 1), false, "a value one byte too long");
		try(x, f, map(1, 0, f->item_max), true, "a value at its length");
		break;
	}
	case FIELD_STRINGS:
	case FIELD_OBJECTS:
		CHECK(num(p, "maxItems") == f->max);
		CHECK(num(p, "minItems") == (f->min ? f->min : -1));
		try(x, f, json_object(), false, "an object");
		try(x, f, items(f, f->max + 1), false, "one item too many");
		try(x, f, items(f, f->max), true, "as many items as it takes");
		if (f->min)
			try(x, f, items(f, f->min - 1), false, "one item too few");
		if (f->type == FIELD_STRINGS && f->item_max) {
			CHECK(num(json_object_get(p, "items"), "maxLength") == f->item_max);
			json_t *a = items(f, f->min ? f->min : 1);
			json_array_set_new(a, 0, repeat('a', f->item_max + 1));
			try(x, f, a, false, "an item one byte too long");
		}
		if (f->type == FIELD_OBJECTS)
			CHECK(json_equal(json_object_get(p, "items"), fields_schema(f->items)));
		break;
	case FIELD_SCALAR:
		try(x, f, json_true(), false, "a boolean");
		try(x, f, json_integer(9), true, "an integer");
		break;
	default:
		CHECK(!"a field type this test does not know");
	}
}

static void table_agrees(struct ctx *x, const struct field *t)
{
	for (; t->type != FIELD_END; t++)
		if (t->type == FIELD_INCLUDE)
			table_agrees(x, t->items);
		else
			field_agrees(x, t);
}

static int check_table(const char *name, const struct field *t, int (*op)(const json_t *))
{
	struct ctx x = { name, t, op, fields_schema(t), good_object(t, 0), 0 };
	CHECK(x.schema && x.base);
	/* The least the table asks (its required fields) passes both checks;
	 * a field it does not name is refused by both. */
	int rc = fields_check(t, x.base, NULL);
	if (rc < 0)
		printf("  %s: its required fields alone: %s\n", name, errmsg());
	CHECK(rc == 0);
	CHECK(schema_check(x.schema, x.base, "arguments") == 0);
	json_t *extra = json_deep_copy(x.base);
	json_object_set_new(extra, "colour", json_string("red"));
	CHECK(fields_check(t, extra, NULL) == -EINVAL && strstr(errmsg(), "unknown field 'colour'"));
	CHECK(schema_check(x.schema, extra, "arguments") == -EINVAL && strstr(errmsg(), "colour"));
	json_decref(extra);
	table_agrees(&x, t);
	json_decref(x.schema);
	json_decref(x.base);
	return x.cases;
}

static void operation_tables_agree(void)
{
	int cases = 0;
	for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
		cases += check_table(tables[i].name, tables[i].t, tables[i].op);
	printf("  %d cases\n", cases);
	CHECK(cases > 200);
}

/* Whether table t is want or includes it. */
static bool uses(const struct field *t, const struct field *want)
{
	if (t == want)
		return true;
	for (; t->type != FIELD_END; t++)
		if (t->type == FIELD_INCLUDE && uses(t->items, want))
			return true;
	return false;
}

static const struct mcp_tool *tool(const char *name)
{
	for (int i = 0; i < mcp_ntools; i++)
		if (!strcmp(mcp_tools[i].name, name))
			return &mcp_tools[i];
	for (int i = 0; i < mcp_ws_ntools; i++)
		if (!strcmp(mcp_ws_tools[i].name, name))
			return &mcp_ws_tools[i];
	return NULL;
}

/* Every tool's inputSchema is its table's (a sandbox tool's with
 * sandbox_id added), and its table agrees with the schema check; the
 * tools over an operation take that operation's table. */
static void mcp_tools_schemas_come_from_tables(void)
{
	const struct { const struct mcp_tool *t; int n; } tabs[] = { { mcp_tools, mcp_ntools },
								     { mcp_ws_tools, mcp_ws_ntools } };
	int tools = 0;
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < tabs[k].n; i++) {
			const struct mcp_tool *t = &tabs[k].t[i];
			tools++;
			CHECK(t->input != NULL);
			if (!t->input)
				continue;
			json_t *made = fields_schema(t->input), *shown = mcp_input_schema(t, NULL);
			if (t->flags & MCP_SANDBOX) {
				CHECK(json_object_get(json_object_get(shown, "properties"), "sandbox_id"));
				json_object_del(json_object_get(shown, "properties"), "sandbox_id");
				json_t *req = json_object_get(shown, "required");
				CHECK(!strcmp(json_string_value(json_array_get(req, 0)), "sandbox_id"));
				json_array_remove(req, 0);
				if (!json_array_size(req))
					json_object_del(shown, "required");
			}
			if (!json_equal(made, shown))
				printf("  %s: its inputSchema is not its table's\n", t->name);
			CHECK(json_equal(made, shown));
			/* On the per-sandbox endpoint: exactly the table's. */
			json_t *one = mcp_input_schema(t, "sbx_x");
			CHECK(json_equal(made, one));
			json_decref(one);
			json_decref(made);
			json_decref(shown);
			check_table(t->name, t->input, NULL);
		}
	printf("  %d tools\n", tools);
	CHECK(tools >= 50);
	const struct { const char *tool; const struct field *t; } over[] = {
		{ "create_sandbox", ops_create_fields }, { "fork_sandbox", ops_fork_fields },
		{ "fork_tree", ops_fork_fields }, { "set_network", ops_network_fields },
		{ "create_volume", ops_volume_create_fields }, { "attach_volume", ops_volume_entry_fields },
		{ "create_database", ops_db_fields }, { "update_database", ops_db_update_fields },
		{ "create_app", ops_app_create_fields }, { "deploy_app", ops_app_deploy_fields },
		{ "start_process", exec_fields },
	};
	for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
		const struct mcp_tool *t = tool(over[i].tool);
		if (!t || !uses(t->input, over[i].t))
			printf("  %s does not take its operation's table\n", over[i].tool);
		CHECK(t && uses(t->input, over[i].t));
	}
}

/* A bound the table leaves to the call (the plan's TTL cap) is the
 * caller's: refused over it, with the bound in the message. */
static void caps_bound_no_max_fields(void)
{
	json_t *a = json_pack("{s:i}", "ttl_seconds", 3601);
	const struct field_cap cap[] = { { "ttl_seconds", 3600 }, { NULL, 0 } };
	CHECK(fields_check(ops_create_fields, a, cap) == -EINVAL && strstr(errmsg(), "from 0 to 3600"));
	CHECK(fields_check(ops_create_fields, a, NULL) == 0);
	CHECK(op_create(a) == -EINVAL && strstr(errmsg(), "'ttl_seconds' must be from 0 to 3600"));
	json_decref(a);
}

/* fields_check in halves (MCP's front end, then the operation): the shape
 * takes what only a cap, a field's parser or an env's names refuse, and
 * the rest refuses it; the rest does not shape again (an unknown field
 * gets past it: the front end's to refuse); an operation whose request
 * no front end shaped checks it all. */
static void check_halves(void)
{
	const struct field_cap cap[] = { { "ttl_seconds", 3600 }, { NULL, 0 } };
	json_t *a = json_pack("{s:i}", "ttl_seconds", 3601);
	CHECK(fields_check_shape(ops_create_fields, a) == 0);
	CHECK(fields_check_rest(ops_create_fields, a, cap) == -EINVAL && strstr(errmsg(), "from 0 to 3600"));
	json_decref(a);
	a = json_pack("{s:[s]}", "allow_out", "not-an-address");
	CHECK(fields_check_shape(ops_create_fields, a) == 0);
	CHECK(fields_check_rest(ops_create_fields, a, NULL) == -EINVAL && strstr(errmsg(), "not-an-address"));
	json_decref(a);
	a = json_pack("{s:{s:s}}", "env", "1BAD", "x");
	CHECK(fields_check_shape(ops_create_fields, a) == 0);
	CHECK(fields_check_rest(ops_create_fields, a, NULL) == -EINVAL && strstr(errmsg(), "not a variable name"));
	json_decref(a);
	a = json_pack("{s:i,s:s}", "ttl_seconds", 60, "colour", "red");
	CHECK(fields_check_shape(ops_create_fields, a) == -EINVAL && strstr(errmsg(), "unknown field 'colour'"));
	CHECK(fields_check_rest(ops_create_fields, a, cap) == 0);
	json_decref(a);
	/* The operation shapes what no front end did. */
	struct ops_caller c = caller;
	struct vol_row v;
	a = json_pack("{s:s,s:i,s:s}", "name", "data", "size_mib", 1, "colour", "red");
	CHECK(ops_volume_create(&c, a, &v) == -EINVAL && strstr(errmsg(), "unknown field 'colour'"));
	json_decref(a);
	a = json_pack("{s:s,s:i}", "name", "BAD NAME", "size_mib", 1);
	c.shaped = a;	/* shaped or not, the name's letters are the operation's */
	CHECK(ops_volume_create(&c, a, &v) == -EINVAL && strstr(errmsg(), "name"));
	json_decref(a);
}

/* ---- responses ---------------------------------------------------------------------------------- */

/* The fields of a response table a rendered object showed: with a value,
 * and null. */
static struct shown {
	const struct field *f;
	bool value, null;
} shown[512];
static int nshown;

static struct shown *shown_of(const struct field *f)
{
	for (int i = 0; i < nshown; i++)
		if (shown[i].f == f)
			return &shown[i];
	if (nshown == (int)(sizeof shown / sizeof shown[0]))
		return &shown[0];
	shown[nshown].f = f;
	return &shown[nshown++];
}

static bool string_in(const char *const *c, const char *s)
{
	for (; *c; c++)
		if (!strcmp(*c, s))
			return true;
	return false;
}

static int out_object(const struct field *t, const json_t *v, const char *where);

/* v, the value of field f: of its type; 0, or -1 having said why. */
static int out_value(const struct field *f, const json_t *v, const char *where)
{
	size_t i;
	json_t *x;
	const char *k;
	bool ok = false;
	switch (f->type) {
	case FIELD_STRING:
		ok = json_is_string(v) && (!f->choices || string_in(f->choices, json_string_value(v)));
		break;
	case FIELD_INTEGER:
		ok = json_is_integer(v);
		break;
	case FIELD_NUMBER:
		ok = json_is_number(v);
		break;
	case FIELD_BOOLEAN:
		ok = json_is_boolean(v);
		break;
	case FIELD_SCALAR:
		ok = json_is_string(v) || json_is_integer(v);
		break;
	case FIELD_MAP:
		ok = json_is_object(v);
		json_object_foreach((json_t *)v, k, x)
			ok = ok && json_is_string(x);
		break;
	case FIELD_STRINGS:
	case FIELD_INTEGERS:
		ok = json_is_array(v);
		json_array_foreach(v, i, x)
			ok = ok && (f->type == FIELD_STRINGS ? json_is_string(x) : json_is_integer(x));
		break;
	case FIELD_OBJECT:
		ok = json_is_object(v) && (!f->items || out_object(f->items, v, where) == 0);
		break;
	case FIELD_OBJECTS:
		ok = json_is_array(v);
		json_array_foreach(v, i, x)
			ok = ok && json_is_object(x) && (!f->items || out_object(f->items, x, where) == 0);
		break;
	default:
		break;
	}
	if (!ok)
		printf("  %s.%s: %s is not what its table says\n", where, f->name, v_type_name(v));
	return ok ? 0 : -1;
}

/* v against response table t: its keys are t's, each of its type, null
 * only where nullable, every required one there. */
static int out_object(const struct field *t, const json_t *v, const char *where)
{
	const char *k;
	json_t *x;
	int rc = 0;
	json_object_foreach((json_t *)v, k, x) {
		const struct field *f = fields_find(t, k);
		if (!f) {
			printf("  %s: key '%s' is not in its table\n", where, k);
			rc = -1;
			continue;
		}
		struct shown *s = shown_of(f);
		if (json_is_null(x)) {
			s->null = true;
			if (!f->nullable) {
				printf("  %s.%s: null, and its table says it is never\n", where, k);
				rc = -1;
			}
		} else {
			s->value = true;
			rc |= out_value(f, x, where);
		}
	}
	for (const struct field *f = t; f->type != FIELD_END; f++)
		if (f->required && !json_object_get(v, f->name)) {
			printf("  %s: no '%s', which its table says is always there\n", where, f->name);
			rc = -1;
		}
	return rc;
}

/* Every field of t (and of the tables it holds) was shown with a value,
 * and null where nullable; but the names in not_here (those only a store
 * or a guest gives: tests/sdk/mcp and tests/e2e see them). */
static int all_shown(const struct field *t, const char *where, const char *const *not_here)
{
	int rc = 0;
	for (const struct field *f = t; f->type != FIELD_END; f++) {
		if (not_here && string_in(not_here, f->name))
			continue;
		struct shown *s = shown_of(f);
		if (!s->value || (f->nullable && !s->null)) {
			printf("  %s.%s: no rendered object showed it %s\n", where, f->name,
			       s->value ? "null" : "with a value");
			rc = -1;
		}
		if (f->items && (f->type == FIELD_OBJECT || f->type == FIELD_OBJECTS))
			rc |= all_shown(f->items, where, not_here);
	}
	return rc;
}

static int check_out(const struct field *t, json_t *v, const char *where)
{
	int rc = v ? out_object(t, v, where) : -1;
	json_decref(v);
	return rc;
}

static void sandbox_row(struct sbx_row *r, bool full)
{
	memset(r, 0, sizeof *r);
	snprintf(r->id, sizeof r->id, "sbx_test");
	snprintf(r->template, sizeof r->template, "base");
	r->state = full ? SBX_FAILED : SBX_RUNNING;
	r->vcpus = 1, r->memory_mib = 256;
	if (full) {
		r->created_ms = r->active_ms = 1700000000000;
		r->ready_ms = 12.5;
		r->ttl_seconds = 60;
		r->disk_mib = 64;
		snprintf(r->parent, sizeof r->parent, "sbx_parent");
		snprintf(r->snapshot, sizeof r->snapshot, "snap_x");
		snprintf(r->error, sizeof r->error, "its VMM died");
		r->metadata = (char *)"{\"by\":\"test\"}";
	} else {
		r->net_policy = (char *)"not a policy";	/* what render shows as null */
	}
}

static int vol_att_one(void *ctx, const char *ws, const char *id, struct vol_row *out, store_att_fn *fn,
		       void *fctx)
{
	(void)ctx, (void)ws, (void)id, (void)out;
	struct vol_att a = { .slot = 1, .read_only = true };
	snprintf(a.sandbox, sizeof a.sandbox, "sbx_test");
	snprintf(a.path, sizeof a.path, "/data");
	return fn(fctx, &a);
}

static int vol_host_gone(void *ctx, const char *ws, const char *id, struct vol_row *out, store_att_fn *fn,
			 void *fctx)
{
	(void)ctx, (void)ws, (void)id, (void)out, (void)fn, (void)fctx;
	return errf(EHOSTUNREACH, "its host does not answer");
}

/* The host interface's templates, for the templates' table: a built one
 * with a snapshot, a start command, its port and its disk; one not built. */
static int tmpl_each(void *ctx, hostif_template_fn *fn, void *fctx)
{
	(void)ctx;
	struct hostif_template t = { .name = "minimal", .description = "busybox", .vcpus = 1, .memory_mib = 256,
				     .disk_mib = 64, .built = true, .version = 2, .built_ms = 1700000000000,
				     .snapshot = true, .start = "httpd -f", .ready_port = 8000 };
	int rc = fn(fctx, &t);
	if (rc)
		return rc < 0 ? rc : 0;
	struct hostif_template n = { .name = "base", .description = "Debian", .vcpus = 2, .memory_mib = 512 };
	rc = fn(fctx, &n);
	return rc < 0 ? rc : 0;
}
static const struct hostif_ops tmpl_ops = { .name = "fields", .templates = tmpl_each };

static void responses_match_tables(void)
{
	int rc = 0;
	struct sbx_row r;
	for (int full = 0; full < 2; full++) {
		sandbox_row(&r, full);
		rc |= check_out(render_sandbox_fields, render_sandbox(&r), "sandbox");
	}
	rc |= all_shown(render_sandbox_fields, "sandbox", NULL);

	struct snap_row sn = { .id = "snap_x", .sandbox = "sbx_test", .template = "base", .vcpus = 1 };
	rc |= check_out(render_snapshot_fields, render_snapshot(&sn), "snapshot");
	sn.created_ms = 1700000000000;
	rc |= check_out(render_snapshot_fields, render_snapshot(&sn), "snapshot");
	rc |= all_shown(render_snapshot_fields, "snapshot", NULL);

	rc |= check_out(render_exec_result_fields, render_exec_result("hi\n", 3, NULL, 0, 0, 0, false, 1.5, false),
			"exec_result");
	rc |= check_out(render_exec_result_fields, render_exec_result(NULL, 0, "\xff", 1, -1, 9, true, 2, true),
			"exec_result");
	rc |= all_shown(render_exec_result_fields, "exec_result", NULL);

	/* A volume its host lists an attachment of, and one whose host is gone. */
	struct hostif_ops vo = { .volume_get = vol_att_one };
	struct hostif hi = { &vo, NULL };
	struct ops_caller vc = { .hostif = &hi, .workspace = "ws_test" };
	struct vol_row v = { .id = "vol_x", .workspace = "ws_test", .name = "data", .size_mib = 64,
			     .created_ms = 1700000000000 };
	rc |= check_out(render_volume_fields, render_volume(ops_volume_json(&vc, &v)), "volume");
	vo.volume_get = vol_host_gone;
	v.created_ms = 0;
	rc |= check_out(render_volume_fields, render_volume(ops_volume_json(&vc, &v)), "volume");
	rc |= all_shown(render_volume_fields, "volume", NULL);

	/* An app that failed (no sandbox to ask its host about), bare and full. */
	static struct app_row a;
	memset(&a, 0, sizeof a);
	snprintf(a.id, sizeof a.id, "app_x");
	snprintf(a.name, sizeof a.name, "web");
	snprintf(a.restart, sizeof a.restart, "always");
	snprintf(a.state, sizeof a.state, "failed");
	a.port = 8000;
	rc |= check_out(render_app_fields, render_app(&caller, &a, NULL), "app");
	snprintf(a.template, sizeof a.template, "base");
	snprintf(a.snapshot, sizeof a.snapshot, "snap_x");
	snprintf(a.command, sizeof a.command, "httpd");
	snprintf(a.env, sizeof a.env, "{\"WHO\":\"me\"}");
	snprintf(a.sandbox, sizeof a.sandbox, "sbx_test");
	snprintf(a.reason, sizeof a.reason, "it exited");
	a.created_ms = a.updated_ms = 1700000000000;
	rc |= check_out(render_app_fields, render_app(&caller, &a, "http://app-x.test/"), "app");
	rc |= all_shown(render_app_fields, "app", NULL);

	/* A database being made (no sandbox yet; no store: no events or
	 * certificate, which tests/e2e/90 sees), with and without its
	 * password, schedule and external port. */
	struct db_row d = { .id = "db_x", .workspace = "ws_test", .name = "main" };
	rc |= check_out(render_database_fields, render_database(&caller, &d, NULL), "database");
	snprintf(d.from_backup, sizeof d.from_backup, "snap_x");
	d.created_ms = 1700000000000;
	d.backup_interval_s = 3600, d.next_backup_ms = 1700000360000, d.external_port = 15432;
	rc |= check_out(render_database_fields, render_database(&caller, &d, "secret"), "database");
	static const char *const db_store_only[] = { "tls_certificate", "tls_certificate_sha256", "ts_ms", "kind", "text",
						     NULL };
	rc |= all_shown(render_database_fields, "database", db_store_only);

	struct db_backup_row b = { .id = "snap_b", .database = "db_x", .created_ms = 1700000000000 };
	rc |= check_out(render_db_backup_fields, ops_db_backup_json(&b), "db_backup");
	snprintf(b.kind, sizeof b.kind, "scheduled");
	rc |= check_out(render_db_backup_fields, ops_db_backup_json(&b), "db_backup");
	rc |= all_shown(render_db_backup_fields, "db_backup", NULL);

	/* A directory's entries: a symlink, and a name that is not UTF-8. */
	struct guest_stat st = { .name = "a", .mode = 0120777, .size = 1, .mtime_ns = 1700000000000000000 };
	snprintf(st.link, sizeof st.link, "b");
	rc |= check_out(render_dir_entry_fields, stat_json(&st, "name", st.name), "dir_entry");
	memset(&st, 0, sizeof st);
	st.mode = 0100644;
	snprintf(st.name, sizeof st.name, "\xff");
	rc |= check_out(render_dir_entry_fields, stat_json(&st, "name", st.name), "dir_entry");
	rc |= all_shown(render_dir_entry_fields, "dir_entry", NULL);

	/* Templates (GET /v1/templates, MCP list_templates), as the host
	 * interface gives them: one built with everything, one not built. */
	struct hostif thi = { &tmpl_ops, NULL };
	json_t *tl = NULL;
	CHECK(templates_list(&thi, "ws_fields", &tl) == 0);
	json_t *ta = json_object_get(tl, "templates");
	CHECK(json_array_size(ta) == 2);
	for (size_t i = 0; i < json_array_size(ta); i++)
		rc |= check_out(render_template_fields, json_incref(json_array_get(ta, i)), "template");
	json_decref(tl);
	rc |= all_shown(render_template_fields, "template", NULL);
	CHECK(rc == 0);

	/* The schema says the same as the table: a rendered sandbox passes
	 * it, one with a key the table lacks does not. */
	json_t *schema = fields_out_schema(render_sandbox_fields);
	sandbox_row(&r, true);
	json_t *j = render_sandbox(&r);
	CHECK(schema && json_is_false(json_object_get(schema, "additionalProperties")));
	CHECK(json_object_size(json_object_get(schema, "properties")) == json_object_size(j) &&
	      json_array_size(json_object_get(schema, "required")) == json_object_size(j) - 1);
	json_t *types = json_object_get(json_object_get(json_object_get(schema, "properties"), "parent_id"), "type");
	CHECK(json_is_array(types) && json_array_size(types) == 2);
	json_decref(j);
	json_decref(schema);
}

int main(void)
{
	int failures = 0;
	RUN(operation_tables_agree);
	RUN(mcp_tools_schemas_come_from_tables);
	RUN(caps_bound_no_max_fields);
	RUN(check_halves);
	RUN(responses_match_tables);
	return failures ? 1 : 0;
}
