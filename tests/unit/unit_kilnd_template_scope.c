/* Unit tests for src/ops/template.c: the names a workspace gives its
 * templates, how they are qualified on the host and shown back, which
 * templates a workspace sees and resolves (a fake host interface listing
 * shared ones and two workspaces' own), and what a build request refuses
 * before it reaches the host (and what it hands the host when it passes). */
#include "ops/template.h"
#include "ops/plan.h"
#include "host/template.h"
#include "common/err.h"
#include "test.h"

#include <errno.h>
#include <string.h>

static void names_and_qualification(void)
{
	CHECK(ops_template_name_ok("web") && ops_template_name_ok("a") && ops_template_name_ok("9-x_y"));
	CHECK(ops_template_name_ok("abcdefghijklmnopqrs"));		/* 19 */
	CHECK(!ops_template_name_ok("abcdefghijklmnopqrst"));		/* 20 */
	CHECK(!ops_template_name_ok("") && !ops_template_name_ok("-x") && !ops_template_name_ok("_x"));
	CHECK(!ops_template_name_ok("Web") && !ops_template_name_ok("a/b") && !ops_template_name_ok("a.b"));
	char a[OPS_TEMPLATE_HOST_NAME], b[OPS_TEMPLATE_HOST_NAME], c[OPS_TEMPLATE_HOST_NAME];
	ops_template_host_name("ws_aaaaaaaaaaaaaaaaaaaa", "abcdefghijklmnopqrs", a);
	ops_template_host_name("ws_bbbbbbbbbbbbbbbbbbbb", "abcdefghijklmnopqrs", b);
	ops_template_host_name("ws_aaaaaaaaaaaaaaaaaaaa", "web", c);
	/* A directory name the host takes, one per workspace, within 31. */
	CHECK(strlen(a) == 31 && template_name_ok(a) && template_name_ok(c));
	CHECK(strcmp(a, b) != 0 && !strncmp(a, c, 12));
	CHECK(ops_template_qualified(a) && ops_template_qualified(c));
	CHECK(!ops_template_qualified("web") && !ops_template_qualified("base") &&
	      !ops_template_qualified("w123456789_") && !ops_template_qualified("wxyz4567890_a"));
	CHECK(!strcmp(ops_template_short(c), "web") && !strcmp(ops_template_short("base"), "base"));
	char msg[128];
	snprintf(msg, sizeof msg, "template %s: step image failed (%s/context)", c, c);
	ops_template_unqualify(msg, "ws_aaaaaaaaaaaaaaaaaaaa", "web");
	CHECK(!strcmp(msg, "template web: step image failed (web/context)"));
	CHECK(ops_build_arg_ok("A=1") && ops_build_arg_ok("_x=") && ops_build_arg_ok("VERSION=a=b"));
	CHECK(!ops_build_arg_ok("A") && !ops_build_arg_ok("=1") && !ops_build_arg_ok("1A=x") &&
	      !ops_build_arg_ok("A-B=x"));
}

/* ---- a fake host: shared minimal and srv, ws_one's web and ws_two's web ---- */

static char h_one[OPS_TEMPLATE_HOST_NAME], h_two[OPS_TEMPLATE_HOST_NAME];
static struct { char name[64], dockerfile[64], group[32]; int nargs, calls; int64_t max_templates, max_builds, max_seconds, max_root_mib, disk_mib;
		int vcpus, memory_mib; char build_net[64];
		bool quota; } built;

static int fake_templates(void *ctx, hostif_template_fn *fn, void *fctx)
{
	(void)ctx;
	const char *names[] = { "minimal", "srv", h_one, h_two };
	for (int i = 0; i < 4; i++) {
		struct hostif_template t = { .built = true, .version = 1 };
		snprintf(t.name, sizeof t.name, "%s", names[i]);
		snprintf(t.description, sizeof t.description, "Dockerfile in .builds/%s/context", names[i]);
		int rc = fn(fctx, &t);
		if (rc)
			return rc < 0 ? rc : 0;
	}
	return 0;
}

static int fake_build(void *ctx, const struct tbuild_req *r)
{
	(void)ctx;
	built.calls++;
	snprintf(built.name, sizeof built.name, "%s", r->name);
	snprintf(built.dockerfile, sizeof built.dockerfile, "%s", r->dockerfile ? r->dockerfile : "");
	for (built.nargs = 0; r->build_args && r->build_args[built.nargs]; built.nargs++)
		;
	snprintf(built.group, sizeof built.group, "%s", r->group ? r->group : "");
	built.max_templates = r->max_templates;
	built.max_builds = r->max_builds;
	built.max_seconds = r->max_seconds;
	built.max_root_mib = r->max_root_mib;
	built.disk_mib = r->disk_mib;
	built.vcpus = r->vcpus;
	built.memory_mib = r->memory_mib;
	snprintf(built.build_net, sizeof built.build_net, "%s", r->build_net ? r->build_net : "");
	if (built.quota)	/* tbuild_start's words at a limit */
		return errf(EDQUOT, "this workspace has 3 templates, the most its plan allows (templates 3): "
			    "delete one first");
	return errf(EBUSY, "a build of template %s is running", r->name);
}

