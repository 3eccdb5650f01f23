/*
 * cmd_admin: the operator's commands, over /v1/admin (docs/security.md
 * "Operators"), with the operator credential in KILN_ADMIN_KEY instead of
 * a workspace's key:
 *
 *   kiln admin workspaces list | show NAME | delete NAME
 *   kiln admin workspaces create NAME [--plan P] [--limits K=N[,K=N]]
 *   kiln admin workspaces plan NAME [PLAN] [--limits K=N[,K=N]|none]
 *   kiln admin workspaces suspend|unsuspend NAME
 *   kiln admin keys create WORKSPACE [--name N] [--scope full|read] [--expires SECONDS]
 *   kiln admin keys list WORKSPACE | revoke WORKSPACE ID...
 *   kiln admin usage [--from T] [--to T]
 *   kiln admin plans list | show NAME | set NAME --limits K=N[,K=N]|none | delete NAME
 *
 * The credential comes from the environment alone, never an option: a
 * command line shows in ps and in the shell's history. The arguments are
 * checked before it is looked at, so a usage error is one whatever the
 * environment. What changes a workspace prints it as it is afterwards.
 */
#include "cli/cli.h"
#include "cli/out.h"

#include <stdlib.h>
#include <string.h>

/* Swap the workspace's key for the operator's credential, or fail saying
 * how to get one. Checked here so that a missing or misplaced one is named
 * before anything is sent. */
static void use_operator(void)
{
	const char *k = getenv("KILN_ADMIN_KEY");
	if (!k || !*k)
		die("no operator credential: set KILN_ADMIN_KEY (make one on kilnd's host with: "
		    "kilnd admin create)");
	if (!strncmp(k, "kiln_", 5))
		die("KILN_ADMIN_KEY holds a workspace's API key (kiln_...), not an operator credential "
		    "(kilnop_...: kilnd admin create)");
	if (strlen(k) >= sizeof target.key)
		die("KILN_ADMIN_KEY is too long to be an operator credential");
	for (const char *p = k; *p; p++)	/* it goes into a header line */
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			die("KILN_ADMIN_KEY holds a space or a control character: not an operator credential");
	snprintf(target.key, sizeof target.key, "%s", k);
	target.key_env = "KILN_ADMIN_KEY";
	target.key_what = "operator credential";
}

static json_t *admin_call(const char *method, const char *path, json_t *body)
{
	use_operator();
	return call(method, path, body);
}

/* DELETE /v1/admin/COLLECTION/NAME (NAME checked by the caller's *_arg,
 * so safe in a path); a failure exits in call(). */
static int admin_delete(const char *collection, const char *name)
{
	char path[96];
	snprintf(path, sizeof path, "/v1/admin/%s/%s", collection, name);
	json_decref(admin_call("DELETE", path, NULL));
	return 0;
}

/* pos[i] as a workspace name (what kilnd takes: 1 to 16 of a-z, 0-9, -),
 * which also makes it safe in a path. */
static const char *ws_arg(const struct command *cmd, struct opts *o, int i)
{
	if (i >= o->npos)
		usage_error(cmd, "a workspace name is missing");
	const char *s = o->pos[i];
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-");
	if (!*s || s[n] || n > 16)
		usage_error(cmd, "'%s' is not a workspace name: 1 to 16 of a-z, 0-9 and -", s);
	return s;
}

/* A workspace's own limits as "running=3,vcpus=2" (--limits' form), or
 * "none (the plan's)". */
static const char *limits_text(json_t *l, char *buf, size_t len)
{
	size_t n = 0;
	const char *k;
	json_t *v;
	buf[0] = 0;
	json_object_foreach(l, k, v) {
		if (n >= len)
			break;
		n += (size_t)snprintf(buf + n, len - n, "%s%s=%lld", n ? "," : "", k,
				      (long long)json_integer_value(v));
	}
	return n ? buf : "none (the plan's)";
}

