/*
 * h_system: health, metrics, templates, usage.
 */
#include "host/host.h"
#include "host/template.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/http.h"
#include "common/metrics.h"
#include "api/render.h"
#include "common/strbuf.h"

#include <stdlib.h>
#include <string.h>

int h_healthz(struct req *r)
{
	struct usage u;
	/* The store answering is what "healthy" means for the API. */
	if (store_usage_sum(r->api->store, "", &u) < 0)
		return reply_error(r, 503, "no_capacity", "the store does not answer");
	return reply_json(r, 200, json_pack("{s:s,s:s}", "status", "ok", "role", r->api->cfg->role));
}

int h_metrics(struct req *r)
{
	struct strbuf b;
	strbuf_init(&b);
	metrics_render(r->api->metrics, &b);
	host_metrics(r->api->host, &b);
	if (strbuf_failed(&b)) {
		strbuf_free(&b);
		return reply_error(r, 500, "internal", "out of memory");
	}
	return reply_text(r, 200, "text/plain; version=0.0.4", b.data, b.len);
}

static int add_template(void *ctx, const struct template_def *d, const struct tmpl *t)
{
	json_t *j = json_pack("{s:s,s:s,s:i,s:i,s:s}", "name", d->name, "description", d->description,
			      "vcpus", t ? t->vcpus : d->vcpus,
			      "memory_mib", t ? t->memory_mib : d->memory_mib,
			      "status", t ? "ready" : "not_built");
	if (!j)
		return -1;
	json_object_set_new(j, "version", t ? json_integer(t->version) : json_null());
	json_object_set_new(j, "built_at", t ? render_time(t->built_ms) : json_null());
	json_object_set_new(j, "snapshot", json_boolean(t && t->snapshot));
	return json_array_append_new(ctx, j);
}

int h_templates(struct req *r)
{
	json_t *a = json_array();
	if (!a || host_templates(r->api->host, add_template, a) < 0) {
		json_decref(a);
		return reply_error(r, 500, "internal", "out of memory");
	}
	return reply_json(r, 200, json_pack("{s:o}", "templates", a));
}

int h_usage(struct req *r)
{
	struct usage u;
	int rc = store_usage_sum(r->api->store, r->workspace, &u);
	if (rc < 0)
		return reply_errno(r, rc);
	return reply_json(r, 200, json_pack("{s:s,s:f,s:f,s:f,s:f,s:I,s:I}",
		"workspace_id", r->workspace, "cpu_seconds", u.cpu_seconds,
		"memory_mib_seconds", u.mem_mib_seconds,
		"memory_gib_hours", u.mem_mib_seconds / 1024 / 3600,
		"running_seconds", u.running_seconds, "sandboxes", (json_int_t)u.sandboxes,
		"live_sandboxes", (json_int_t)u.live));
}
