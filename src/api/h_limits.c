/*
 * h_limits: GET /v1/limits, the caller's workspace's plan, its limits and
 * what of them is in use now (docs/billing.md).
 */
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "ops/ops.h"
#include "store/store.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>

/* One walk of the workspace's sandboxes counts both. */
struct counts {
	int running;		/* creating or running */
	int64_t hibernated;
};

static int count_states(void *ctx, const struct sbx_row *r)
{
	struct counts *n = ctx;
	n->running += r->state == SBX_CREATING || r->state == SBX_RUNNING || r->state == SBX_PAUSED;
	n->hibernated += r->state == SBX_HIBERNATED;
	return 0;
}

int h_limits(struct req *r)
{
	struct plan p;
	int rc = req_plan(r, &p);
	if (rc < 0)
		return reply_errno(r, rc);
	struct counts n = { 0, 0 };
	int creates = 0;
	int64_t window_ms = r->api->plans ? r->api->plans->window_ms : 3600 * 1000;
	int64_t *times = malloc(WS_WINDOW_MAX * sizeof *times);
	rc = times ? hostif_each(r->api->hostif, r->workspace, count_states, &n) : errf(ENOMEM, "out of memory");
	if (rc == 0)
		rc = store_creates_since(r->api->store, r->workspace, wall_ms() - window_ms + 1, times,
					 WS_WINDOW_MAX, &creates);
	free(times);
	struct ops_kept k = { 0 };
	struct ops_caller c;
	req_caller(r, &c);
	if (rc == 0)
		rc = ops_kept(&c, &k);
	if (rc < 0)
		return reply_errno(r, rc);
	/* storage_mib rounded up: 1 byte kept is not "0 in use". */
	return reply_json(r, 200, json_pack("{s:s,s:o,s:I,s:{s:i,s:i,s:I,s:I,s:I,s:I,s:I}}", "plan",
					    p.name[0] ? p.name : "none", "limits", plan_limits_json(&p.limits),
					    "window_seconds", (json_int_t)(window_ms / 1000), "in_use",
					    "running", n.running, "creates_in_window", creates,
					    "hibernated", (json_int_t)n.hibernated, "snapshots", (json_int_t)k.snapshots,
					    "stored_bytes", (json_int_t)k.stored_bytes, "storage_mib",
					    (json_int_t)((k.stored_bytes + (1 << 20) - 1) >> 20), "volumes",
					    (json_int_t)k.volumes));
}