static void ws_print(json_t *w)
{
	char limits[512], cost[32], created[32];
	printf("name             %s\n", str(w, "name"));
	printf("id               %s\n", str(w, "id"));
	printf("plan             %s\n", str(w, "plan"));
	printf("limits           %s\n", limits_text(json_object_get(w, "limits"), limits, sizeof limits));
	printf("suspended        %s\n", json_is_true(json_object_get(w, "suspended")) ? "yes" : "no");
	printf("live sandboxes   %lld\n", (long long)json_integer_value(json_object_get(w, "live_sandboxes")));
	printf("month's cost     %s\n", dollars(json_object_get(w, "month_cost_microdollars"), cost, sizeof cost));
	printf("created          %s (%s)\n", str(w, "created_at"), ago(str(w, "created_at"), created, sizeof created));
}

/* One workspace answer, printed as asked. */
static int ws_reply(struct opts *o, json_t *r)
{
	if (o->json)
		print_json(r);
	else
		ws_print(r);
	json_decref(r);
	return 0;
}

static int ws_list(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 2, 2);
	use_operator();
	json_t *r = get_or_print(o, "/v1/admin/workspaces");
	if (!r)
		return 0;
	struct table t;
	table_init(&t, "NAME ID PLAN LIMITS SUSPENDED LIVE MONTH_COST CREATED");
	size_t i;
	json_t *w;
	json_array_foreach(json_object_get(r, "workspaces"), i, w) {
		char limits[512], live[24], cost[32], created[32];
		snprintf(live, sizeof live, "%lld", (long long)json_integer_value(json_object_get(w, "live_sandboxes")));
		json_t *l = json_object_get(w, "limits");
		table_row(&t, str(w, "name"), str(w, "id"), str(w, "plan"),
			  json_object_size(l) ? limits_text(l, limits, sizeof limits) : "-",
			  json_is_true(json_object_get(w, "suspended")) ? "yes" : "no", live,
			  dollars(json_object_get(w, "month_cost_microdollars"), cost, sizeof cost),
			  ago(str(w, "created_at"), created, sizeof created), NULL);
	}
	table_print(&t, stdout);
	json_decref(r);
	return 0;
}

static int ws_show(const struct command *cmd, struct opts *o)
{
	const char *name = ws_arg(cmd, o, 2);
	need_args(cmd, o, 3, 3);
	char path[64];
	snprintf(path, sizeof path, "/v1/admin/workspaces/%s", name);
	return ws_reply(o, admin_call("GET", path, NULL));
}

/* --limits into body (the object is the body's from now on). */
static void put_limits(json_t *body, struct opts *o)
{
	if (o->limits)
		json_object_set_new(body, "limits", o->limits);
	o->limits = NULL;
}

static int ws_create(const struct command *cmd, struct opts *o)
{
	const char *name = ws_arg(cmd, o, 2);
	need_args(cmd, o, 3, 3);
	json_t *body = json_pack("{s:s}", "name", name);
	if (o->plan)
		json_object_set_new(body, "plan", text_arg(cmd, "--plan", o->plan));
	put_limits(body, o);
	return ws_reply(o, admin_call("POST", "/v1/admin/workspaces", body));
}

/* PATCH the workspace pos[2] names with body. */
static int ws_patch(const struct command *cmd, struct opts *o, json_t *body)
{
	char path[64];
	snprintf(path, sizeof path, "/v1/admin/workspaces/%s", ws_arg(cmd, o, 2));
	return ws_reply(o, admin_call("PATCH", path, body));
}

static int ws_plan(const struct command *cmd, struct opts *o)
{
	ws_arg(cmd, o, 2);
	need_args(cmd, o, 3, 4);
	if (o->npos < 4 && !o->limits)
		usage_error(cmd, "admin workspaces plan wants a PLAN, --limits or both");
	json_t *body = json_object();
	if (o->npos == 4)
		json_object_set_new(body, "plan", text_arg(cmd, "PLAN", o->pos[3]));
	put_limits(body, o);
	return ws_patch(cmd, o, body);
}

static int ws_suspend(const struct command *cmd, struct opts *o)
{
	ws_arg(cmd, o, 2);
	need_args(cmd, o, 3, 3);
	return ws_patch(cmd, o, json_pack("{s:b}", "suspended", 1));
}

static int ws_unsuspend(const struct command *cmd, struct opts *o)
{
	ws_arg(cmd, o, 2);
	need_args(cmd, o, 3, 3);
	return ws_patch(cmd, o, json_pack("{s:b}", "suspended", 0));
}

