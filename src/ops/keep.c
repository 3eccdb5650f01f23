/*
 * keep: the operations that leave something on the host's disk for a
 * workspace after its compute stops, hibernate and snapshot, held to the
 * plan's `hibernated` and `snapshots` limits (ops.h). A hibernated
 * sandbox keeps its memory and disk until it wakes or is deleted; a
 * snapshot until it is deleted: without a cap, one tenant could fill the
 * data filesystem that every other sandbox and kilnd's database share
 * (issue 15).
 *
 * The counts are taken just before the operation, so requests of one
 * workspace at the same instant can each see room for one more: a cap
 * can be passed by as many requests as run at once, not more. The
 * automatic hibernations (an idle sandbox's TTL, a spent credit) are not
 * held to it: refusing them would keep a sandbox running, billed, that
 * the plan says must stop; they count against the next request.
 */
#include "ops/ops.h"
#include "common/err.h"
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct tally {
	const char *ws;
	int64_t n;
};

static int count_hibernated(void *ctx, const struct sbx_row *r)
{
	struct tally *t = ctx;
	t->n += r->state == SBX_HIBERNATED;
	return 0;
}

static int count_snapshot(void *ctx, struct snap_row *s)
{
	struct tally *t = ctx;
	t->n += !strcmp(s->workspace, t->ws);
	snap_row_clear(s);
	return 0;
}

int ops_kept(const struct ops_caller *c, int64_t *hibernated, int64_t *snapshots)
{
	int rc = 0;
	if (hibernated) {
		struct tally t = { c->workspace, 0 };
		rc = hostif_each(c->hostif, c->workspace, count_hibernated, &t);
		*hibernated = t.n;
	}
	if (snapshots && rc == 0) {
		struct tally t = { c->workspace, 0 };
		rc = c->store ? store_snapshot_each_live(c->store, count_snapshot, &t) : 0;
		*snapshots = t.n;
	}
	return rc;
}

/* refused: -EDQUOT, the quota report naming limit and its value. */
static int refused(const struct ops_caller *c, const struct plan *p, const char *limit, int64_t value,
		   const char *what, const char *hint)
{
	ops_quota_note(c, p, true);
	if (c->quota) {
		snprintf(c->quota->report.limit, sizeof c->quota->report.limit, "%s", limit);
		c->quota->report.value = value;
	}
	return errf(EDQUOT, "this workspace keeps %lld %s, the most plan %s allows (%s %lld): %s",
		    (long long)value, what, p->name, limit, (long long)value, hint);
}

int ops_hibernate(const struct ops_caller *c, const char *id, struct sbx_row *out)
{
	struct plan p;
	int rc = ops_workspace_plan(c, &p);
	if (rc < 0)
		return rc;
	if (p.limits.hibernated) {
		struct sbx_row row;
		if ((rc = ops_sandbox(c, id, &row)) < 0)
			return rc;
		bool already = row.state == SBX_HIBERNATED;	/* the host's 409 to give */
		sbx_row_clear(&row);
		int64_t n = 0;
		if (!already && (rc = ops_kept(c, &n, NULL)) < 0)
			return rc;
		if (!already && n >= p.limits.hibernated)
			return refused(c, &p, "hibernated", p.limits.hibernated, "sandboxes hibernated",
				       "wake or delete one first");
	}
	return hostif_hibernate(c->hostif, c->workspace, id, out);
}

int ops_snapshot(const struct ops_caller *c, const char *id, char snap[ID_MAX])
{
	struct plan p;
	int rc = ops_workspace_plan(c, &p);
	if (rc < 0)
		return rc;
	if (p.limits.snapshots) {
		int64_t n = 0;
		if ((rc = ops_kept(c, NULL, &n)) < 0)
			return rc;
		if (n >= p.limits.snapshots)
			return refused(c, &p, "snapshots", p.limits.snapshots, "snapshots", "delete one first");
	}
	return hostif_snapshot(c->hostif, c->workspace, id, snap);
}
