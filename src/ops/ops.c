#include "ops/ops.h"
#include "ops/credit.h"
#include "ops/fields.h"
#include "ops/template.h"
#include "ops/validate.h"
#include "net/net.h"
#include "net/netpolicy.h"
#include "common/err.h"
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ops_sandbox(const struct ops_caller *c, const char *id, struct sbx_row *out)
{
	int rc = id && v_is_id(id, "sbx_") ? hostif_get(c->hostif, c->workspace, id, c->touch, out) : -ENOENT;
	if (rc == -ENOENT)
		return errf(ENOENT, "sandbox %.40s not found", id ? id : "");
	return rc;
}

struct tmpl_names {
	const char *want;
	bool found;
	json_t *names;
	char list[256];
};

static int add_tmpl_name(void *ctx, const struct hostif_template *t)
{
	struct tmpl_names *n = ctx;
	const char *name = t->name;
	if (strcmp(name, n->want) == 0)
		n->found = true;
	size_t len = strlen(n->list);
	snprintf(n->list + len, sizeof n->list - len, "%s%s", len ? ", " : "", name);
	return json_array_append_new(n->names, json_string(name));
}

int ops_template_known(struct hostif *hi, const char *ws, const char *name, json_t **names)
{
	struct tmpl_names n = { .want = name, .names = json_array() };
	*names = NULL;
	if (!n.names)
		return errf(ENOMEM, "out of memory");
	/* Not known because no host could say (a cluster's hosts down) is
	 * that error, not "unknown template". */
	int rc = ops_templates_each(hi, ws, add_tmpl_name, &n);
	if (rc < 0) {
		json_decref(n.names);
		return rc;
	}
	if (n.found) {
		json_decref(n.names);
		return 0;
	}
	*names = n.names;
	return errf(ENOENT, "unknown template '%.64s'; the templates are: %s", name, n.list);
}

/* idle_pause_seconds: paused after this long without a request (0:
 * never), a week at most; the TTL rule still acts at ttl_seconds. */
#define IDLE_PAUSE_MAX 604800

/* The egress policy's fields are checked by its parser
 * (net/netpolicy.h), whose messages REST has always answered. */
static int policy_check(const json_t *obj, const char *name)
{
	(void)name;
	char *policy = NULL;
	int rc = netpolicy_from_request(obj, &policy);
	free(policy);
	return rc;
}

static int volumes_check(const json_t *obj, const char *name)
{
	(void)name;
	return ops_volumes_check(obj);
}

#define POLICY_FIELDS \
	{ .name = "allow_out", .type = FIELD_STRINGS, .max = NET_MAX_CIDRS, .check = policy_check, \
	  .description = "IPv4 addresses or CIDRs; when given, only these can be reached." }, \
	{ .name = "deny_out", .type = FIELD_STRINGS, .max = NET_MAX_CIDRS, .check = policy_check, \
	  .description = "IPv4 addresses or CIDRs never reachable." }, \
	{ .name = "allow_internet", .type = FIELD_BOOLEAN, .check = policy_check, \
	  .description = "false: nothing leaves the sandbox (default true)." }

/* In the order they are checked (the first error is the one told). A
 * field added here is in create_sandbox's schema too. */
