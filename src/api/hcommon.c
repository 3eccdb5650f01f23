#include "api/hcommon.h"
#include "agent/host.h"
#include "api/api.h"
#include "api/http.h"
#include "api/validate.h"

#include <stdlib.h>
#include <string.h>

int req_sandbox(struct req *r, struct sandbox **out, int *answered)
{
	const char *id = r->nparams > 0 ? r->params[0] : "";
	if (!v_is_id(id, "sbx_") || host_find(r->api->host, r->workspace, id, out) < 0) {
		*answered = reply_error(r, 404, "not_found", "sandbox %.40s not found", id);
		return -1;
	}
	/* Reading a sandbox (GET: itself, its ports, logs) is not activity,
	 * or a dashboard polling it would keep it alive forever; a request
	 * that changes it is. Guest work (exec, files, pty) counts by itself
	 * in sandbox_enter. */
	if (strcmp(r->method, "GET") != 0)
		sandbox_touch(*out);
	return 0;
}

void req_sandbox_put(struct req *r, struct sandbox *sb)
{
	sandbox_put(r->api->host, sb);
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