static int ws_delete(const struct command *cmd, struct opts *o)
{
	const char *name = ws_arg(cmd, o, 2);
	need_args(cmd, o, 3, 3);
	return admin_delete("workspaces", name);
}

static int admin_workspaces(const struct command *cmd, struct opts *o)
{
	static const struct subcommand subs[] = {
		{ "list", "", ws_list },	     { "show", "", ws_show },
		{ "create", "plan limits", ws_create }, { "plan", "limits", ws_plan },
		{ "suspend", "", ws_suspend },	     { "unsuspend", "", ws_unsuspend },
		{ "delete", "", ws_delete },
	};
	return subcommand_run(cmd, o, "admin workspaces", 1, subs, sizeof subs / sizeof subs[0]);
}

/* ---- kiln admin keys create|list|revoke WORKSPACE ------------------------------- */

/* The workspace's keys route, "/v1/admin/workspaces/NAME/keys", into buf. */
static const char *ws_keys_path(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "/v1/admin/workspaces/%s/keys", name);
	return buf;
}

static int admin_key_create(const struct command *cmd, struct opts *o)
{
	const char *name = ws_arg(cmd, o, 2);
	need_args(cmd, o, 3, 3);
	char path[80];
	use_operator();
	return key_create(cmd, o, ws_keys_path(name, path, sizeof path));
}

static int admin_key_list(const struct command *cmd, struct opts *o)
{
	const char *name = ws_arg(cmd, o, 2);
	need_args(cmd, o, 3, 3);
	char path[80];
	use_operator();
	return key_list(o, ws_keys_path(name, path, sizeof path));
}

/* kilnd answers 404 for a key of another workspace: an id is revoked only
 * where it was named. */
static int admin_key_revoke(const struct command *cmd, struct opts *o)
{
	const char *name = ws_arg(cmd, o, 2);
	char lister[64], path[80];
	snprintf(lister, sizeof lister, "kiln admin keys list %s", name);
	key_ids_check(cmd, o, 3, "admin keys revoke", lister);
	use_operator();
	return key_revoke(o, 3, ws_keys_path(name, path, sizeof path));
}

static int admin_keys(const struct command *cmd, struct opts *o)
{
	static const struct subcommand subs[] = {
		{ "create", "name scope expires", admin_key_create },
		{ "list", "", admin_key_list },
		{ "revoke", "", admin_key_revoke },
	};
	return subcommand_run(cmd, o, "admin keys", 1, subs, sizeof subs / sizeof subs[0]);
}

/* ---- kiln admin plans list|show|set ---------------------------------------------- */

/* pos[i] as a plan's name (what kilnd takes: 1 to 31 of a-z, 0-9, - and
 * _), which also makes it safe in a path. */
static const char *plan_arg(const struct command *cmd, struct opts *o, int i)
{
	if (i >= o->npos)
		usage_error(cmd, "a plan name is missing");
	const char *s = o->pos[i];
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-_");
	if (!*s || s[n] || n > 31)
		usage_error(cmd, "'%s' is not a plan name: 1 to 31 of a-z, 0-9, - and _", s);
	return s;
}

/* A plan's limits in force as "running=3,vcpus=2" (0s left out: none). */
static const char *set_limits_text(json_t *l, char *buf, size_t len)
{
	size_t n = 0;
	const char *k;
	json_t *v;
	buf[0] = 0;
	json_object_foreach(l, k, v) {
		if (n >= len || !json_integer_value(v))
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%s%s=%lld", n ? "," : "", k,
				      (long long)json_integer_value(v));
	}
	return n ? buf : "none";
}

static int plan_reply(struct opts *o, json_t *p)
{
	if (o->json) {
		print_json(p);
	} else {
		char limits[1024], own[512];
		json_t *op = json_object_get(p, "operator_limits");
		printf("name             %s%s\n", str(p, "name"),
		       json_is_true(json_object_get(p, "default")) ? " (the server's default)" : "");
		printf("from             %s\n", json_is_true(json_object_get(p, "server_plan"))
			? (json_is_object(op) ? "the server's, changed by the operator" : "the server's")
			: "the operator's");
		printf("limits           %s\n", set_limits_text(json_object_get(p, "limits"), limits, sizeof limits));
		printf("operator's       %s\n", json_is_object(op) ? (json_object_size(op) ? limits_text(op, own, sizeof own) : "none")
								: "none");
	}
	json_decref(p);
	return 0;
}