const struct field ops_create_fields[] = {
	{ .name = "template", .type = FIELD_STRING, .max = OPS_NAME_MAX,
	  .description = "base (default) or minimal." },
	{ .name = "from_snapshot", .type = FIELD_STRING, .max = OPS_NAME_MAX,
	  .description = "A snapshot (snap_...) to start from instead of a template: its memory and disk." },
	{ .name = "ttl_seconds", .type = FIELD_INTEGER, .min = 0, .max = FIELD_NO_MAX,
	  .description = "Delete it after this long without use (0: never; default and most: the server's)." },
	{ .name = "persistent", .type = FIELD_BOOLEAN,
	  .description = "true: hibernate it when idle for its TTL instead of deleting it (not on plans whose "
			 "TTL counts from creation)." },
	{ .name = "idle_pause_seconds", .type = FIELD_INTEGER, .min = 0, .max = IDLE_PAUSE_MAX,
	  .description = "Pause it (vCPUs stopped, memory kept) after this long without use, before its TTL "
			 "acts; the next use resumes it (0, the default: never)." },
	{ .name = "disk_mib", .type = FIELD_INTEGER, .min = OPS_DISK_MIB_MIN, .max = OPS_DISK_MIB_MAX,
	  .description = "The root disk's size in MiB: at least the template's (or snapshot's), at most the "
			 "plan's disk_mib; the root filesystem takes all of it (default: the template's size)." },
	{ .name = "metadata", .type = FIELD_MAP, .max = OPS_METADATA_MAX, .key_max = OPS_METADATA_KEY_MAX,
	  .item_max = OPS_METADATA_VALUE_MAX, .description = "Labels of your own (list filters on them)." },
	{ .name = "env", .type = FIELD_MAP, .env_names = true, .max = OPS_ENV_MAX, .key_max = OPS_ENV_KEY_MAX,
	  .item_max = OPS_ENV_VALUE_MAX, .description = "Environment of every command run in it." },
	POLICY_FIELDS,
	{ .name = "volumes", .type = FIELD_OBJECTS, .max = HOST_VOLUMES_MAX, .items = ops_volume_entry_fields,
	  .check = volumes_check,
	  .description = "Named volumes (POST /v1/volumes) mounted at path; a read-write one is this sandbox's alone." },
	{ .type = FIELD_END }
};
/* ops_create_service's: a create's and the ports it opens to its workspace. */
static const struct field service_fields[] = {
	{ .type = FIELD_INCLUDE, .items = ops_create_fields },
	{ .name = "workspace_ports", .type = FIELD_INTEGERS, .max = NET_WS_PORTS_MAX, .item_max = 65535,
	  .check = policy_check },
	{ .type = FIELD_END }
};

const struct field ops_lifecycle_fields[] = {
	{ .name = "ttl_seconds", .type = FIELD_INTEGER, .min = 0, .max = FIELD_NO_MAX },
	{ .name = "persistent", .type = FIELD_BOOLEAN },
	{ .name = "idle_pause_seconds", .type = FIELD_INTEGER, .min = 0, .max = IDLE_PAUSE_MAX },
	{ .type = FIELD_END }
};

const struct field ops_network_fields[] = { POLICY_FIELDS, { .type = FIELD_END } };

const struct field ops_fork_fields[] = {
	{ .name = "count", .type = FIELD_INTEGER, .min = 1, .max = HOST_FORK_MAX,
	  .description = "How many children (default 1)." },
	{ .type = FIELD_END }
};

int ops_fields_check(const struct ops_caller *c, const struct field *t, const json_t *args,
		     const struct field_cap *caps)
{
	return args && args == c->shaped ? fields_check_rest(t, args, caps) : fields_check(t, args, caps);
}

int ops_workspace_plan(const struct ops_caller *c, struct plan *out)
{
	memset(out, 0, sizeof *out);
	if (!c->plans)
		return 0;
	char name[NAME_MAX_LEN];
	char *own = NULL;
	int rc = c->store ? store_plan_get(c->store, c->workspace, name, &own) : -ENOENT;
	if (rc == -ENOENT)
		snprintf(name, sizeof name, "%s", c->plans->default_plan);
	else if (rc < 0)
		return rc;
	rc = plans_resolve(c->plans, c->store, name, out, NULL);
	if (rc < 0) {
		free(own);
		return rc == -ENOENT ? errf(EIO, "workspace plan '%.32s' is not a plan of this server", name) : rc;
	}
	if (own) {
		json_error_t e;
		json_t *o = json_loads(own, 0, &e);
		rc = o ? plan_limits_apply(&out->limits, o, "the workspace's own limits")
		       : errf(EIO, "the workspace's own limits: %s", e.text);
		json_decref(o);
		free(own);
	}
	return rc;
}

void ops_quota_note(const struct ops_caller *c, const struct plan *p, bool applied)
{
	if (!c->quota)
		return;
	memset(c->quota, 0, sizeof *c->quota);
	c->quota->applied = applied;
	snprintf(c->quota->plan, sizeof c->quota->plan, "%s", p->name);
	c->quota->limits = p->limits;
}

