/*
 * placement: the choice of a host for a new sandbox (placement.h).
 */
#include "hostif/placement.h"
#include "common/err.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>

bool placement_workspace_template(const char *name)
{
	if (strlen(name) < 13 || name[0] != 'w' || name[11] != '_')
		return false;
	for (int i = 1; i <= 10; i++)
		if (!isxdigit((unsigned char)name[i]))
			return false;
	return true;
}

/* What h's heartbeat lists of template name: its version and size. */
static int listed(const struct host_row *h, const char *name, int64_t *version, int64_t *vcpus,
		  int64_t *memory_mib)
{
	json_t *t = h->templates ? json_loads(h->templates, 0, NULL) : NULL;
	size_t i;
	json_t *e;
	int rc = -ENOENT;
	json_array_foreach(t, i, e) {
		const char *n = json_string_value(json_object_get(e, "name"));
		if (n && !strcmp(n, name)) {
			*version = json_integer_value(json_object_get(e, "version"));
			*vcpus = json_integer_value(json_object_get(e, "vcpus"));
			*memory_mib = json_integer_value(json_object_get(e, "memory_mib"));
			rc = 0;
			break;
		}
	}
	json_decref(t);
	return rc;
}

int placement_template_size(const struct host_row *h, const char *name, int64_t *vcpus,
			    int64_t *memory_mib)
{
	int64_t version;
	return listed(h, name, &version, vcpus, memory_mib);
}

int placement_choose(const struct placement_rule *rule, const struct host_load *hosts, int n,
		     int64_t *vcpus, int64_t *memory_mib)
{
	int best = -1, over = rule->vcpu_overcommit > 0 ? rule->vcpu_overcommit : 1;
	int64_t best_free = 0;
	bool seen = false;
	int64_t least = rule->min_version, ver, v, m;
	for (int i = 0; rule->newest && i < n; i++)
		if (listed(&hosts[i].host, rule->template, &ver, &v, &m) == 0 && ver > least)
			least = ver;
	for (int i = 0; i < n; i++) {
		if (listed(&hosts[i].host, rule->template, &ver, &v, &m) < 0 || ver < least)
			continue;
		seen = true;
		int64_t free_m = hosts[i].host.memory_mib - hosts[i].memory_mib;
		int64_t free_v = hosts[i].host.vcpus * over - hosts[i].vcpus;
		if (m > free_m || v > free_v)
			continue;
		if (best < 0 || (rule->policy == PLACE_SPREAD ? free_m > best_free : free_m < best_free)) {
			best = i, best_free = free_m;
			*vcpus = v, *memory_mib = m;
		}
	}
	if (best >= 0)
		return best;
	int64_t copying = placement_copy_pending(rule, hosts, n);
	if (seen && copying)
		return errf(EAGAIN, "template '%s' v%lld is in service only on hosts that are full; it is being "
				    "copied to hosts with room (docs/cluster.md \"Templates\"): retry when the copy is in",
			    rule->template, (long long)copying);
	return seen ? errf(EAGAIN, "no host has room for a sandbox of template '%s' (kilnd cluster hosts)",
			   rule->template)
		    : errf(ENOENT, "template '%s' is built on no host that is up", rule->template);
}

int64_t placement_copy_pending(const struct placement_rule *rule, const struct host_load *hosts, int n)
{
	int64_t newest = 0, ver, v = 0, m = 0, vv, mm;
	int over = rule->vcpu_overcommit > 0 ? rule->vcpu_overcommit : 1;
	if (!rule->newest)
		return 0;
	for (int i = 0; i < n; i++)
		if (listed(&hosts[i].host, rule->template, &ver, &vv, &mm) == 0 && ver > newest)
			newest = ver, v = vv, m = mm;
	if (newest < rule->min_version)
		return 0;	/* only old copies: nothing of the new build is in yet */
	for (int i = 0; i < n; i++) {
		if (listed(&hosts[i].host, rule->template, &ver, &vv, &mm) == 0 && ver >= newest)
			continue;
		if (m <= hosts[i].host.memory_mib - hosts[i].memory_mib &&
		    v <= hosts[i].host.vcpus * over - hosts[i].vcpus)
			return newest;
	}
	return 0;
}

int placement_builder(const struct host_row *hosts, int n)
{
	int best = -1;
	for (int i = 0; i < n; i++)
		if (best < 0 || hosts[i].sandboxes < hosts[best].sandboxes ||
		    (hosts[i].sandboxes == hosts[best].sandboxes && hosts[i].memory_mib > hosts[best].memory_mib))
			best = i;
	return best >= 0 ? best : errf(EAGAIN, "no host is up and active to build a template on (kilnd cluster hosts)");
}
