/*
 * h_volume: named volumes (docs/api.md "Volumes"): POST, GET and DELETE
 * /v1/volumes[/{id}], and attaching one to a running sandbox (POST
 * /v1/sandboxes/{id}/volumes, DELETE .../volumes/{volume}). The operations layer checks and holds the plan's
 * limits; this turns its answers into HTTP.
 */
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "common/err.h"
#include "ops/ops.h"

#include <errno.h>

/* rc of an operation that filled v: its error, or v as JSON. */
static int reply_volume(struct req *r, const struct ops_caller *c, int rc, const struct vol_row *v, int status)
{
	if (rc < 0)
		return reply_errno(r, rc);
	json_t *j = render_volume(ops_volume_json(c, v));
	return j ? reply_json(r, status, j) : reply_error(r, 500, "internal", "out of memory");
}

int h_volume_create(struct req *r)
{
	struct ops_caller c;
	struct ops_quota q;
	req_caller_quota(r, &c, &q);
	struct vol_row v;
	int rc = ops_volume_create(&c, r->json, &v);
	return rc == -EDQUOT ? reply_limit(r, &q) : reply_volume(r, &c, rc, &v, 201);
}

int h_volume_list(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	json_t *a;
	int rc = ops_volume_list(&c, &a);
	if (rc < 0)
		return reply_errno(r, rc);
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v)
		render_volume(v);
	return reply_json(r, 200, json_pack("{s:o}", "volumes", a));
}

int h_volume_get(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	struct vol_row v;
	return reply_volume(r, &c, ops_volume_get(&c, r->params[0], &v), &v, 200);
}

int h_volume_delete(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	int rc = ops_volume_delete(&c, r->params[0]);
	return rc < 0 ? reply_errno(r, rc) : reply_empty(r, 204);
}

/* POST /v1/sandboxes/{id}/volumes {name, path, read_only}: 200, the
 * volume (attached_to naming the sandbox). */
int h_sandbox_volume_attach(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	struct vol_row v;
	return reply_volume(r, &c, ops_volume_attach(&c, r->params[0], r->json, &v), &v, 200);
}

/* DELETE /v1/sandboxes/{id}/volumes/{volume} (a name or an id)
 * [?force=true: kill what uses the mount first]: 204. */
int h_sandbox_volume_detach(struct req *r)
{
	struct ops_caller c;
	req_caller(r, &c);
	bool force = false;
	if (req_query_bool(r, "force", &force) < 0)
		return reply_errno(r, -EINVAL);
	int rc = ops_volume_detach(&c, r->params[0], r->params[1], force);
	return rc < 0 ? reply_errno(r, rc) : reply_empty(r, 204);
}