static int plans_list(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 2, 2);
	use_operator();
	json_t *r = get_or_print(o, "/v1/admin/plans");
	if (!r)
		return 0;
	struct table t;
	table_init(&t, "NAME FROM DEFAULT LIMITS");
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(r, "plans"), i, p) {
		char limits[1024];
		bool server = json_is_true(json_object_get(p, "server_plan"));
		bool changed = json_is_object(json_object_get(p, "operator_limits"));
		table_row(&t, str(p, "name"), server ? (changed ? "server+operator" : "server") : "operator",
			  json_is_true(json_object_get(p, "default")) ? "yes" : "-",
			  set_limits_text(json_object_get(p, "limits"), limits, sizeof limits), NULL);
	}
	table_print(&t, stdout);
	json_decref(r);
	return 0;
}

static int plans_show(const struct command *cmd, struct opts *o)
{
	const char *name = plan_arg(cmd, o, 2);
	need_args(cmd, o, 3, 3);
	char path[64];
	snprintf(path, sizeof path, "/v1/admin/plans/%s", name);
	return plan_reply(o, admin_call("GET", path, NULL));
}

static int plans_set(const struct command *cmd, struct opts *o)
{
	const char *name = plan_arg(cmd, o, 2);
	need_args(cmd, o, 3, 3);
	if (!o->limits)
		usage_error(cmd, "admin plans set wants --limits LIMIT=N[,LIMIT=N] (none: the server's plan as shipped)");
	char path[64];
	snprintf(path, sizeof path, "/v1/admin/plans/%s", name);
	json_t *body = json_object();
	put_limits(body, o);
	return plan_reply(o, admin_call("PUT", path, body));
}

static int plans_delete(const struct command *cmd, struct opts *o)
{
	const char *name = plan_arg(cmd, o, 2);
	need_args(cmd, o, 3, 3);
	return admin_delete("plans", name);
}

static int admin_plans(const struct command *cmd, struct opts *o)
{
	static const struct subcommand subs[] = {
		{ "list", "", plans_list },
		{ "show", "", plans_show },
		{ "set", "limits", plans_set },
		{ "delete", "", plans_delete },
	};
	return subcommand_run(cmd, o, "admin plans", 1, subs, sizeof subs / sizeof subs[0]);
}

/* ---- kiln admin usage ------------------------------------------------------------ */

static void usage_row(struct table *t, const char *name, json_t *u)
{
	char cpu_s[32], gib_h[32], run_s[32], cost[32];
	table_row(t, name, number(u, "active_vcpu_seconds", "%.3f", cpu_s, sizeof cpu_s),
		  number(u, "memory_gib_hours", "%.6f", gib_h, sizeof gib_h),
		  number(u, "running_seconds", "%.1f", run_s, sizeof run_s),
		  dollars(json_object_get(u, "cost_microdollars"), cost, sizeof cost), NULL);
}

static int admin_usage(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 1, 1);
	struct query q = { .len = 0 };
	query_add(&q, "from", o->from);
	query_add(&q, "to", o->to);
	char *path = query_path("/v1/admin/usage", &q);
	use_operator();
	json_t *r = get_or_print(o, path);
	free(path);
	if (!r)
		return 0;
	printf("from %s to %s\n", str(r, "from"), str(r, "to"));
	struct table t;
	table_init(&t, "WORKSPACE ACTIVE_VCPU_S GIB_HOURS RUNNING_S COST");
	size_t i;
	json_t *w;
	json_array_foreach(json_object_get(r, "workspaces"), i, w)
		usage_row(&t, str(w, "name"), w);
	usage_row(&t, "total", json_object_get(r, "total"));
	table_print(&t, stdout);
	json_decref(r);
	return 0;
}

int cmd_admin(const struct command *cmd, struct opts *o)
{
	static const struct subcommand subs[] = {
		{ "workspaces", NULL, admin_workspaces },
		{ "keys", NULL, admin_keys },
		{ "usage", "from to", admin_usage },
		{ "plans", NULL, admin_plans },
	};
	return subcommand_run(cmd, o, "admin", 0, subs, sizeof subs / sizeof subs[0]);
}