/* The plan's limits as the host's caps, the quota noted for the caller;
 * *caps_p NULL when the plan limits nothing the host counts. */
static int plan_caps(const struct ops_caller *c, struct plan *p, struct ws_caps *caps,
		     const struct ws_caps **caps_p, struct ws_caps_report **rep)
{
	*caps_p = NULL;
	*rep = NULL;
	int rc = ops_workspace_plan(c, p);
	if (rc < 0)
		return rc;
	const struct plan_limits *l = &p->limits;
	*caps = (struct ws_caps){ .running = (int)l->running, .creates = (int)l->creates_per_hour,
				  .window_ms = c->plans ? c->plans->window_ms : 0,
				  .vcpus = (int)l->vcpus, .memory_mib = (int)l->memory_mib };
	bool any = caps->running || caps->creates || caps->vcpus || caps->memory_mib;
	ops_quota_note(c, p, any);
	if (c->quota) {
		c->quota->window_ms = caps->window_ms;
		c->quota->window = caps->creates > 0;	/* the host counts it (host_admit_ws) */
	}
	if (any) {
		*caps_p = caps;
		*rep = c->quota ? &c->quota->report : NULL;
	}
	return 0;
}

int ops_workspace_caps(const struct ops_caller *c, struct ws_caps *caps)
{
	struct plan p;
	const struct ws_caps *capsp;
	struct ws_caps_report *rep;
	int rc = plan_caps(c, &p, caps, &capsp, &rep);
	return rc < 0 ? rc : capsp != NULL;
}

/* The idle rule of a sandbox persistent or not under plan p (docs/api.md
 * "Persistent sandboxes"): persistent is hibernated when idle and never
 * deleted by its TTL; not persistent follows the plan's rule, or (when
 * the plan's own rule is already that) is deleted when idle. A plan
 * that deletes sandboxes a fixed time after their creation (free) has no
 * persistent ones: -EPERM. */
static int idle_rule(const struct plan *p, bool persistent, struct lifecycle_change *lc)
{
	lc->set_idle = true;
	if (persistent && p->limits.ttl_absolute)
		return errf(EPERM, "plan %s deletes a sandbox %lld seconds after its creation: it has no "
			    "persistent sandboxes", p->name, (long long)p->limits.max_ttl_seconds);
	if (persistent) {
		lc->idle_hibernate = true;
		lc->retention_seconds = 0;
	} else if (p->limits.idle_hibernate && p->limits.hibernated_retention_seconds > 0) {
		lc->idle_hibernate = true;
		lc->retention_seconds = p->limits.hibernated_retention_seconds;
	} else {
		lc->idle_hibernate = false;
		lc->retention_seconds = 0;
	}
	return 0;
}

/* A refusal names the plan after what the host said. */
static int quota_error(const struct plan *p, int rc)
{
	if (rc != -EDQUOT)
		return rc;
	char why[400];
	snprintf(why, sizeof why, "%s", errmsg());
	return errf(EDQUOT, "%s (plan %s)", why, p->name);
}

static int create(const struct ops_caller *c, const json_t *args, const struct field *fields, struct sbx_row *out);

/* A disk over the plan's disk_mib: refused as the host refuses a sandbox
 * over its vcpus or memory_mib (ws_caps.c), the limit named. */
static int disk_refused(const struct plan *p, struct ws_caps_report *rep, int64_t mib)
{
	if (rep) {
		memset(rep, 0, sizeof *rep);
		snprintf(rep->limit, sizeof rep->limit, "disk_mib");
		rep->value = p->limits.disk_mib;
	}
	return errf(EDQUOT, "a sandbox disk of %lld MiB is over this workspace's limit of %lld MiB (plan %s)",
		    (long long)mib, (long long)p->limits.disk_mib, p->name);
}

int ops_create(const struct ops_caller *c, const json_t *args, struct sbx_row *out)
{
	return create(c, args, ops_create_fields, out);
}

int ops_create_service(const struct ops_caller *c, const json_t *args, struct sbx_row *out)
{
	return create(c, args, service_fields, out);
}

