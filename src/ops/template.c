#include "ops/template.h"
#include "ops/plan.h"
#include "common/err.h"
#include "net/net.h"

#include <ctype.h>
#include <errno.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX_HEX 10	/* "w" + 10 hex + "_" */

bool ops_template_name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > OPS_TEMPLATE_NAME_MAX || name[0] == '-' || name[0] == '_')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)name[i]) && !isdigit((unsigned char)name[i]) && name[i] != '-' &&
		    name[i] != '_')
			return false;
	return true;
}

void ops_template_host_name(const char *ws, const char *name, char out[OPS_TEMPLATE_HOST_NAME])
{
	struct sha256_ctx h;
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_init(&h);
	sha256_update(&h, strlen(ws), (const uint8_t *)ws);
	sha256_digest(&h, sizeof d, d);
	char hex[PREFIX_HEX + 1];
	for (int i = 0; i < PREFIX_HEX / 2; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	snprintf(out, OPS_TEMPLATE_HOST_NAME, "w%s_%s", hex, name);
}

bool ops_template_qualified(const char *n)
{
	if (n[0] != 'w' || strlen(n) < PREFIX_HEX + 3 || n[PREFIX_HEX + 1] != '_')
		return false;
	for (int i = 1; i <= PREFIX_HEX; i++)
		if (!isdigit((unsigned char)n[i]) && !(n[i] >= 'a' && n[i] <= 'f'))
			return false;
	return true;
}

static void unqualify(char *msg, const char *host, const char *name);

/* The build's description names the context's directory on the host: not
 * the workspace's business. */
static void own_description(char *d, size_t cap)
{
	if (!strncmp(d, "Dockerfile in ", 14))
		snprintf(d, cap, "built from a Dockerfile through the API");
}

const char *ops_template_short(const char *n)
{
	return ops_template_qualified(n) ? n + PREFIX_HEX + 2 : n;
}

struct scoped {
	hostif_template_fn *fn;
	void *fctx;
	char prefix[PREFIX_HEX + 3];	/* the workspace's "wHEX_" */
};

static int scoped_one(void *ctx, const struct hostif_template *t)
{
	struct scoped *s = ctx;
	if (!ops_template_qualified(t->name))
		return s->fn(s->fctx, t);
	if (strncmp(t->name, s->prefix, strlen(s->prefix)) != 0)
		return 0;	/* another workspace's */
	struct hostif_template own = *t;
	snprintf(own.name, sizeof own.name, "%s", t->name + strlen(s->prefix));
	own_description(own.description, sizeof own.description);
	return s->fn(s->fctx, &own);
}

int ops_templates_each(struct hostif *hi, const char *ws, hostif_template_fn *fn, void *fctx)
{
	struct scoped s = { .fn = fn, .fctx = fctx };
	char q[OPS_TEMPLATE_HOST_NAME];
	ops_template_host_name(ws ? ws : "", "x", q);
	snprintf(s.prefix, sizeof s.prefix, "%.*s", PREFIX_HEX + 2, q);
	return hostif_templates(hi, scoped_one, &s);
}

struct find {
	const char *want;
	struct hostif_template *out;
	bool found;
};

static int find_one(void *ctx, const struct hostif_template *t)
{
	struct find *f = ctx;
	if (strcmp(t->name, f->want))
		return 0;
	f->found = true;
	if (f->out)
		*f->out = *t;
	return 1;
}

/* A template in the host's listing (a version in service, or compiled in). */
static int listed(struct hostif *hi, const char *host_name, struct hostif_template *out, bool *found)
{
	struct find f = { .want = host_name, .out = out };
	int rc = hostif_templates(hi, find_one, &f);
	*found = f.found;
	return rc < 0 ? rc : 0;
}

int ops_template_resolve(struct hostif *hi, const char *ws, const char *name, char out[OPS_TEMPLATE_HOST_NAME])
{
	bool found = false;
	int rc = 0;
	if (ws && ops_template_name_ok(name)) {
		ops_template_host_name(ws, name, out);
		if ((rc = listed(hi, out, NULL, &found)) < 0 || found)
			return rc;
	}
	if (!ops_template_qualified(name) && strlen(name) < OPS_TEMPLATE_HOST_NAME) {
		if ((rc = listed(hi, name, NULL, &found)) < 0)
			return rc;
		if (found) {
			snprintf(out, OPS_TEMPLATE_HOST_NAME, "%s", name);
			return 0;
		}
	}
	return errf(ENOENT, "unknown template '%.64s'", name);
}

bool ops_build_arg_ok(const char *kv)
{
	const char *eq = strchr(kv, '=');
	if (!eq || eq == kv || eq - kv > 128 || strlen(eq + 1) > 4096)
		return false;
	if (!isalpha((unsigned char)kv[0]) && kv[0] != '_')
		return false;
	for (const char *p = kv; p < eq; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return false;
	return true;
}

/* The Dockerfile's path in the context: relative, no "..", no empty part. */
static int dockerfile_ok(const char *p)
{
	size_t n = strlen(p);
	if (n == 0 || n > 255 || p[0] == '/')
		return errf(EINVAL, "dockerfile '%.64s': want a relative path in the context (1 to 255 bytes)", p);
	for (const char *s = p; *s;) {
		size_t len = strcspn(s, "/");
		if (len == 0 || (len == 2 && s[0] == '.' && s[1] == '.'))
			return errf(EINVAL, "dockerfile '%.64s': an empty part or '..' in the path", p);
		s += len;
		if (*s)
			s++;
	}
	return 0;
}

/* Messages from below name the host's name: the workspace's instead. */
static void unqualify(char *msg, const char *host, const char *name)
{
	size_t hl = strlen(host), nl = strlen(name);
	for (char *p = msg; (p = strstr(p, host));) {
		memmove(p + nl, p + hl, strlen(p + hl) + 1);
		memcpy(p, name, nl);
		p += nl;
	}
}

void ops_template_unqualify(char *msg, const char *ws, const char *name)
{
	char host[OPS_TEMPLATE_HOST_NAME];
	ops_template_host_name(ws, name, host);
	unqualify(msg, host, name);
}

static int unqualified(int rc, const char *host, const char *name)
{
	if (rc >= 0)
		return rc;
	char msg[1024];
	snprintf(msg, sizeof msg, "%s", errmsg());
	unqualify(msg, host, name);
	return errf(-rc, "%s", msg);
}

static int own_name(const struct ops_caller *c, const char *name, char out[OPS_TEMPLATE_HOST_NAME])
{
	if (!ops_template_name_ok(name))
		return errf(ENOENT, "template %.64s not found", name);
	ops_template_host_name(c->workspace, name, out);
	return 0;
}

/* A build's network: none, internet or CIDR[,CIDR...] (the host's
 * --build-net; at most NET_MAX_CIDRS). */
static int build_net_ok(const char *s)
{
	if (!strcmp(s, "none") || !strcmp(s, "internet"))
		return 0;
	char buf[1024];
	if (!s[0] || strlen(s) >= sizeof buf)
		return errf(EINVAL, "build_net: want none, internet or CIDR[,CIDR...]");
	snprintf(buf, sizeof buf, "%s", s);
	int n = 0;
	char *save = NULL;
	for (char *c = strtok_r(buf, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
		struct net_cidr cidr;
		if (++n > NET_MAX_CIDRS || net_parse_cidr(c, &cidr) < 0)
			return errf(EINVAL, "build_net '%.64s': want none, internet or at most %d CIDRs a.b.c.d[/n]",
				    c, NET_MAX_CIDRS);
	}
	return n ? 0 : errf(EINVAL, "build_net: want none, internet or CIDR[,CIDR...]");
}

/* A shape over the plan's size of one sandbox: -EDQUOT naming it (a
 * template none of the workspace's sandboxes could be made of). */
static int shape_over_plan(const struct ops_caller *c, const struct plan *p, const char *limit, int64_t cap,
			   int64_t want)
{
	ops_quota_note(c, p, true);
	if (c->quota) {
		snprintf(c->quota->report.limit, sizeof c->quota->report.limit, "%s", limit);
		c->quota->report.value = cap;
	}
	return errf(EDQUOT, "a template of %lld %s: plan %s makes sandboxes of at most %lld (%s %lld)",
		    (long long)want, strcmp(limit, "vcpus") ? "MiB" : "vCPUs", p->name, (long long)cap, limit,
		    (long long)cap);
}

int ops_template_build(const struct ops_caller *c, const char *name, int tar_fd, const struct ops_build_spec *s)
{
	static const struct ops_build_spec none;
	if (!s)
		s = &none;
	const char *dockerfile = s->dockerfile, *build_net = s->build_net;
	const char *const *build_args = s->build_args;
	int64_t disk_mib = s->disk_mib;
	if (!name || !name[0])
		return errf(EINVAL, "the query's name= is required: the template's name");
	if (!ops_template_name_ok(name))
		return errf(EINVAL, "bad template name '%.64s' (want 1 to %d of a-z, 0-9, '-' and '_', starting "
				    "with a letter or digit)", name, OPS_TEMPLATE_NAME_MAX);
	if (dockerfile) {
		int rc = dockerfile_ok(dockerfile);
		if (rc < 0)
			return rc;
	}
	int n = 0;
	for (; build_args && build_args[n]; n++)
		if (!ops_build_arg_ok(build_args[n]))
			return errf(EINVAL, "build_arg '%.64s': want NAME=VALUE (NAME of letters, digits and '_')",
				    build_args[n]);
	if (n > TBUILD_ARGS_MAX)
		return errf(EINVAL, "more than %d build_arg", TBUILD_ARGS_MAX);
	if (disk_mib && (disk_mib < OPS_TEMPLATE_DISK_MIN_MIB || disk_mib > OPS_TEMPLATE_DISK_MAX_MIB))
		return errf(EINVAL, "disk_mib %lld: want %d to %d", (long long)disk_mib, OPS_TEMPLATE_DISK_MIN_MIB,
			    OPS_TEMPLATE_DISK_MAX_MIB);
	if (build_net && build_net_ok(build_net) < 0)
		return -EINVAL;
	if (s->vcpus && (s->vcpus < 1 || s->vcpus > OPS_TEMPLATE_VCPUS_MAX))
		return errf(EINVAL, "vcpus %d: want 1 to %d", s->vcpus, OPS_TEMPLATE_VCPUS_MAX);
	if (s->memory_mib && (s->memory_mib < OPS_TEMPLATE_MEMORY_MIN_MIB || s->memory_mib > OPS_TEMPLATE_MEMORY_MAX_MIB))
		return errf(EINVAL, "memory_mib %d: want %d to %d", s->memory_mib, OPS_TEMPLATE_MEMORY_MIN_MIB,
			    OPS_TEMPLATE_MEMORY_MAX_MIB);
	bool found;
	int rc = listed(c->hostif, name, NULL, &found);
	if (rc < 0)
		return rc;
	if (found)
		return errf(EEXIST, "template name '%s' is taken by a template every workspace shares (built in or "
				    "the operator's): choose another", name);
	char host[OPS_TEMPLATE_HOST_NAME];
	ops_template_host_name(c->workspace, name, host);
	/* The plan's templates and template_builds: the host counts the
	 * workspace's by their prefix, as it starts the build; build_seconds
	 * and template_mib: the build holds itself to them. */
	struct plan p;
	if ((rc = ops_workspace_plan(c, &p)) < 0)
		return rc;
	/* The defaults (1 vCPU, 256 MiB) are held to the plan as well. */
	int vcpus = s->vcpus ? s->vcpus : 1, memory_mib = s->memory_mib ? s->memory_mib : 256;
	if (p.limits.vcpus && vcpus > p.limits.vcpus)
		return shape_over_plan(c, &p, "vcpus", p.limits.vcpus, vcpus);
	if (p.limits.memory_mib && memory_mib > p.limits.memory_mib)
		return shape_over_plan(c, &p, "memory_mib", p.limits.memory_mib, memory_mib);
	char group[PREFIX_HEX + 3];
	snprintf(group, sizeof group, "%.*s", PREFIX_HEX + 2, host);
	struct tbuild_req r = { .name = host, .tar_fd = tar_fd, .dockerfile = dockerfile, .build_args = build_args,
				.disk_mib = disk_mib, .build_net = build_net,
				.vcpus = s->vcpus, .memory_mib = s->memory_mib, .group = group, .max_templates = p.limits.templates,
				.max_builds = p.limits.template_builds, .max_seconds = p.limits.build_seconds,
				.max_root_mib = p.limits.template_mib };
	rc = hostif_template_build(c->hostif, &r);
	if (rc == -EDQUOT) {
		bool builds = strstr(errmsg(), "(template_builds ") != NULL;
		ops_quota_note(c, &p, true);
		if (c->quota) {
			snprintf(c->quota->report.limit, sizeof c->quota->report.limit, "%s",
				 builds ? "template_builds" : "templates");
			c->quota->report.value = builds ? p.limits.template_builds : p.limits.templates;
		}
		char msg[512];
		snprintf(msg, sizeof msg, "%s", errmsg());
		char *its = strstr(msg, "its plan");
		if (its) {	/* the host does not know the plan's name */
			char rest[512];
			snprintf(rest, sizeof rest, "%s", its + 8);
			snprintf(its, sizeof msg - (size_t)(its - msg), "plan %s%s", p.name, rest);
		}
		return errf(EDQUOT, "%s", msg);
	}
	return unqualified(rc, host, name);
}

int ops_template_get(const struct ops_caller *c, const char *name, struct ops_template_info *out)
{
	memset(out, 0, sizeof *out);
	char host[OPS_TEMPLATE_HOST_NAME];
	int rc = ops_template_resolve(c->hostif, c->workspace, name, host);
	bool own = ops_template_name_ok(name);
	if (rc == 0)
		own = ops_template_qualified(host);
	else if (rc != -ENOENT || !own)
		return rc;
	if (own) {
		ops_template_host_name(c->workspace, name, host);
		/* Not in the listing yet (building, or failed): its builds say. */
		if ((rc = hostif_template_state(c->hostif, host, &out->b)) < 0)
			return rc == -ENOENT ? errf(ENOENT, "template %.64s not found", name) : rc;
		out->own = true;
		unqualify(out->b.error, host, name);
	}
	rc = listed(c->hostif, host, &out->t, &out->listed);
	if (rc < 0)
		return rc;
	if (out->own)
		own_description(out->t.description, sizeof out->t.description);
	snprintf(out->t.name, sizeof out->t.name, "%s", name);
	return 0;
}

int ops_template_log_open(const struct ops_caller *c, const char *name, int *fd, bool *running)
{
	char host[OPS_TEMPLATE_HOST_NAME];
	int rc = own_name(c, name, host);
	rc = rc ?: hostif_template_log_open(c->hostif, host, fd, running);
	if (rc == -ENOENT)
		return errf(ENOENT, "template %.64s not found (or not built through the API)", name);
	return rc;
}

int ops_template_delete(const struct ops_caller *c, const char *name)
{
	bool found = false;
	char host[OPS_TEMPLATE_HOST_NAME];
	if (ops_template_name_ok(name)) {
		ops_template_host_name(c->workspace, name, host);
		struct tbuild_state st;
		int rc = hostif_template_state(c->hostif, host, &st);
		if (rc == 0) {
			rc = hostif_template_delete(c->hostif, host);
			return rc == -ENOENT ? errf(ENOENT, "template %.64s not found", name)
					     : unqualified(rc, host, name);
		}
		if (rc != -ENOENT)
			return rc;
	}
	if (!ops_template_qualified(name) && strlen(name) < OPS_TEMPLATE_HOST_NAME) {
		int rc = listed(c->hostif, name, NULL, &found);
		if (rc < 0)
			return rc;
		if (found)
			return errf(EPERM, "template %s is shared by every workspace (built in or the operator's): "
					   "it cannot be removed through the API", name);
	}
	return errf(ENOENT, "template %.64s not found", name);
}
