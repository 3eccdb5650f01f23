/* Unit tests for plans (src/ops/plan.c) and a workspace's plan in a real
 * SQLite store: the shipped plans, an operator's plans file (changes,
 * additions, refusals naming the field), a workspace's own limits over its
 * plan, the server's default, and the creation times the host's creates
 * window is loaded from after a restart. What the host counts is e2e
 * 80-kilnd-plans (it needs sandboxes). */
#include "ops/ops.h"
#include "ops/billing.h"
#include "ops/plan.h"
#include "store/store.h"
#include "common/err.h"
#include "test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/kiln-unit-plans.XXXXXX";

static const char *write_file(const char *name, const char *text)
{
	static char path[128];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	CHECK(f && fputs(text, f) >= 0);
	if (f)
		fclose(f);
	return path;
}

/* The test's SQLite store (made by the first call). */
static struct store *open_store(void)
{
	char db[128];
	snprintf(db, sizeof db, "%s/kilnd.db", dir);
	struct store *st = NULL;
	CHECK(store_open(db, &st) == 0);
	return st;
}

static void shipped_plans(void)
{
	struct plans p;
	plans_init(&p);
	const struct plan *free_ = plans_find(&p, "free"), *ent = plans_find(&p, "enterprise");
	CHECK(free_ && free_->limits.running == 5 && free_->limits.creates_per_hour == 60 &&
	      free_->limits.max_ttl_seconds == 3600 && free_->limits.ttl_absolute == 1 &&
	      !free_->limits.idle_hibernate);
	CHECK(free_ && free_->limits.hibernated == 10 && free_->limits.snapshots == 10);
	CHECK(ent && !ent->limits.hibernated && !ent->limits.snapshots);
	/* Every limit has its name, in the JSON order of the struct. */
	json_t *j = free_ ? plan_limits_json(&free_->limits) : NULL;
	CHECK(j && json_integer_value(json_object_get(j, "snapshots")) == 10 &&
	      json_integer_value(json_object_get(j, "credit_microdollars")) == 5400000 &&
	      json_integer_value(json_object_get(j, "storage_mib")) == 10240);
	CHECK(ent && !ent->limits.storage_mib);
	json_decref(j);
	CHECK(plans_find(&p, "pro") && !plans_find(&p, "pro")->limits.ttl_absolute);
	CHECK(plans_find(&p, "pro") && plans_find(&p, "pro")->limits.max_ttl_seconds == 7 * 86400);
	CHECK(plans_find(&p, "team") && plans_find(&p, "team")->limits.max_ttl_seconds == 30 * 86400);
	CHECK(ent && !ent->limits.running && !ent->limits.creates_per_hour && !ent->limits.vcpus);
	CHECK(!strcmp(p.default_plan, "enterprise") && p.window_ms == 3600000);
	CHECK(!plans_find(&p, "gold"));
}

static void plans_file(void)
{
	struct plans p;
	plans_init(&p);
	const char *f = write_file("ok.json", "{\"free\": {\"running\": 2}, \"gold\": {\"vcpus\": 4}}");
	CHECK(plans_load(&p, f) == 0);
	const struct plan *free_ = plans_find(&p, "free"), *gold = plans_find(&p, "gold");
	/* Changed limit by limit: the rest of free stays. */
	CHECK(free_ && free_->limits.running == 2 && free_->limits.creates_per_hour == 60);
	CHECK(gold && gold->limits.vcpus == 4 && gold->limits.running == 0);
	f = write_file("keep.json", "{\"gold\": {\"hibernated\": 3, \"snapshots\": 0}}");
	CHECK(plans_load(&p, f) == 0 && gold && gold->limits.hibernated == 3 && !gold->limits.snapshots);
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "{\"free\": {\"runing\": 2}}", "unknown limit 'runing' (known: running, creates_per_hour, vcpus, memory_mib, max_ttl_seconds, ttl_absolute, idle_hibernate, hibernated_retention_seconds, credit_microdollars, no_workspace_mcp, hibernated, snapshots, storage_mib, volumes, volume_mib, templates, template_builds, build_seconds, template_mib, disk_mib)" },
		{ "{\"free\": {\"running\": -1}}", "limit 'running' must be a whole number" },
		{ "{\"free\": {\"running\": 1.5}}", "limit 'running' must be a whole number" },
		{ "{\"free\": 3}", "must be a JSON object" },
		{ "{\"free\": {\"idle_hibernate\": 2}}", "'idle_hibernate' is 0 (off) or 1 (on)" },
		{ "{\"Gold Plan\": {}}", "plan name 'Gold Plan'" },
		{ "[1]", "not a JSON object of plans" },
		{ "{\"free\": ", "line 1" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		plans_init(&p);
		int rc = plans_load(&p, write_file("bad.json", bad[i].text));
		CHECK(rc == -EINVAL && strstr(errmsg(), bad[i].want) && strstr(errmsg(), "bad.json"));
		if (rc != -EINVAL || !strstr(errmsg(), bad[i].want))
			printf("  %s -> %d %s\n", bad[i].text, rc, errmsg());
	}
	plans_init(&p);
	CHECK(plans_load(&p, "/nonexistent/plans.json") == -EINVAL);
}