static int create(const struct ops_caller *c, const json_t *args, const struct field *fields, struct sbx_row *out)
{
	const char *tmpl = NULL, *snap = NULL;
	int64_t ttl = -1, idle_pause = 0, disk_mib = 0;
	bool persistent = false;
	struct lifecycle_change rule = { 0 };
	json_t *metadata = NULL, *env = NULL;
	char *policy = NULL;
	struct plan plan = { 0 };
	struct ws_caps caps;
	const struct ws_caps *capsp = NULL;
	struct ws_caps_report scratch, *rep = NULL;
	int rc = plan_caps(c, &plan, &caps, &capsp, &rep);
	/* The caller's report also without caps: a cluster's refusal for a
	 * template's copy on its way says when to retry in it. */
	if (!rep)
		rep = c->quota ? &c->quota->report : capsp ? &scratch : NULL;
	rc = rc ?: ops_credit_check(c);
	int64_t max_ttl = c->max_ttl;
	if (plan.limits.max_ttl_seconds && plan.limits.max_ttl_seconds < max_ttl)
		max_ttl = plan.limits.max_ttl_seconds;
	const struct field_cap cap[] = { { "ttl_seconds", max_ttl }, { NULL, 0 } };
	rc = rc ?: ops_fields_check(c, fields, args, cap);
	if (rc == 0) {
		tmpl = field_str(args, "template", NULL);
		snap = field_str(args, "from_snapshot", NULL);
		ttl = field_int(args, "ttl_seconds", -1);
		persistent = field_bool(args, "persistent", false);
		idle_pause = field_int(args, "idle_pause_seconds", 0);
		disk_mib = field_int(args, "disk_mib", 0);
		metadata = field_get(args, "metadata");
		env = field_get(args, "env");
	}
	if (rc == 0 && plan.limits.disk_mib && disk_mib > plan.limits.disk_mib)
		rc = disk_refused(&plan, rep, disk_mib);
	if (rc == 0 && persistent)
		rc = idle_rule(&plan, true, &rule);
	rc = rc ?: netpolicy_from_request(args, &policy);
	if (rc == 0 && tmpl && snap)
		rc = errf(EINVAL, "give either 'template' or 'from_snapshot', not both");
	json_t *names = NULL;
	char host_tmpl[OPS_TEMPLATE_HOST_NAME] = "";
	if (rc == 0 && tmpl)
		rc = ops_template_known(c->hostif, c->workspace, tmpl, &names);
	json_decref(names);
	/* The host's name of it: the workspace's own, or a shared one. */
	if (rc == 0 && tmpl)
		rc = ops_template_resolve(c->hostif, c->workspace, tmpl, host_tmpl);
	if (rc == 0 && snap && !v_is_id(snap, "snap_"))
		rc = errf(ENOENT, "snapshot %.64s not found", snap);
	struct ops_volumes vols = { .n = 0 };
	rc = rc ?: ops_volumes_parse(c, args, &vols);
	if (rc == 0 && vols.n && snap)
		rc = errf(EINVAL, "'volumes' go with a template, not 'from_snapshot'");
	if (rc < 0) {
		free(policy);
		return rc;
	}
	char *meta_text = metadata ? json_dumps(metadata, JSON_COMPACT) : NULL;
	char *env_text = env ? json_dumps(env, JSON_COMPACT) : NULL;
	if ((metadata && !meta_text) || (env && !env_text))
		rc = errf(ENOMEM, "out of memory");
	/* Never expiring is over any cap of the plan's. */
	if (rc == 0 && ttl == 0 && plan.limits.max_ttl_seconds)
		rc = errf(EINVAL, "ttl_seconds 0 (no expiry) is over plan %s's limit of %lld seconds",
			  plan.name, (long long)plan.limits.max_ttl_seconds);
	struct create_req cr = {
		.workspace = c->workspace,
		.caps = capsp,
		.report = rep,
		.template = snap ? NULL : (tmpl ? host_tmpl : "base"),
		.snapshot = snap,
		.ttl_seconds = ttl,
		.ttl_cap = plan.limits.max_ttl_seconds,
		.ttl_absolute = plan.limits.ttl_absolute != 0,
		.idle_hibernate = persistent || plan.limits.idle_hibernate != 0,
		.retention_seconds = persistent ? 0 : plan.limits.hibernated_retention_seconds,
		.idle_pause_seconds = idle_pause > 0 ? idle_pause : 0,
		.disk_mib = disk_mib,
		.metadata = meta_text,
		.env = env_text,
		.net_policy = policy,
		.arrival_ns = c->arrival_ns,
		.volumes = vols.n ? vols.v : NULL,
		.nvolumes = vols.n,
	};
	if (rc == 0)
		rc = quota_error(&plan, hostif_create(c->hostif, &cr, out));
	free(meta_text);
	free(env_text);
	free(policy);
	return rc;
}

