/*
 * keep: the operations that leave something on the host's disk for a
 * workspace after its compute stops, hibernate and snapshot, held to the
 * plan's `hibernated` and `snapshots` counts and its `storage_mib` (the
 * disk space both take, as their hosts measured it) (ops.h). A hibernated
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
	struct ops_kept *k;
};

static int count_hibernated(void *ctx, const struct sbx_row *r)
{
	struct tally *t = ctx;
	if (r->state == SBX_HIBERNATED) {
		t->k->hibernated++;
		t->k->stored_bytes += r->stored_bytes > 0 ? r->stored_bytes : 0;
	}
	return 0;
}

static int count_snapshot(void *ctx, struct snap_row *s)
{
	struct tally *t = ctx;
	if (!strcmp(s->workspace, t->ws)) {
		t->k->snapshots++;
		t->k->stored_bytes += s->stored_bytes > 0 ? s->stored_bytes : 0;
	}
	snap_row_clear(s);
	return 0;
}

int ops_kept(const struct ops_caller *c, struct ops_kept *out)
{
	memset(out, 0, sizeof *out);
	struct tally t = { c->workspace, out };
	int rc = hostif_each(c->hostif, c->workspace, count_hibernated, &t);
	if (rc == 0 && c->store)
		rc = store_snapshot_each_live(c->store, count_snapshot, &t);
	/* A volume holds its whole size for the workspace (it may fill). */
	int64_t mib = 0;
	if (rc == 0 && c->store && (rc = store_volume_usage(c->store, c->workspace, &out->volumes, &mib)) == 0)
		out->stored_bytes += mib << 20;
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

/* The storage cap: what the workspace keeps is under it, or -EDQUOT. A
 * hibernation's or a snapshot's size is known only once it is made, so
 * the check is of what is kept before it: one may pass the cap by its
 * own size, as one more request at once may pass a count. */
static int storage_room(const struct ops_caller *c, const struct plan *p, const struct ops_kept *k)
{
	int64_t cap = p->limits.storage_mib;
	if (!cap || k->stored_bytes < cap * 1024 * 1024)
		return 0;
	ops_quota_note(c, p, true);
	if (c->quota) {
		snprintf(c->quota->report.limit, sizeof c->quota->report.limit, "storage_mib");
		c->quota->report.value = cap;
	}
	return errf(EDQUOT, "this workspace's snapshots, hibernated sandboxes and volumes take %lld MiB, plan %s "
		    "allows %lld (storage_mib %lld): delete a snapshot, a hibernated sandbox or a volume first",
		    (long long)(k->stored_bytes >> 20), p->name, (long long)cap, (long long)cap);
}

int ops_hibernate(const struct ops_caller *c, const char *id, struct sbx_row *out)
{
	struct plan p;
	int rc = ops_workspace_plan(c, &p);
	if (rc < 0)
		return rc;
	if (p.limits.hibernated || p.limits.storage_mib) {
		struct sbx_row row;
		if ((rc = ops_sandbox(c, id, &row)) < 0)
			return rc;
		bool already = row.state == SBX_HIBERNATED;	/* the host's 409 to give */
		sbx_row_clear(&row);
		struct ops_kept k;
		if (!already && (rc = ops_kept(c, &k)) < 0)
			return rc;
		if (!already && p.limits.hibernated && k.hibernated >= p.limits.hibernated)
			return refused(c, &p, "hibernated", p.limits.hibernated, "sandboxes hibernated",
				       "wake or delete one first");
		if (!already && (rc = storage_room(c, &p, &k)) < 0)
			return rc;
	}
	return hostif_hibernate(c->hostif, c->workspace, id, false, out);
}

int ops_snapshot(const struct ops_caller *c, const char *id, char snap[ID_MAX])
{
	struct plan p;
	int rc = ops_workspace_plan(c, &p);
	if (rc < 0)
		return rc;
	if (p.limits.snapshots || p.limits.storage_mib) {
		struct ops_kept k;
		if ((rc = ops_kept(c, &k)) < 0)
			return rc;
		if (p.limits.snapshots && k.snapshots >= p.limits.snapshots)
			return refused(c, &p, "snapshots", p.limits.snapshots, "snapshots", "delete one first");
		if ((rc = storage_room(c, &p, &k)) < 0)
			return rc;
	}
	return hostif_snapshot(c->hostif, c->workspace, id, snap);
}
