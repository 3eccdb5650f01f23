/*
 * h_snapshot: the caller's snapshots (made by POST .../snapshot).
 */
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "ops/validate.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>

struct list_ctx {
	json_t *a;
	const char *workspace;
};

static int add_snap(void *ctx, struct snap_row *s)
{
	struct list_ctx *l = ctx;
	int rc = 0;
	if (strcmp(s->workspace, l->workspace) == 0)
		rc = json_array_append_new(l->a, render_snapshot(s));
	snap_row_clear(s);
	return rc;
}

int snapshot_list(struct req *r, json_t **out)
{
	struct list_ctx l = { json_array(), r->workspace };
	int rc = l.a ? store_snapshot_each_live(r->api->store, add_snap, &l) : -ENOMEM;
	if (rc < 0) {
		json_decref(l.a);
		return errf(rc == -ENOMEM ? ENOMEM : EIO, "listing snapshots failed");
	}
	*out = json_pack("{s:o}", "snapshots", l.a);
	return 0;
}

int h_snapshot_list(struct req *r)
{
	json_t *j;
	if (snapshot_list(r, &j) < 0)
		return reply_error(r, 500, "internal", "%s", errmsg());
	return reply_json(r, 200, j);
}

int snapshot_json(struct req *r, const char *id, json_t **out)
{
	struct snap_row s;
	int rc = v_is_id(id, "snap_") ? store_snapshot_load(r->api->store, id, r->workspace, &s) : -ENOENT;
	if (rc == -ENOENT)
		return errf(ENOENT, "snapshot %.40s not found", id);
	if (rc < 0)
		return rc;
	*out = render_snapshot(&s);
	snap_row_clear(&s);
	return *out ? 0 : errf(ENOMEM, "out of memory");
}

int h_snapshot_get(struct req *r)
{
	json_t *j;
	int rc = snapshot_json(r, r->params[0], &j);
	return rc < 0 ? reply_errno(r, rc) : reply_json(r, 200, j);
}

int h_snapshot_delete(struct req *r)
{
	const char *id = r->params[0];
	if (!v_is_id(id, "snap_"))
		return reply_error(r, 404, "not_found", "snapshot %.40s not found", id);
	int rc = hostif_snapshot_delete(r->api->hostif, r->workspace, id);
	return rc < 0 ? reply_errno(r, rc) : reply_empty(r, 204);
}