static const struct hostif_ops fake_ops = { .name = "fake", .templates = fake_templates,
					    .template_build = fake_build };

static int collect(void *ctx, const struct hostif_template *t)
{
	char *list = ctx;
	size_t n = strlen(list);
	snprintf(list + n, 256 - n, "%s%s(%s)", n ? " " : "", t->name, t->description);
	return 0;
}

static void workspaces_see_their_own(void)
{
	ops_template_host_name("ws_one", "web", h_one);
	ops_template_host_name("ws_two", "web", h_two);
	struct hostif hi = { &fake_ops, NULL };
	char list[256] = "";
	CHECK(ops_templates_each(&hi, "ws_one", collect, list) == 0);
	CHECK(!strcmp(list, "minimal(Dockerfile in .builds/minimal/context) srv(Dockerfile in .builds/srv/context) "
			    "web(built from a Dockerfile through the API)"));
	char host[OPS_TEMPLATE_HOST_NAME];
	CHECK(ops_template_resolve(&hi, "ws_one", "web", host) == 0 && !strcmp(host, h_one));
	CHECK(ops_template_resolve(&hi, "ws_two", "web", host) == 0 && !strcmp(host, h_two));
	CHECK(ops_template_resolve(&hi, "ws_three", "web", host) == -ENOENT);
	CHECK(ops_template_resolve(&hi, "ws_three", "srv", host) == 0 && !strcmp(host, "srv"));
	/* Another workspace's host name, given as is, is nothing. */
	CHECK(ops_template_resolve(&hi, "ws_three", h_one, host) == -ENOENT);
	CHECK(ops_template_resolve(&hi, "ws_two", h_one, host) == -ENOENT);
	json_t *names = NULL;
	CHECK(ops_template_known(&hi, "ws_three", "web", &names) == -ENOENT && json_array_size(names) == 2);
	json_decref(names);
}

/* The host's bounds of a template's shape are the API's. */
_Static_assert(OPS_TEMPLATE_VCPUS_MAX == TEMPLATE_VCPUS_MAX, "vCPU bound");
_Static_assert(OPS_TEMPLATE_MEMORY_MIN_MIB == TEMPLATE_MEMORY_MIN_MIB, "memory bound");
_Static_assert(OPS_TEMPLATE_MEMORY_MAX_MIB == TEMPLATE_MEMORY_MAX_MIB, "memory bound");

/* ops_template_build with a spec of these. */
static int build(const struct ops_caller *c, const char *name, const char *dockerfile, const char *const *args,
		 int64_t disk_mib, const char *build_net, int vcpus, int memory_mib)
{
	struct ops_build_spec s = { .dockerfile = dockerfile, .build_args = args, .disk_mib = disk_mib,
				    .build_net = build_net, .vcpus = vcpus, .memory_mib = memory_mib };
	return ops_template_build(c, name, 0, &s);
}

