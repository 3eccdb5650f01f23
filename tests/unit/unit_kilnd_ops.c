/* Unit tests for the operations layer (src/ops/ops.c): what create and
 * fork refuse, with which error, before anything reaches the host
 * interface (caller has none: a request that got through would crash the
 * test, which is a failure too); what the operations ask of the host
 * interface when they pass (a fake hostif that records the calls); and
 * that MCP's create_sandbox schema offers exactly the fields REST's
 * create takes (and set_network those of PUT .../network). */
#include "ops/ops.h"
#include "ops/app.h"
#include "ops/dbcert.h"
#include "ops/plan.h"
#include "mcp/mcp.h"
#include "common/err.h"
#include "store/store.h"
#include "store/store_apps.h"
#include "test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct ops_caller caller = { .hostif = NULL, .workspace = "ws_test", .max_ttl = 3600 };

/* ops_create on args (JSON text): its result, errmsg() kept in why. */
static char why[512];
static int create(const char *text)
{
	json_t *args = json_loads(text, 0, NULL);
	if (!args)
		return -9999;
	struct sbx_row row;
	int rc = ops_create(&caller, args, &row);
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
	/* disk_mib: a whole number of 1 to 1048576 MiB (the template's size
	 * and the plan's limit are checked after: e2e 80). */
	CHECK(create("{\"disk_mib\":\"lots\"}") == -EINVAL && strstr(why, "disk_mib"));
	CHECK(create("{\"disk_mib\":0}") == -EINVAL && strstr(why, "disk_mib"));
	CHECK(create("{\"disk_mib\":1048577}") == -EINVAL && strstr(why, "disk_mib"));
	CHECK(create("{\"disk_mib\":1.5}") == -EINVAL && strstr(why, "disk_mib"));
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
	struct sbx_row row;
	CHECK(ops_sandbox(&caller, "nope", &row) == -ENOENT && strstr(errmsg(), "nope"));
	CHECK(ops_sandbox(&caller, NULL, &row) == -ENOENT);
	CHECK(ops_sandbox(&caller, "snap_abcdefghijklmnopqrst", &row) == -ENOENT);
}

static void promoted_none(void *ctx, const char *id, bool is_parent, int rc)
{
	(void)ctx, (void)id, (void)is_parent;
	CHECK(rc == 0);
}

/* ---- through a fake host interface ---------------------------------------------------- */

/* A host of three sandboxes of ws_test: a parent and its two fork
 * children; it records what was asked. */
static struct fake {
	char calls[512];		/* "get(ID,touch) delete(ID) ..." */
	int deleted;
} fake;

static const char *const fake_ids[] = { "sbx_parent0000000000000", "sbx_childa0000000000000",
					"sbx_childb0000000000000" };

static void fake_note(const char *fmt, const char *id, int flag)
{
	size_t n = strlen(fake.calls);
	snprintf(fake.calls + n, sizeof fake.calls - n, fmt, id, flag);
}

static void fake_row(int i, struct sbx_row *r)
{
	memset(r, 0, sizeof *r);
	snprintf(r->id, sizeof r->id, "%s", fake_ids[i]);
	snprintf(r->workspace, sizeof r->workspace, "ws_test");
	snprintf(r->parent, sizeof r->parent, "%s", i ? fake_ids[0] : "");
	r->state = SBX_RUNNING;
}

static int fake_find(const char *ws, const char *id)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(ws, "ws_test") && !strcmp(id, fake_ids[i]))
			return i;
	return errf(ENOENT, "sandbox %s not found", id);
}

static int fake_get(void *ctx, const char *ws, const char *id, bool touch, struct sbx_row *out)
{
	(void)ctx;
	int i = fake_find(ws, id);
	fake_note("get(%s,%d) ", id, touch);
	if (i >= 0 && out)
		fake_row(i, out);
	return i < 0 ? i : 0;
}

static int fake_each(void *ctx, const char *ws, hostif_row_fn *fn, void *fctx)
{
	(void)ctx, (void)ws;
	int rc = 0;
	for (int i = 0; i < 3 && rc == 0; i++) {
		struct sbx_row r;
		fake_row(i, &r);
		rc = fn(fctx, &r);
	}
	return rc;
}

static int fake_delete(void *ctx, const char *ws, const char *id)
{
	(void)ctx;
	int i = fake_find(ws, id);
	fake_note("delete(%s) ", id, 0);
	fake.deleted += i >= 0;
	return i < 0 ? i : 0;
}

