#include "ops/plan.h"
#include "store/store.h"
#include "common/err.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const plan_limit_names[] = {
	"running", "creates_per_hour", "vcpus", "memory_mib", "max_ttl_seconds",
	"ttl_absolute", "idle_hibernate", "hibernated_retention_seconds", "credit_microdollars", "no_workspace_mcp",
	"hibernated", "snapshots", "storage_mib", "volumes", "volume_mib", "templates", "template_builds", "build_seconds", "template_mib", "disk_mib", NULL,
};

/* The limits that are switches: 0 or 1. */
static bool is_switch(int i)
{
	return i == 5 || i == 6 || i == 9;
}

static int64_t *limit_field(struct plan_limits *l, int i)
{
	int64_t *f[] = { &l->running, &l->creates_per_hour, &l->vcpus, &l->memory_mib,
			 &l->max_ttl_seconds, &l->ttl_absolute, &l->idle_hibernate,
			 &l->hibernated_retention_seconds, &l->credit_microdollars, &l->no_workspace_mcp,
			 &l->hibernated, &l->snapshots, &l->storage_mib, &l->volumes, &l->volume_mib,
			 &l->templates, &l->template_builds, &l->build_seconds, &l->template_mib, &l->disk_mib };
	return f[i];
}

/* The platform's published plans (docs/billing.md): the free plan's
 * numbers are its; the paid plans' concurrency and sizes are kiln's
 * defaults, for the operator to change. */
static const struct plan shipped[] = {
	{ "free", { 5, 60, 8, 8192, 3600, 1, 0, 0, 5400000, 0, 10, 10, 10 * 1024, 1, 1024, 3, 1, 900, 4096, 4096 } },	/* $5.40 a month */
	{ "pro", { 100, 1200, 8, 32768, 7 * 86400, 0, 0, 0, 0, 0, 200, 200, 100 * 1024, 20, 65536, 20, 2, 3600, 16384, 65536 } },
	{ "team", { 500, 6000, 8, 65536, 30 * 86400, 0, 0, 0, 0, 0, 1000, 1000, 1024 * 1024, 100, 65536, 100, 5, 3600, 65536, 262144 } },
	{ "enterprise", { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 } },
};

void plans_init(struct plans *p)
{
	memset(p, 0, sizeof *p);
	for (size_t i = 0; i < sizeof shipped / sizeof shipped[0]; i++)
		p->plan[p->n++] = shipped[i];
	snprintf(p->default_plan, sizeof p->default_plan, "enterprise");
	p->window_ms = 3600 * 1000;
	p->prices = (struct prices){ PRICE_VCPU_HOUR_DEFAULT, PRICE_GIB_HOUR_DEFAULT };
}

const struct plan *plans_find(const struct plans *p, const char *name)
{
	for (int i = 0; i < p->n; i++)
		if (!strcmp(p->plan[i].name, name))
			return &p->plan[i];
	return NULL;
}

int plan_limits_apply(struct plan_limits *l, const json_t *o, const char *what)
{
	if (!json_is_object(o))
		return errf(EINVAL, "%s: limits must be a JSON object", what);
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)o, key, v) {
		int i = 0;
		while (plan_limit_names[i] && strcmp(plan_limit_names[i], key))
			i++;
		if (!plan_limit_names[i]) {
			/* The list from the table, so that it cannot leave one out. */
			char known[512];
			size_t n = 0;
			for (int k = 0; plan_limit_names[k] && n < sizeof known; k++)
				n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", k ? ", " : "",
						      plan_limit_names[k]);
			return errf(EINVAL, "%s: unknown limit '%.64s' (known: %s)", what, key, known);
		}
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return errf(EINVAL, "%s: limit '%s' must be a whole number, 0 or more (0: none)",
				    what, key);
		if (is_switch(i) && json_integer_value(v) > 1)
			return errf(EINVAL, "%s: '%s' is 0 (off) or 1 (on)", what, key);
		*limit_field(l, i) = json_integer_value(v);
	}
	return 0;
}

json_t *plan_limits_json(const struct plan_limits *l)
{
	json_t *o = json_object();
	for (int i = 0; o && plan_limit_names[i]; i++)
		json_object_set_new(o, plan_limit_names[i], json_integer(*limit_field((struct plan_limits *)l, i)));
	return o;
}

bool plan_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= PLAN_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
			return false;
	return true;
}

int plans_load(struct plans *p, const char *path)
{
	json_error_t e;
	json_t *root = json_load_file(path, 0, &e);
	if (!root)
		return errf(EINVAL, "plans file %s: line %d: %s", path, e.line, e.text);
	int rc = json_is_object(root) ? 0 : errf(EINVAL, "plans file %s: not a JSON object of plans", path);
	const char *name;
	json_t *v;
	json_object_foreach(root, name, v) {
		if (rc < 0)
			break;
		if (!plan_name_ok(name)) {
			rc = errf(EINVAL, "plans file %s: plan name '%.64s': 1 to %d of a-z, 0-9, - and _",
				  path, name, PLAN_NAME_MAX - 1);
			break;
		}
		struct plan *pl = (struct plan *)plans_find(p, name);
		if (!pl) {
			if (p->n == PLANS_MAX) {
				rc = errf(EINVAL, "plans file %s: more than %d plans", path, PLANS_MAX);
				break;
			}
			pl = &p->plan[p->n++];
			memset(pl, 0, sizeof *pl);
			snprintf(pl->name, sizeof pl->name, "%s", name);
		}
		char what[PATH_MAX + 64];
		snprintf(what, sizeof what, "plans file %s: plan %s", path, name);
		rc = plan_limits_apply(&pl->limits, v, what);
	}
	json_decref(root);
	return rc;
}

int plans_resolve(const struct plans *p, struct store *st, const char *name, struct plan *out, bool *operators)
{
	if (operators)
		*operators = false;
	const struct plan *base = plans_find(p, name);
	char *text = NULL;
	int rc = st && plan_name_ok(name) ? store_plandef_get(st, name, &text, NULL) : -ENOENT;
	if (rc < 0 && rc != -ENOENT)
		return rc;
	if (!base && rc == -ENOENT)
		return errf(ENOENT, "no plan '%.32s' on this server", name);
	memset(out, 0, sizeof *out);
	if (base)
		*out = *base;
	else
		snprintf(out->name, sizeof out->name, "%s", name);
	if (!text)
		return 0;
	if (operators)
		*operators = true;
	json_error_t e;
	json_t *o = json_loads(text, 0, &e);
	free(text);
	char what[64];
	snprintf(what, sizeof what, "the operator's plan %s", out->name);
	rc = o ? plan_limits_apply(&out->limits, o, what) : errf(EIO, "%s: %s", what, e.text);
	json_decref(o);
	return rc;
}
