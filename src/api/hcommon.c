#include "api/hcommon.h"
#include "host/host.h"
#include "host/template.h"
#include "api/api.h"
#include "api/http.h"
#include "api/render.h"
#include "ops/ops.h"
#include "store/store.h"
#include "ops/validate.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int reply_sandbox_missing(struct req *r, const char *id)
{
	struct sbx_row row;
	if (!v_is_id(id, "sbx_") || store_sandbox_load(r->api->store, id, &row) < 0)
		return reply_error(r, 404, "not_found", "sandbox %.40s not found", id);
	/* Another workspace's sandbox does not exist for this caller. */
	bool ended = strcmp(row.workspace, r->workspace) == 0 && row.state == SBX_DELETED &&
		     row.deleted_ms > 0 && wall_ms() - row.deleted_ms < ENDED_RETENTION_S * 1000;
	const char *why = row.ended[0] ? row.ended : "deleted";
	json_t *e = NULL;
	if (ended) {
		char msg[400];
		snprintf(msg, sizeof msg, "sandbox %s ended (%s)%s%s", row.id, why, row.error[0] ? ": " : "",
			 row.error);
		e = json_pack("{s:{s:s,s:s,s:s,s:o}}", "error", "code", "sandbox_ended", "message", msg,
			      "ended", why, "ended_at", render_time(row.deleted_ms));
	}
	sbx_row_clear(&row);
	if (!ended)
		return reply_error(r, 404, "not_found", "sandbox %.40s not found", id);
	if (!e)
		return reply_error(r, 404, "sandbox_ended", "sandbox %.40s ended", id);
	return reply_json(r, 404, e);
}

void req_caller(struct req *r, struct ops_caller *out)
{
	*out = (struct ops_caller){ .host = r->api->host, .store = r->api->store,
				    .plans = r->api->plans, .workspace = r->workspace,
				    .arrival_ns = r->arrival_ns, .max_ttl = r->api->cfg->max_ttl,
				    /* Reading a sandbox (GET: itself, its ports, logs) is
				     * not activity, or a dashboard polling it would keep it
				     * alive forever; a request that changes it is. Guest
				     * work (exec, files, pty) counts by itself in
				     * sandbox_enter. */
				    .touch = strcmp(r->method, "GET") != 0 };
}

int req_sandbox(struct req *r, struct sandbox **out, int *answered)
{
	struct ops_caller c;
	req_caller(r, &c);
	const char *id = r->nparams > 0 ? r->params[0] : "";
	if (ops_sandbox(&c, id, out) < 0) {
		*answered = reply_sandbox_missing(r, id);
		return -1;
	}
	return 0;
}

void req_sandbox_put(struct req *r, struct sandbox *sb)
{
	sandbox_put(r->api->host, sb);
}

int req_guest_enter(struct req *r, struct sandbox **sb, struct guest **g, int *answered)
{
	if (req_sandbox(r, sb, answered) < 0)
		return -1;
	int rc = sandbox_enter(r->api->host, *sb, g);
	if (rc < 0) {
		req_sandbox_put(r, *sb);
		*answered = reply_errno(r, rc);
		return -1;
	}
	return 0;
}

void req_guest_leave(struct req *r, struct sandbox *sb, struct guest *g)
{
	sandbox_leave(r->api->host, sb, g);
	req_sandbox_put(r, sb);
}

char **env_merge(const char *sandbox_env, const json_t *request_env)
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

int reply_template_missing(struct req *r, json_t *names)
{
	json_t *e = json_pack("{s:{s:s,s:s,s:o}}", "error", "code", "template_not_found", "message",
			      errmsg(), "templates", names);
	if (!e)
		return reply_error(r, 404, "template_not_found", "%s", errmsg());
	return reply_json(r, 404, e);
}