static void build_refusals(void)
{
	struct hostif hi = { &fake_ops, NULL };
	struct ops_caller c = { .hostif = &hi, .workspace = "ws_one" };
	const char *bad_arg[] = { "A=1", "no", NULL }, *args[] = { "A=1", "B=2", NULL };
	memset(&built, 0, sizeof built);
	CHECK(build(&c, NULL, NULL, NULL, 0, NULL, 0, 0) == -EINVAL && strstr(errmsg(), "name= is required"));
	CHECK(build(&c, "Bad", NULL, NULL, 0, NULL, 0, 0) == -EINVAL && strstr(errmsg(), "bad template name"));
	CHECK(build(&c, "srv", NULL, NULL, 0, NULL, 0, 0) == -EEXIST && strstr(errmsg(), "taken"));
	CHECK(build(&c, "minimal", NULL, NULL, 0, NULL, 0, 0) == -EEXIST);
	CHECK(build(&c, "x", "../Dockerfile", NULL, 0, NULL, 0, 0) == -EINVAL && strstr(errmsg(), ".."));
	CHECK(build(&c, "x", "/etc/passwd", NULL, 0, NULL, 0, 0) == -EINVAL);
	CHECK(build(&c, "x", "a//b", NULL, 0, NULL, 0, 0) == -EINVAL);
	CHECK(build(&c, "x", NULL, bad_arg, 0, NULL, 0, 0) == -EINVAL && strstr(errmsg(), "'no'"));
	CHECK(build(&c, "x", NULL, NULL, 10, NULL, 0, 0) == -EINVAL && strstr(errmsg(), "disk_mib 10: want 64 to"));
	CHECK(build(&c, "x", NULL, NULL, (1 << 20) + 1, NULL, 0, 0) == -EINVAL);
	CHECK(build(&c, "x", NULL, NULL, 0, "10.0.0.0/33", 0, 0) == -EINVAL &&
	      strstr(errmsg(), "build_net '10.0.0.0/33'"));
	CHECK(build(&c, "x", NULL, NULL, 0, "", 0, 0) == -EINVAL);
	CHECK(build(&c, "x", NULL, NULL, 0, "everything", 0, 0) == -EINVAL);
	CHECK(build(&c, "x", NULL, NULL, 0, NULL, 9, 0) == -EINVAL && !strcmp(errmsg(), "vcpus 9: want 1 to 8"));
	CHECK(build(&c, "x", NULL, NULL, 0, NULL, -1, 0) == -EINVAL);
	CHECK(build(&c, "x", NULL, NULL, 0, NULL, 0, 64) == -EINVAL &&
	      !strcmp(errmsg(), "memory_mib 64: want 128 to 65536"));
	CHECK(build(&c, "x", NULL, NULL, 0, NULL, 0, 65537) == -EINVAL);
	CHECK(built.calls == 0);
	/* Through: the host gets the qualified name; its error comes back
	 * with the workspace's name in it. */
	CHECK(build(&c, "web", "sub/Dockerfile", args, 512, "203.0.113.0/24,198.51.100.7", 0, 0) == -EBUSY);
	CHECK(built.calls == 1 && !strcmp(built.name, h_one) && !strcmp(built.dockerfile, "sub/Dockerfile") &&
	      built.nargs == 2 && built.disk_mib == 512 && !strcmp(built.build_net, "203.0.113.0/24,198.51.100.7") &&
	      built.vcpus == 0 && built.memory_mib == 0);
	CHECK(build(&c, "web", NULL, NULL, 0, NULL, 3, 384) == -EBUSY && built.calls == 2 && built.vcpus == 3 &&
	      built.memory_mib == 384);
	CHECK(!strcmp(errmsg(), "a build of template web is running"));
	/* No plans: no limits handed down. */
	CHECK(built.max_templates == 0 && built.max_builds == 0);
	/* The plan's templates and template_builds go to the host with the
	 * workspace's prefix, and its build_seconds and template_mib (the free
	 * plan: 3, 1, 900 and 4096); the host's refusal
	 * comes back naming the plan, with the quota report for the 429. */
	struct plans plans;
	plans_init(&plans);
	snprintf(plans.default_plan, sizeof plans.default_plan, "free");
	struct ops_quota q;
	c.plans = &plans;
	c.quota = &q;
	CHECK(build(&c, "web", NULL, NULL, 0, NULL, 0, 0) == -EBUSY);
	CHECK(strlen(built.group) == 12 && !strncmp(built.group, h_one, 12) && built.max_templates == 3 &&
	      built.max_builds == 1 && built.max_seconds == 900 && built.max_root_mib == 4096);
	built.quota = true;
	CHECK(build(&c, "web", NULL, NULL, 0, NULL, 0, 0) == -EDQUOT);
	CHECK(!strcmp(errmsg(), "this workspace has 3 templates, the most plan free allows (templates 3): "
				"delete one first"));
	CHECK(q.applied && !strcmp(q.plan, "free") && !strcmp(q.report.limit, "templates") && q.report.value == 3);
	built.quota = false;
	/* A shape over the plan's size of one sandbox (free: 8 vCPUs, 8192
	 * MiB) is refused before the host hears of it, naming the limit. */
	int calls = built.calls;
	CHECK(build(&c, "web", NULL, NULL, 0, NULL, 8, 16384) == -EDQUOT && built.calls == calls);
	CHECK(!strcmp(errmsg(), "a template of 16384 MiB: plan free makes sandboxes of at most 8192 (memory_mib 8192)"));
	CHECK(!strcmp(q.report.limit, "memory_mib") && q.report.value == 8192);
	CHECK(build(&c, "web", NULL, NULL, 0, NULL, 8, 8192) == -EBUSY && built.calls == calls + 1);
}

int main(void)
{
	int failures = 0;
	RUN(names_and_qualification);
	RUN(workspaces_see_their_own);
	RUN(build_refusals);
	return failures ? 1 : 0;
}