static void workspace_plan_in_the_store(void)
{
	struct store *st = open_store();
	if (!st)
		return;
	struct plans p;
	plans_init(&p);
	char a[ID_MAX], b[ID_MAX];
	CHECK(store_workspace_ensure(st, "alpha", a) == 0 && store_workspace_ensure(st, "beta", b) == 0);
	struct ops_caller c = { .store = st, .plans = &p, .workspace = a };
	struct plan got;
	/* No plan of its own: the server's default. */
	CHECK(ops_workspace_plan(&c, &got) == 0 && !strcmp(got.name, "enterprise"));
	snprintf(p.default_plan, sizeof p.default_plan, "free");
	CHECK(ops_workspace_plan(&c, &got) == 0 && !strcmp(got.name, "free") && got.limits.running == 5);
	/* Its own plan, and its own limits over the plan's. */
	CHECK(store_plan_set(st, a, "pro", "{\"running\":7}", false) == 0);
	CHECK(ops_workspace_plan(&c, &got) == 0 && !strcmp(got.name, "pro") && got.limits.running == 7 &&
	      got.limits.creates_per_hour == plans_find(&p, "pro")->limits.creates_per_hour);
	CHECK(store_plan_set(st, a, "team", NULL, false) == 0);	/* replaced, limits gone */
	CHECK(ops_workspace_plan(&c, &got) == 0 && !strcmp(got.name, "team") &&
	      got.limits.running == plans_find(&p, "team")->limits.running);
	/* The other workspace is untouched. */
	c.workspace = b;
	CHECK(ops_workspace_plan(&c, &got) == 0 && !strcmp(got.name, "free"));
	/* A plan the server no longer has is an error, not no limits. */
	CHECK(store_plan_set(st, b, "gone", NULL, false) == 0);
	CHECK(ops_workspace_plan(&c, &got) == -EIO && strstr(errmsg(), "gone"));
	/* No plans at all (a caller without them): no limits. */
	c.plans = NULL;
	CHECK(ops_workspace_plan(&c, &got) == 0 && !got.limits.running && !got.limits.creates_per_hour);
	store_close(st);
}

/* The operator's plans (PUT /v1/admin/plans/NAME) in the store: limits
 * over a server plan, a plan of the operator's own, and a workspace on it
 * seeing a change at its next call, as another replica would. */
static void operators_plans(void)
{
	struct store *st = open_store();
	if (!st)
		return;
	struct plans p;
	plans_init(&p);
	struct plan got;
	bool set = true;
	CHECK(plans_resolve(&p, st, "free", &got, &set) == 0 && !set && got.limits.running == 5);
	CHECK(plans_resolve(&p, st, "gold", &got, &set) == -ENOENT && strstr(errmsg(), "gold"));
	/* Over a server plan: what is named changes, the rest stays. */
	CHECK(store_plandef_set(st, "free", "{\"running\":2}") == 0);
	CHECK(plans_resolve(&p, st, "free", &got, &set) == 0 && set && got.limits.running == 2 &&
	      got.limits.creates_per_hour == 60 && got.limits.ttl_absolute == 1);
	CHECK(plans_find(&p, "free")->limits.running == 5);	/* the server's own is untouched */
	/* A plan of its own: unnamed limits none. */
	CHECK(store_plandef_set(st, "gold", "{\"running\":9,\"vcpus\":4}") == 0);
	CHECK(plans_resolve(&p, st, "gold", &got, &set) == 0 && set && !strcmp(got.name, "gold") &&
	      got.limits.running == 9 && got.limits.vcpus == 4 && !got.limits.creates_per_hour);
	/* A workspace on it, then the plan changed: seen at the next call. */
	char ws[ID_MAX];
	CHECK(store_workspace_ensure(st, "gilded", ws) == 0 && store_plan_set(st, ws, "gold", NULL, false) == 0);
	struct ops_caller c = { .store = st, .plans = &p, .workspace = ws };
	CHECK(ops_workspace_plan(&c, &got) == 0 && got.limits.running == 9);
	CHECK(store_plandef_set(st, "gold", "{\"running\":1}") == 0);
	CHECK(ops_workspace_plan(&c, &got) == 0 && got.limits.running == 1 && !got.limits.vcpus);
	/* Each once, by name; get of one never set is -ENOENT. */
	char *limits = NULL;
	int64_t ms = 0;
	CHECK(store_plandef_get(st, "gold", &limits, &ms) == 0 && limits && !strcmp(limits, "{\"running\":1}") &&
	      ms > 0);
	free(limits);
	CHECK(store_plandef_get(st, "silver", &limits, NULL) == -ENOENT && !limits);
	/* Bad stored text is an error naming the plan, not no limits. */
	CHECK(store_plandef_set(st, "gold", "{\"runing\":1}") == 0);
	CHECK(plans_resolve(&p, st, "gold", &got, NULL) == -EINVAL && strstr(errmsg(), "gold"));
	store_close(st);
}

