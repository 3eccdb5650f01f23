/* Unit tests for src/common/json.c and buf.c. */
#include "common/strbuf.h"
#include "common/err.h"
#include "common/json.h"
#include "test.h"

#include <string.h>

static struct json *parse(const char *s)
{
	return json_parse(s, strlen(s));
}

static void json_parses_objects(void)
{
	struct json *j = parse(" {\"cmd\":\"pause\", \"n\": -12, \"ok\": true, \"x\": null, \"a\": [1, 2.5e3, {}]} ");
	CHECK(j && j->type == JSON_OBJECT);
	CHECK(strcmp(json_get_str(j, "cmd"), "pause") == 0);
	int64_t n = 0;
	bool b = false;
	CHECK(json_get_int(j, "n", &n) && n == -12);
	CHECK(json_get_bool(j, "ok", &b) && b);
	CHECK(json_get(j, "x")->type == JSON_NULL);
	struct json *a = json_get(j, "a");
	CHECK(a && a->type == JSON_ARRAY && a->child->number == 1 && a->child->next->number == 2500);
	CHECK(!json_get_str(j, "n"));          /* wrong type */
	CHECK(!json_get(j, "missing"));
	json_free(j);
}

static void json_decodes_strings(void)
{
	struct json *j = parse("\"a\\n\\\"\\u00e9\\ud83d\\ude00/\"");
	CHECK(j && j->type == JSON_STRING);
	CHECK(j && strcmp(j->string, "a\n\"\xc3\xa9\xf0\x9f\x98\x80/") == 0);
	json_free(j);
}

static void json_rejects_bad_input(void)
{
	const char *bad[] = {
		"", "{", "{\"a\":}", "{\"a\" 1}", "[1,]", "01", "1.", "-", "tru", "\"\\x\"",
		"\"\\u12\"", "\"\\ud800\"", "\"\\u0000\"", "\"a\nb\"", "{} {}", "{\"a\":1,}", "nan",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct json *j = parse(bad[i]);
		if (j)
			printf("  accepted bad input '%s'\n", bad[i]);
		CHECK(j == NULL);
		json_free(j);
	}
	CHECK(strncmp(errmsg(), "json:", 5) == 0);
}

static void json_bounds_depth(void)
{
	char deep[200];
	memset(deep, '[', 100);
	memset(deep + 100, ']', 100);
	CHECK(json_parse(deep, 200) == NULL);
	CHECK(strstr(errmsg(), "deeper") != NULL);
	struct json *ok = json_parse(deep + 100 - 20, 40);   /* 20 levels is fine */
	CHECK(ok != NULL);
	json_free(ok);
}

static void buf_escapes_json(void)
{
	struct strbuf b;
	strbuf_init(&b);
	strbuf_json_str(&b, "q\"\\\n\x01");
	CHECK(strcmp(b.data, "\"q\\\"\\\\\\n\\u0001\"") == 0);
	strbuf_printf(&b, "%d-%s", 42, "x");
	CHECK(b.len == strlen(b.data) && strstr(b.data, "42-x"));
	/* Round trip through the parser. */
	strbuf_reset(&b);
	strbuf_json_str(&b, "tab\there \x7f end");
	struct json *j = json_parse(b.data, b.len);
	CHECK(j && strcmp(j->string, "tab\there \x7f end") == 0);
	json_free(j);
	strbuf_free(&b);
}

int main(void)
{
	int failures = 0;
	RUN(json_parses_objects);
	RUN(json_decodes_strings);
	RUN(json_rejects_bad_input);
	RUN(json_bounds_depth);
	RUN(buf_escapes_json);
	return failures ? 1 : 0;
}