static int fake_fork(void *ctx, const struct hostif_fork *req, struct sbx_row *children, int *made)
{
	(void)ctx;
	fake_note("fork(%s,%d) ", req->id, req->count);
	*made = 0;
	int i = fake_find(req->workspace, req->id);
	if (i < 0)
		return i;
	for (*made = 0; *made < req->count && *made < 2; ++*made)
		fake_row(1 + *made, &children[*made]);
	return *made < req->count ? errf(EAGAIN, "no room for more") : 0;
}

static const struct hostif_ops fake_ops = {
	.name = "fake", .get = fake_get, .each = fake_each, .delete = fake_delete, .fork = fake_fork,
};

static void ops_go_through_the_host_interface(void)
{
	struct hostif hi = { &fake_ops, NULL };
	struct ops_caller c = { .hostif = &hi, .workspace = "ws_test", .max_ttl = 3600, .touch = true };
	struct sbx_row row;
	memset(&fake, 0, sizeof fake);
	/* A lookup names the sandbox by id and says whether it is activity. */
	CHECK(ops_sandbox(&c, fake_ids[1], &row) == 0 && !strcmp(row.parent, fake_ids[0]));
	CHECK(strstr(fake.calls, "get(sbx_childa0000000000000,1)"));
	struct ops_caller other = c;
	other.workspace = "ws_other";
	CHECK(ops_sandbox(&other, fake_ids[1], NULL) == -ENOENT && strstr(errmsg(), "not found"));

	/* A fork: the parent is looked up (touched), then forked by id; the
	 * children come back as records, the failure of the rest with them. */
	struct ops_forked f;
	json_t *args = json_pack("{s:i}", "count", 3);
	memset(&fake, 0, sizeof fake);
	int rc = ops_fork(&c, fake_ids[0], args, false, &f);
	json_decref(args);
	CHECK(rc == -EAGAIN && f.made == 2 && f.count == 3 && strstr(f.why, "no room"));
	CHECK(!strcmp(f.kids[0].id, fake_ids[1]) && !strcmp(f.kids[1].id, fake_ids[2]));
	CHECK(strstr(fake.calls, "get(sbx_parent0000000000000,1) fork(sbx_parent0000000000000,3)"));
	ops_forked_clear(&f);
	CHECK(f.made == 0);

	/* Promote: the siblings (and the parent, asked) deleted by id. */
	char parent[ID_MAX];
	memset(&fake, 0, sizeof fake);
	CHECK(ops_promote(&c, fake_ids[1], true, parent, promoted_none, NULL) == 0);
	CHECK(!strcmp(parent, fake_ids[0]) && fake.deleted == 2);
	CHECK(strstr(fake.calls, "delete(sbx_childb0000000000000)") &&
	      strstr(fake.calls, "delete(sbx_parent0000000000000)") &&
	      !strstr(fake.calls, "delete(sbx_childa"));
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
	json_t *schema = mcp_input_schema(t, NULL);
	json_t *props = json_object_get(schema, "properties");
	CHECK(json_is_object(props));
	size_t n = 0;
	for (const struct field *f = ops_create_fields; f->type != FIELD_END; f++, n++)
		if (!json_object_get(props, f->name)) {
			printf("  create_sandbox's schema lacks '%s'\n", f->name);
			CHECK(json_object_get(props, f->name));
		}
	CHECK(json_object_size(props) == n);
	/* No cap of its own on ttl_seconds: the server's applies. */
	CHECK(!json_object_get(json_object_get(props, "ttl_seconds"), "maximum"));
	json_t *fork_schema = NULL;
	for (int i = 0; i < mcp_ntools; i++)
		if (!strcmp(mcp_tools[i].name, "fork_sandbox"))
			fork_schema = mcp_input_schema(&mcp_tools[i], NULL);
	json_t *count = json_object_get(json_object_get(fork_schema, "properties"), "count");
	CHECK(json_integer_value(json_object_get(count, "maximum")) == HOST_FORK_MAX);
	json_decref(fork_schema);
	json_decref(schema);
}

/* set_network's fields are checked before the sandbox is looked up (the
 * caller has no host interface to reach). */
static int network(const char *text)
{
	json_t *args = json_loads(text, 0, NULL);
	struct sbx_row row;
	int rc = ops_set_network(&caller, "nope", args, &row);
	snprintf(why, sizeof why, "%s", errmsg());
	json_decref(args);
	return rc;
}