static void creates_since(void)
{
	struct store *st = open_store();
	if (!st)
		return;
	char ws[ID_MAX], other[ID_MAX];
	CHECK(store_workspace_ensure(st, "gamma", ws) == 0 && store_workspace_ensure(st, "delta", other) == 0);
	int64_t now = wall_ms();
	for (int i = 0; i < 6; i++) {
		struct sbx_row r = { 0 };
		snprintf(r.id, sizeof r.id, "sbx_plans%02d", i);
		snprintf(r.workspace, sizeof r.workspace, "%s", i == 5 ? other : ws);
		snprintf(r.template, sizeof r.template, "minimal");
		r.state = i == 1 ? SBX_DELETED : SBX_RUNNING;	/* deleted ones count too */
		r.vcpus = 1, r.memory_mib = 256;
		r.created_ms = r.updated_ms = r.active_ms = now - (5 - i) * 1000;
		CHECK(store_sandbox_save(st, &r) == 0);
	}
	int64_t t[8];
	int n = -1;
	CHECK(store_creates_since(st, ws, now - 3500, t, 8, &n) == 0 && n == 3);
	CHECK(n == 3 && t[0] == now - 3000 && t[1] == now - 2000 && t[2] == now - 1000);
	CHECK(store_creates_since(st, ws, 0, t, 2, &n) == 0 && n == 2 && t[0] == now - 5000);
	CHECK(store_creates_since(st, other, 0, t, 8, &n) == 0 && n == 1);
	store_close(st);
}

/* Prices parse exactly; costs are integer micro-dollars rounded once;
 * months are UTC calendar months (ops/billing.h). */
static void billing_arithmetic(void)
{
	int64_t m = -1;
	CHECK(price_parse("0.054", "p", &m) == 0 && m == 54000);
	CHECK(price_parse("0.0162", "p", &m) == 0 && m == 16200);
	CHECK(price_parse("12", "p", &m) == 0 && m == 12000000);
	CHECK(price_parse("0.000001", "p", &m) == 0 && m == 1);
	CHECK(price_parse("1000000", "p", &m) == 0 && m == 1000000000000LL);
	const char *bad[] = { "", ".5", "-1", "0.0000001", "1e3", "0.05x", "1000001", "99999999999999999999" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK(price_parse(bad[i], "--price-vcpu-hour", &m) == -EINVAL);
		CHECK(strstr(errmsg(), "--price-vcpu-hour") != NULL);
	}
	struct prices p = { PRICE_VCPU_HOUR_DEFAULT, PRICE_GIB_HOUR_DEFAULT };
	/* One vCPU-hour is the price; one GiB-hour too. */
	CHECK(cost_cpu(&p, 3600LL * 1000000) == 54000);
	CHECK(cost_mem(&p, 1024LL * 3600) == 16200);
	/* 10 s of a vCPU: 54000 * 10 / 3600 = 150. 256 MiB for 10 min: 16200 / 4 / 6 = 675. */
	CHECK(cost_cpu(&p, 10 * 1000000) == 150);
	CHECK(cost_mem(&p, 256LL * 600) == 675);
	/* Rounded to the nearest: 1 s is 15 micro-dollars exactly; 0.01 s 0.15 -> 0. */
	CHECK(cost_cpu(&p, 1000000) == 15 && cost_cpu(&p, 10000) == 0 && cost_cpu(&p, 40000) == 1);
	CHECK(cost_cpu(&p, 0) == 0 && cost_mem(&p, -5) == 0);
	/* A year of 10,000 vCPUs does not overflow. */
	CHECK(cost_cpu(&p, 10000LL * 365 * 86400 * 1000000) == 10000LL * 365 * 24 * 54000);
	int64_t start, end;
	month_bounds(1796083200000LL + 12345, &start, &end);	/* 2026-12-01T00:00:12Z */
	CHECK(start == 1796083200000LL && end == 1798761600000LL);	/* to 2027-01-01 */
	month_bounds(1798761600000LL - 1, &start, &end);	/* the last ms of December */
	CHECK(start == 1796083200000LL && end == 1798761600000LL);
	CHECK(day_start(1796083200000LL + 86400000 + 5) == 1796083200000LL + 86400000);
	/* The free plan's credit is $5.40; the others have none. */
	struct plans ps;
	plans_init(&ps);
	CHECK(plans_find(&ps, "free")->limits.credit_microdollars == 5400000);
	CHECK(plans_find(&ps, "pro")->limits.credit_microdollars == 0);
	CHECK(ps.prices.vcpu_hour == 54000 && ps.prices.gib_hour == 16200);
}

int main(void)
{
	int failures = 0;
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(shipped_plans);
	RUN(plans_file);
	RUN(workspace_plan_in_the_store);
	RUN(operators_plans);
	RUN(creates_since);
	RUN(billing_arithmetic);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		failures++;
	return failures ? 1 : 0;
}
