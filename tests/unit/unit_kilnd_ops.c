/* Unit tests for the operations layer (src/ops/ops.c): what create and
 * fork refuse, with which error, before anything reaches the host agent
 * (no host exists here: a request that got through would crash the test,
 * which is a failure too), and that MCP's create_sandbox schema offers
 * exactly the fields REST's create takes. */
#include "ops/ops.h"
#include "mcp/mcp.h"
#include "common/err.h"
#include "test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct ops_caller caller = { .host = NULL, .workspace = "ws_test", .max_ttl = 3600 };

/* ops_create on args (JSON text): its result, errmsg() kept in why. */
static char why[512];
static int create(const char *text)
{
	json_t *args = json_loads(text, 0, NULL);
	if (!args)
		return -9999;
	struct sandbox *sb = NULL;
	int rc = ops_create(&caller, args, &sb);
	snprintf(why, sizeof why, "%s", errmsg());
	json_decref(args);
	return rc;
}

static void create_refuses_bad_arguments(void)
{
	CHECK(create("{\"tempalte\":\"base\"}") == -EINVAL && strstr(why, "tempalte"));
	CHECK(create("{\"template\":\"base\",\"from_snapshot\":\"snap_x\"}") == -EINVAL &&
	      strstr(why, "not both"));
	/* An unknown template (one named "../etc" too) is looked up among
	 * the host's templates and answered 404 with their list: e2e 60. */
	CHECK(create("{\"template\":7}") == -EINVAL && strstr(why, "template"));
	/* The server's cap, not a number written into a front end. */
	CHECK(create("{\"ttl_seconds\":3601}") == -EINVAL && strstr(why, "ttl_seconds") &&
	      strstr(why, "3600"));
	CHECK(create("{\"ttl_seconds\":-1}") == -EINVAL);
	CHECK(create("{\"from_snapshot\":\"not-an-id\"}") == -ENOENT && strstr(why, "not-an-id"));
	CHECK(create("{\"metadata\":{\"a\":1}}") == -EINVAL && strstr(why, "metadata"));
	CHECK(create("{\"env\":[\"A=1\"]}") == -EINVAL && strstr(why, "env"));
	CHECK(create("{\"allow_out\":[\"300.1.2.3/8\"]}") == -EINVAL && strstr(why, "300.1.2.3"));
	CHECK(create("{\"allow_internet\":\"no\"}") == -EINVAL && strstr(why, "allow_internet"));
	/* Bounds from ops.h: one key over the metadata limit. */
	char *big = malloc(64 * 1024);
	int n = snprintf(big, 64 * 1024, "{\"metadata\":{");
	for (int i = 0; i <= OPS_METADATA_MAX; i++)
		n += snprintf(big + n, 64 * 1024 - n, "%s\"k%d\":\"v\"", i ? "," : "", i);
	snprintf(big + n, 64 * 1024 - n, "}}");
	CHECK(create(big) == -EINVAL && strstr(why, "metadata"));
	free(big);
}

static int fork_count(const char *text)
{
	json_t *args = json_loads(text, 0, NULL);
	struct ops_forked f;
	int rc = ops_fork(&caller, "sbx_whatever", args, false, &f);
	snprintf(why, sizeof why, "%s", errmsg());
	json_decref(args);
	return rc == -EINVAL && f.made == 0 ? 0 : -1;
}

static void fork_checks_count_before_the_sandbox(void)
{
	CHECK(fork_count("{\"count\":0}") == 0 && strstr(why, "count"));
	CHECK(fork_count("{\"count\":65}") == 0 && strstr(why, "64"));
	CHECK(fork_count("{\"count\":\"2\"}") == 0 && strstr(why, "count"));
	CHECK(HOST_FORK_MAX == 64);
}

static void sandbox_ids_are_checked(void)
{
	struct sandbox *sb = NULL;
	CHECK(ops_sandbox(&caller, "nope", &sb) == -ENOENT && strstr(errmsg(), "nope") && !sb);
	CHECK(ops_sandbox(&caller, NULL, &sb) == -ENOENT && !sb);
	CHECK(ops_sandbox(&caller, "snap_abcdefghijklmnopqrst", &sb) == -ENOENT && !sb);
}

/* MCP's create_sandbox lists exactly the fields ops_create takes: the
 * two front ends cannot drift apart on what a create accepts. */
static void mcp_create_schema_matches_ops(void)
{
	const struct mcp_tool *t = NULL;
	for (int i = 0; i < mcp_ntools; i++)
		if (!strcmp(mcp_tools[i].name, "create_sandbox"))
			t = &mcp_tools[i];
	CHECK(t != NULL);
	if (!t)
		return;
	json_t *schema = json_loads(t->input_schema, 0, NULL);
	json_t *props = json_object_get(schema, "properties");
	CHECK(json_is_object(props));
	size_t n = 0;
	for (const char *const *f = ops_create_fields; *f; f++, n++)
		if (!json_object_get(props, *f)) {
			printf("  create_sandbox's schema lacks '%s'\n", *f);
			CHECK(json_object_get(props, *f));
		}
	CHECK(json_object_size(props) == n);
	/* No cap of its own on ttl_seconds: the server's applies. */
	CHECK(!json_object_get(json_object_get(props, "ttl_seconds"), "maximum"));
	json_t *fork_schema = NULL;
	for (int i = 0; i < mcp_ntools; i++)
		if (!strcmp(mcp_tools[i].name, "fork_sandbox"))
			fork_schema = json_loads(mcp_tools[i].input_schema, 0, NULL);
	json_t *count = json_object_get(json_object_get(fork_schema, "properties"), "count");
	CHECK(json_integer_value(json_object_get(count, "maximum")) == HOST_FORK_MAX);
	json_decref(fork_schema);
	json_decref(schema);
}

int main(void)
{
	int failures = 0;
	RUN(create_refuses_bad_arguments);
	RUN(fork_checks_count_before_the_sandbox);
	RUN(sandbox_ids_are_checked);
	RUN(mcp_create_schema_matches_ops);
	return failures ? 1 : 0;
}