int ops_set_lifecycle(const struct ops_caller *c, const char *id, const json_t *args, struct sbx_row *out)
{
	struct plan plan = { 0 };
	int rc = ops_workspace_plan(c, &plan);
	int64_t max_ttl = c->max_ttl, ttl = -1;
	if (plan.limits.max_ttl_seconds && plan.limits.max_ttl_seconds < max_ttl)
		max_ttl = plan.limits.max_ttl_seconds;
	bool persistent = false;
	int64_t idle_pause = -1;
	struct lifecycle_change lc = { 0 };
	const struct field_cap cap[] = { { "ttl_seconds", max_ttl }, { NULL, 0 } };
	rc = rc ?: ops_fields_check(c, ops_lifecycle_fields, args, cap);
	if (rc == 0) {
		ttl = field_int(args, "ttl_seconds", -1);
		persistent = field_bool(args, "persistent", false);
		idle_pause = field_int(args, "idle_pause_seconds", -1);
	}
	if (rc == 0 && ttl < 0 && idle_pause < 0 && !json_object_get(args, "persistent"))
		rc = errf(EINVAL, "give 'ttl_seconds', 'persistent', 'idle_pause_seconds' or more of them");
	if (rc == 0 && ttl == 0 && plan.limits.max_ttl_seconds)
		rc = errf(EINVAL, "ttl_seconds 0 (no expiry) is over plan %s's limit of %lld seconds",
			  plan.name, (long long)plan.limits.max_ttl_seconds);
	if (rc == 0 && json_object_get(args, "persistent"))
		rc = idle_rule(&plan, persistent, &lc);
	if (rc < 0)
		return rc;
	lc.set_ttl = ttl >= 0;
	lc.ttl_seconds = ttl;
	lc.set_pause = idle_pause >= 0;
	lc.idle_pause_seconds = idle_pause;
	return hostif_set_lifecycle(c->hostif, c->workspace, id, &lc, out);
}

int ops_set_network(const struct ops_caller *c, const char *id, const json_t *args, struct sbx_row *out)
{
	char *policy = NULL;
	int rc = ops_fields_check(c, ops_network_fields, args, NULL);
	/* No fields is the open policy, said explicitly (for no fields
	 * netpolicy_from_request gives no policy at all). */
	json_t *open_policy = json_pack("{s:b}", "allow_internet", 1);
	rc = rc ?: netpolicy_from_request(args && json_object_size(args) ? args : open_policy, &policy);
	json_decref(open_policy);
	rc = rc ?: ops_sandbox(c, id, NULL);
	rc = rc ?: hostif_set_network(c->hostif, c->workspace, id, policy, out);
	free(policy);
	return rc;
}

int ops_fork(const struct ops_caller *c, const char *parent_id, const json_t *args, bool tree,
	     struct ops_forked *f)
{
	int64_t count = 1;
	f->count = f->made = 0;
	f->why[0] = 0;
	struct plan plan = { 0 };
	struct ws_caps caps;
	const struct ws_caps *capsp = NULL;
	struct ws_caps_report scratch, *rep = NULL;
	/* The rest of args is the front end's (MCP's sandbox_id). */
	int rc = fields_check_one(&ops_fork_fields[0], args, NULL);
	count = field_int(args, "count", 1);
	rc = rc ?: plan_caps(c, &plan, &caps, &capsp, &rep);
	if (capsp && !rep)
		rep = &scratch;
	rc = rc ?: ops_sandbox(c, parent_id, NULL);
	rc = rc ?: ops_credit_check(c);
	if (rc < 0)
		return rc;
	f->count = (int)count;
	struct hostif_fork req = { .workspace = c->workspace, .id = parent_id, .count = f->count,
				   .tree = tree, .caps = capsp, .report = rep };
	rc = quota_error(&plan, hostif_fork(c->hostif, &req, f->kids, &f->made));
	if (rc < 0)
		snprintf(f->why, sizeof f->why, "%s", errmsg());
	return rc;
}

