#include "api/hcommon.h"
#include "host/host.h"
#include "api/api.h"
#include "api/http.h"
#include "ops/ops.h"
#include "ops/validate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void req_caller(struct req *r, struct ops_caller *out)
{
	*out = (struct ops_caller){ .host = r->api->host, .workspace = r->workspace,
				    .arrival_ns = r->arrival_ns, .max_ttl = r->api->cfg->max_ttl };
}

int req_sandbox(struct req *r, struct sandbox **out, int *answered)
{
	struct ops_caller c;
	req_caller(r, &c);
	if (ops_sandbox(&c, r->nparams > 0 ? r->params[0] : "", out) < 0) {
		*answered = reply_errno(r, -ENOENT);
		return -1;
	}
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