static void set_network_refuses_bad_arguments(void)
{
	CHECK(network("{\"allow_outt\":[]}") == -EINVAL && strstr(why, "allow_outt"));
	CHECK(network("{\"allow_out\":[\"300.1.2.3/8\"]}") == -EINVAL && strstr(why, "300.1.2.3"));
	CHECK(network("{\"allow_internet\":\"no\"}") == -EINVAL && strstr(why, "allow_internet"));
	/* A good policy gets as far as the sandbox: a malformed id is none. */
	CHECK(network("{\"allow_internet\":false}") == -ENOENT);
}

/* The workspace MCP's tools, both tables: one name each; every tool has
 * both schemas; fork_tree's count and set_network's fields are REST's. */
static void mcp_tool_tables(void)
{
	const struct { const struct mcp_tool *t; int n; } tabs[] = { { mcp_tools, mcp_ntools },
								     { mcp_ws_tools, mcp_ws_ntools } };
	const struct mcp_tool *all[256];
	int n = 0;
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < tabs[k].n && n < 256; i++)
			all[n++] = &tabs[k].t[i];
	const struct mcp_tool *fork_tree = NULL, *network_tool = NULL;
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < i; j++)
			CHECK(strcmp(all[i]->name, all[j]->name) != 0);
		json_t *in = mcp_input_schema(all[i], NULL);
		json_t *out = all[i]->output ? fields_out_schema(all[i]->output) : NULL;
		if (!in || !out)
			printf("  %s: a schema is missing\n", all[i]->name);
		CHECK(in && out);
		json_decref(in);
		json_decref(out);
		if (!strcmp(all[i]->name, "fork_tree"))
			fork_tree = all[i];
		if (!strcmp(all[i]->name, "set_network"))
			network_tool = all[i];
	}
	CHECK(fork_tree && network_tool);
	if (!fork_tree || !network_tool)
		return;
	json_t *s = mcp_input_schema(fork_tree, NULL);
	json_t *count = json_object_get(json_object_get(s, "properties"), "count");
	CHECK(json_integer_value(json_object_get(count, "maximum")) == HOST_FORK_MAX);
	json_decref(s);
	s = mcp_input_schema(network_tool, NULL);
	json_t *props = json_object_get(s, "properties");
	CHECK(json_object_size(props) == 4 && json_object_get(props, "sandbox_id") &&
	      json_object_get(props, "allow_out") && json_object_get(props, "deny_out") &&
	      json_object_get(props, "allow_internet"));
	json_decref(s);
}

/* A refusal of what the workspace keeps (here a volume over volume_mib)
 * names its limit but counted no creates window: its answer must not
 * show one (api/hcommon.c quota_headers), even under a creates cap. */
static void kept_limit_counts_no_window(void)
{
	struct plans p;
	plans_init(&p);
	struct plan *capped = &p.plan[p.n++];
	*capped = (struct plan){ .name = "capped" };
	capped->limits.creates_per_hour = 5;
	capped->limits.volume_mib = 64;
	snprintf(p.default_plan, sizeof p.default_plan, "capped");
	struct ops_quota q;
	memset(&q, 0, sizeof q);
	struct ops_caller c = { .workspace = "ws_test", .max_ttl = 3600, .plans = &p, .quota = &q };
	json_t *args = json_pack("{s:s,s:i}", "name", "big", "size_mib", 128);
	struct vol_row v;
	CHECK(ops_volume_create(&c, args, &v) == -EDQUOT);
	json_decref(args);
	CHECK(q.applied && !q.window && !strcmp(q.report.limit, "volume_mib") && q.report.value == 64 &&
	      !strcmp(q.plan, "capped") && q.limits.creates_per_hour == 5);
}

/* An app's arguments are refused before anything is made (the store and
 * host are NULL here: reaching them would crash), naming the field or
 * the plan: a plan whose TTL counts from creation has no apps; its
 * idle_seconds is held to the plan's TTL cap, and 0 (never hibernated)
 * only without one. */