void ops_forked_clear(struct ops_forked *f)
{
	for (int i = 0; i < f->made; i++)
		sbx_row_clear(&f->kids[i]);
	f->made = 0;
}

/* ---- promote -------------------------------------------------------------------- */

struct siblings {
	const char *parent, *keep;
	char (*ids)[ID_MAX];
	int n, cap;
};

static int add_sibling(void *ctx, const struct sbx_row *r)
{
	struct siblings *s = ctx;
	if (strcmp(r->parent, s->parent) || !strcmp(r->id, s->keep) || r->state == SBX_DELETING ||
	    r->state == SBX_DELETED)
		return 0;
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 16;
		char (*ids)[ID_MAX] = realloc(s->ids, (size_t)cap * sizeof *ids);
		if (!ids)
			return -ENOMEM;
		s->ids = ids, s->cap = cap;
	}
	snprintf(s->ids[s->n++], ID_MAX, "%s", r->id);
	return 0;
}

/* Delete the caller's sandbox id; what happened goes to fn. */
static void delete_reported(const struct ops_caller *c, const char *id, bool is_parent, ops_promote_fn *fn,
			    void *ctx)
{
	int rc = hostif_get(c->hostif, c->workspace, id, false, NULL);
	if (rc < 0)
		rc = errf(ENOENT, "sandbox %s was already gone", id);
	else
		rc = hostif_delete(c->hostif, c->workspace, id);
	fn(ctx, id, is_parent, rc);
}

int ops_promote(const struct ops_caller *c, const char *id, bool delete_parent, char parent[ID_MAX],
		ops_promote_fn *fn, void *ctx)
{
	struct sbx_row row;
	int rc = ops_sandbox(c, id, &row);
	if (rc < 0)
		return rc;
	snprintf(parent, ID_MAX, "%s", row.parent);
	bool live = row.state == SBX_RUNNING || row.state == SBX_PAUSED || row.state == SBX_HIBERNATED;
	sbx_row_clear(&row);
	if (!parent[0])
		return errf(EINVAL, "sandbox %s was not forked: there are no siblings to promote it over", id);
	if (!live)
		return errf(EBUSY, "sandbox %s is not running or hibernated: promote a live child", id);
	struct siblings s = { .parent = parent, .keep = id };
	rc = hostif_each(c->hostif, c->workspace, add_sibling, &s);
	if (rc < 0) {
		free(s.ids);
		return rc;
	}
	for (int i = 0; i < s.n; i++)
		delete_reported(c, s.ids[i], false, fn, ctx);
	free(s.ids);
	if (delete_parent)
		delete_reported(c, parent, true, fn, ctx);
	return 0;
}

char **ops_env_merge(const char *sandbox_env, const json_t *request_env)
{
	json_t *merged = sandbox_env ? json_loads(sandbox_env, 0, NULL) : NULL;
	if (!json_is_object(merged)) {
		json_decref(merged);
		merged = json_object();
	}
	if (!merged)
		return NULL;
	if (request_env)
		json_object_update(merged, (json_t *)request_env);
	size_t n = json_object_size(merged), bytes = (n + 1) * sizeof(char *);
	const char *k;
	json_t *v;
	json_object_foreach(merged, k, v)
		bytes += strlen(k) + json_string_length(v) + 2;
	char **env = malloc(bytes);
	if (env) {
		char *p = (char *)(env + n + 1);
		size_t i = 0;
		json_object_foreach(merged, k, v) {
			env[i++] = p;
			p = stpcpy(p, k);
			*p++ = '=';
			p = stpcpy(p, json_string_value(v));
			p++;
		}
		env[i] = NULL;
	}
	json_decref(merged);
	return env;
}