static void app_refuses_bad_arguments(void)
{
	struct plans p;
	plans_init(&p);
	struct plan *abs = &p.plan[p.n++], *capped = &p.plan[p.n++];
	*abs = (struct plan){ .name = "abs" };
	abs->limits.ttl_absolute = 1;
	*capped = (struct plan){ .name = "capped" };
	capped->limits.max_ttl_seconds = 120;
	struct ops_caller c = { .workspace = "ws_test", .max_ttl = 3600, .plans = &p };
	static const struct { const char *plan, *json; int rc; const char *says; } cases[] = {
		{ "capped", "{\"name\":\"w\",\"port\":80,\"command\":\"x\",\"idle_seconds\":0}", -EINVAL,
		  "'idle_seconds' 0 (never hibernated) is over plan capped's limit of 120" },
		{ "capped", "{\"name\":\"w\",\"port\":80,\"command\":\"x\",\"idle_seconds\":121}", -EINVAL,
		  "idle_seconds" },
		{ "abs", "{\"name\":\"w\",\"port\":80,\"command\":\"x\"}", -EPERM, "plan abs deletes a sandbox" },
		{ "capped", "{\"name\":\"W!\",\"port\":80}", -EINVAL, "field 'name'" },
		{ "capped", "{\"name\":\"w\"}", -EINVAL, "port" },
		{ "capped", "{\"name\":\"w\",\"port\":80,\"restart\":\"often\"}", -EINVAL, "'restart'" },
		{ "capped", "{\"name\":\"w\",\"port\":80,\"template\":\"a\",\"from_snapshot\":\"b\"}", -EINVAL,
		  "one of" },
		{ "capped", "{\"name\":\"w\",\"port\":80,\"colour\":1}", -EINVAL, "colour" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(p.default_plan, sizeof p.default_plan, "%s", cases[i].plan);
		json_t *args = json_loads(cases[i].json, 0, NULL);
		struct app_row *a = malloc(sizeof *a);
		int rc = ops_app_create(&c, args, a);
		if (rc != cases[i].rc || !strstr(errmsg(), cases[i].says)) {
			fprintf(stderr, "  %s on %s: %d '%s'\n", cases[i].json, cases[i].plan, rc, errmsg());
			CHECK(false);
		}
		free(a);
		json_decref(args);
	}
}

/* The route a request to app-ID.DOMAIN takes comes from a cache: a
 * change another API replica made (here: written to the store directly)
 * is seen once the entry's second is over, not before; an unknown label
 * is -ENOENT, cached too. */
static void app_route_cache(void)
{
	char dir[] = "/tmp/kiln-unit-route.XXXXXX", db[64], ws[ID_MAX];
	struct store *st = NULL;
	CHECK(mkdtemp(dir) != NULL);
	snprintf(db, sizeof db, "%s/kilnd.db", dir);
	CHECK(store_open(db, &st) == 0 && store_workspace_ensure(st, "w", ws) == 0);
	if (!st)
		return;
	struct app_row *a = calloc(1, sizeof *a);
	snprintf(a->id, sizeof a->id, "app_route1");
	snprintf(a->workspace, sizeof a->workspace, "%s", ws);
	snprintf(a->name, sizeof a->name, "web");
	snprintf(a->template, sizeof a->template, "base");
	snprintf(a->restart, sizeof a->restart, "always");
	snprintf(a->state, sizeof a->state, "running");
	snprintf(a->sandbox, sizeof a->sandbox, "sbx_first");
	a->port = 8000, a->gen = a->version = 1;
	CHECK(store_app_insert(st, a) == 0);
	char sbx[ID_MAX];
	int port = 0;
	CHECK(ops_app_route(st, "app-route1", sbx, &port) == 0 && !strcmp(sbx, "sbx_first") && port == 8000);
	snprintf(a->sandbox, sizeof a->sandbox, "sbx_second");
	a->gen = 2;
	CHECK(store_app_update(st, a, 1) == 0);
	CHECK(ops_app_route(st, "app-route1", sbx, &port) == 0 && !strcmp(sbx, "sbx_first"));
	CHECK(ops_app_route(st, "app-nothere", sbx, &port) == -ENOENT && !sbx[0]);
	CHECK(ops_app_route(st, "app-UPPER", sbx, &port) == -ENOENT);
	struct timespec wait = { 1, 100 * 1000 * 1000 };
	nanosleep(&wait, NULL);
	CHECK(ops_app_route(st, "app-route1", sbx, &port) == 0 && !strcmp(sbx, "sbx_second"));
	free(a);
	store_close(st);
	char cmd[96];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

/* A database's certificate as its (hostile) guest printed it: one PEM
 * certificate of a bounded size, base64 of one DER SEQUENCE that fills
 * it; its SHA-256 as openssl's -fingerprint prints it. (The certificate:
 * `openssl req -x509 -newkey ec ...` as src/ops/database.c makes one.) */
static const char good_pem[] =
	"-----BEGIN CERTIFICATE-----\n"
	"MIIBkjCCATigAwIBAgIUI7HfTzWC2cfO2BOrCht9iZWJCQIwCgYIKoZIzj0EAwIw\n"
	"EjEQMA4GA1UEAwwHZGJfdGVzdDAgFw0yNjEyMDYwMTU0MzlaGA8yMTI2MTExMjAx\n"
	"NTQzOVowEjEQMA4GA1UEAwwHZGJfdGVzdDBZMBMGByqGSM49AgEGCCqGSM49AwEH\n"
	"A0IABCJHb14Z0kuqTmTzAGN2wnVVa/BbB6YrJPZIFGNTBKc9hU0Fvgrhr36XRkrq\n"
	"9bOUCHeGQqXPXZLxD2n7sxhUibGjajBoMB0GA1UdDgQWBBSycRRBakMZnGnhDNWx\n"
	"PPCfyAKCkDAfBgNVHSMEGDAWgBSycRRBakMZnGnhDNWxPPCfyAKCkDAPBgNVHRMB\n"
	"Af8EBTADAQH/MBUGA1UdEQQOMAyHBH8AAAGHBArIABIwCgYIKoZIzj0EAwIDSAAw\n"
	"RQIgOfd2L3UWX+Dtr8jE1efXoPJSOuRJa/NpYpLfd2vm97YCIQDuapevftP5tkHv\n"
	"U3hepMW7vlMjfes34URipD++2maoJw==\n"
	"-----END CERTIFICATE-----\n"
;

static void dbcert_takes_one_certificate_only(void)
{
	char pem[DBCERT_PEM_MAX], sha[DBCERT_SHA256_LEN], in[DBCERT_PEM_MAX + 64];
	CHECK(dbcert_take(good_pem, strlen(good_pem), pem) == 0 && !strcmp(pem, good_pem));
	CHECK(dbcert_sha256(pem, sha) == 0 &&
	      !strcmp(sha, "C6:0A:E7:FF:D9:D6:AC:A6:3D:28:AC:98:D8:C5:96:97:91:F3:79:20:87:5B:52:06:E7:1A:43:08:F7:05:65:79"));
	/* trailing white space is taken, and the PEM given back ends in one newline */
	snprintf(in, sizeof in, "%s\n \n", good_pem);
	CHECK(dbcert_take(in, strlen(in), pem) == 0 && !strcmp(pem, good_pem));
	/* a second certificate, or anything after the first */
	snprintf(in, sizeof in, "%s%s", good_pem, good_pem);
	CHECK(dbcert_take(in, strlen(in), pem) == -EPROTO && !pem[0]);
	snprintf(in, sizeof in, "%sx\n", good_pem);
	CHECK(dbcert_take(in, strlen(in), pem) == -EPROTO);
	/* a private key is not a certificate */
	snprintf(in, sizeof in, "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n");
	CHECK(dbcert_take(in, strlen(in), pem) == -EPROTO && strstr(errmsg(), "not one PEM certificate"));
	/* a byte that is not base64 (a quote, which could end a string elsewhere) */
	snprintf(in, sizeof in, "%s", good_pem);
	in[40] = '"';
	CHECK(dbcert_take(in, strlen(in), pem) == -EPROTO && strstr(errmsg(), "not base64"));
	/* a line dropped: the DER is shorter than its SEQUENCE says */
	snprintf(in, sizeof in, "%s", good_pem);
	char *l2 = strchr(strchr(in, '\n') + 1, '\n') + 1;
	memmove(strchr(in, '\n') + 1, l2, strlen(l2) + 1);
	CHECK(dbcert_take(in, strlen(in), pem) == -EPROTO);
	/* a NUL inside, and more than the bound */
	CHECK(dbcert_take(good_pem, sizeof good_pem, pem) == -EPROTO);
	memset(in, 'A', sizeof in);
	CHECK(dbcert_take(in, sizeof in, pem) == -EPROTO && strstr(errmsg(), "over"));
	CHECK(dbcert_sha256("junk", sha) == -EPROTO && !sha[0]);
}

int main(void)
{
	int failures = 0;
	RUN(create_refuses_bad_arguments);
	RUN(fork_checks_count_before_the_sandbox);
	RUN(sandbox_ids_are_checked);
	RUN(ops_go_through_the_host_interface);
	RUN(mcp_create_schema_matches_ops);
	RUN(set_network_refuses_bad_arguments);
	RUN(mcp_tool_tables);
	RUN(kept_limit_counts_no_window);
	RUN(app_refuses_bad_arguments);
	RUN(app_route_cache);
	RUN(dbcert_takes_one_certificate_only);
	return failures ? 1 : 0;
}
