#include "api/routes.h"
#include "api/handlers.h"
#include "proxy/proxy.h"

#include <stdlib.h>
#include <string.h>

#define SBX "/v1/sandboxes/{id}"
#define PROXY SBX "/proxy/{port}/{path}"
#define HOSTSBX "/v1/host/sandboxes/{ws}/{id}"

/* ROUTE_READ marks what a read-only key may call (routes.h); the PTY is a
 * GET but a shell, so it is a full key's. Most rows have no hooks and
 * leave them out (NULL). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
const struct route routes[] = {
	{ "GET", "/healthz", h_healthz, BODY_NONE, ROUTE_PUBLIC | ROUTE_READ },
	{ "GET", "/metrics", h_metrics, BODY_NONE, ROUTE_PUBLIC | ROUTE_READ },
	{ "GET", "/v1/templates", h_templates, BODY_NONE, ROUTE_READ },
	{ "POST", "/v1/templates", h_template_build, BODY_FILE, 0, &template_build_hooks },
	{ "GET", "/v1/templates/{name}", h_template_get, BODY_NONE, ROUTE_READ },
	{ "GET", "/v1/templates/{name}/logs", h_template_logs, BODY_NONE, ROUTE_READ },
	{ "DELETE", "/v1/templates/{name}", h_template_delete, BODY_NONE, 0 },
	{ "GET", "/v1/usage", h_usage, BODY_NONE, ROUTE_READ },
	{ "GET", "/v1/limits", h_limits, BODY_NONE, ROUTE_READ },
	{ "GET", "/v1/billing", h_billing, BODY_NONE, ROUTE_READ },
	/* A closed month's statement is written on its first read: a cache
	 * of a fixed answer, so a read-only key may cause it. */
	{ "GET", "/v1/statements", h_statement_list, BODY_NONE, ROUTE_READ },
	{ "GET", "/v1/statements/{month}", h_statement_get, BODY_NONE, ROUTE_READ },
	{ "POST", "/v1/sandboxes", h_sandbox_create, BODY_JSON, 0 },
	{ "GET", "/v1/sandboxes", h_sandbox_list, BODY_NONE, ROUTE_READ },
	{ "GET", SBX, h_sandbox_get, BODY_NONE, ROUTE_READ },
	{ "DELETE", SBX, h_sandbox_delete, BODY_NONE, 0 },
	{ "GET", SBX "/logs", h_sandbox_logs, BODY_NONE, ROUTE_READ },
	{ "POST", SBX "/exec", h_exec, BODY_JSON, 0 },
	{ "POST", SBX "/exec/stream", h_exec_stream, BODY_JSON, 0 },
	{ "GET", SBX "/pty", h_pty, BODY_NONE, 0 },
	{ "POST", SBX "/processes", h_proc_start, BODY_JSON, 0 },
	{ "GET", SBX "/processes", h_proc_list, BODY_NONE, ROUTE_READ },
	{ "POST", SBX "/processes/{process}/signal", h_proc_signal, BODY_JSON, 0 },
	{ "GET", SBX "/processes/{process}/output", h_proc_output, BODY_NONE, ROUTE_READ },
	{ "POST", SBX "/processes/{process}/stdin", h_proc_stdin, BODY_RAW, 0 },
	{ "POST", SBX "/code", h_code_run, BODY_JSON, 0 },
	{ "POST", SBX "/code/stream", h_code_stream, BODY_JSON, 0 },
	{ "POST", SBX "/code/contexts", h_code_context_create, BODY_JSON, 0 },
	{ "GET", SBX "/code/contexts", h_code_context_list, BODY_NONE, ROUTE_READ },
	{ "DELETE", SBX "/code/contexts/{context}", h_code_context_delete, BODY_NONE, 0 },
	{ "POST", SBX "/code/contexts/{context}/restart", h_code_context_restart, BODY_NONE, 0 },
	{ "GET", SBX "/files", h_file_get, BODY_NONE, ROUTE_READ },
	{ "PUT", SBX "/files", h_file_put, BODY_FILE, 0, &file_put_hooks },
	{ "DELETE", SBX "/files", h_file_delete, BODY_NONE, 0 },
	{ "GET", SBX "/files/list", h_file_list, BODY_NONE, ROUTE_READ },
	{ "GET", SBX "/files/stat", h_file_stat, BODY_NONE, ROUTE_READ },
	{ "GET", SBX "/files/watch", h_file_watch, BODY_NONE, ROUTE_READ },
	{ "POST", SBX "/files/mkdir", h_file_mkdir, BODY_NONE, 0 },
	{ "POST", SBX "/files/rename", h_file_rename, BODY_JSON, 0 },
	{ "POST", SBX "/files/chmod", h_file_chmod, BODY_JSON, 0 },
	{ "POST", SBX "/files/copy", h_file_copy, BODY_JSON, 0 },
	{ "POST", SBX "/files/write", h_file_write_many, BODY_FILE, 0, &file_write_hooks },
	{ "GET", SBX "/files/archive", h_file_archive_get, BODY_NONE, ROUTE_READ },
	{ "PUT", SBX "/files/archive", h_file_archive_put, BODY_FILE, 0, &archive_put_hooks },
	{ "POST", SBX "/snapshot", h_sandbox_snapshot, BODY_JSON, 0 },
	{ "POST", SBX "/hibernate", h_sandbox_hibernate, BODY_JSON, 0 },
	{ "POST", SBX "/wake", h_sandbox_wake, BODY_JSON, 0 },
	{ "POST", SBX "/fork", h_sandbox_fork, BODY_JSON, 0 },
	{ "POST", SBX "/fork_tree", h_sandbox_fork_tree, BODY_JSON, 0 },
	{ "POST", SBX "/promote", h_sandbox_promote, BODY_JSON, 0 },
	{ "PATCH", SBX "/lifecycle", h_sandbox_lifecycle, BODY_JSON, 0 },
	{ "POST", SBX "/pause", h_sandbox_pause, BODY_JSON, 0 },
	{ "POST", SBX "/resume", h_sandbox_resume, BODY_JSON, 0 },
	{ "PUT", SBX "/network", h_sandbox_network, BODY_JSON, 0 },
	{ "POST", SBX "/volumes", h_sandbox_volume_attach, BODY_JSON, 0 },
	{ "DELETE", SBX "/volumes/{volume}", h_sandbox_volume_detach, BODY_NONE, 0 },
	{ "POST", SBX "/mcp", h_mcp_sandbox, BODY_RAW, 0 },
	{ "POST", "/mcp", h_mcp_workspace, BODY_RAW, 0 },
	{ "POST", SBX "/ports", h_port_expose, BODY_JSON, 0 },
	{ "GET", SBX "/ports", h_port_list, BODY_NONE, ROUTE_READ },
	{ "DELETE", SBX "/ports/{port}", h_port_delete, BODY_NONE, 0 },
	{ "POST", SBX "/ports/{port}/preview", h_port_preview, BODY_JSON, 0 },
	/* Any method goes to the guest; these are the ones HTTP servers use. */
	{ "GET", PROXY, h_proxy, BODY_STREAM, ROUTE_PROXY, &proxy_hooks },
	{ "HEAD", PROXY, h_proxy, BODY_STREAM, ROUTE_PROXY, &proxy_hooks },
	{ "POST", PROXY, h_proxy, BODY_STREAM, ROUTE_PROXY, &proxy_hooks },
	{ "PUT", PROXY, h_proxy, BODY_STREAM, ROUTE_PROXY, &proxy_hooks },
	{ "PATCH", PROXY, h_proxy, BODY_STREAM, ROUTE_PROXY, &proxy_hooks },
	{ "DELETE", PROXY, h_proxy, BODY_STREAM, ROUTE_PROXY, &proxy_hooks },
	{ "OPTIONS", PROXY, h_proxy, BODY_STREAM, ROUTE_PROXY, &proxy_hooks },
	{ "GET", "/v1/snapshots", h_snapshot_list, BODY_NONE, ROUTE_READ },
	{ "GET", "/v1/snapshots/{id}", h_snapshot_get, BODY_NONE, ROUTE_READ },
	{ "DELETE", "/v1/snapshots/{id}", h_snapshot_delete, BODY_NONE, 0 },
	{ "POST", "/v1/apps", h_app_create, BODY_JSON, 0 },
	{ "GET", "/v1/apps", h_app_list, BODY_NONE, ROUTE_READ },
	{ "GET", "/v1/apps/{app}", h_app_get, BODY_NONE, ROUTE_READ },
	{ "DELETE", "/v1/apps/{app}", h_app_delete, BODY_NONE, 0 },
	{ "POST", "/v1/apps/{app}/deploy", h_app_deploy, BODY_JSON, 0 },
	{ "GET", "/v1/apps/{app}/logs", h_app_logs, BODY_NONE, ROUTE_READ },
	{ "POST", "/v1/databases", h_db_create, BODY_JSON, 0 },
	{ "GET", "/v1/databases", h_db_list, BODY_NONE, ROUTE_READ },
	{ "GET", "/v1/databases/{database}", h_db_get, BODY_NONE, ROUTE_READ },
	{ "PATCH", "/v1/databases/{database}", h_db_update, BODY_JSON, 0 },
	{ "DELETE", "/v1/databases/{database}", h_db_delete, BODY_NONE, 0 },
	{ "POST", "/v1/databases/{database}/reset-password", h_db_reset_password, BODY_NONE, 0 },
	{ "POST", "/v1/databases/{database}/backups", h_db_backup, BODY_NONE, 0 },
	{ "GET", "/v1/databases/{database}/backups", h_db_backups, BODY_NONE, ROUTE_READ },
	{ "POST", "/v1/volumes", h_volume_create, BODY_JSON, 0 },
	{ "GET", "/v1/volumes", h_volume_list, BODY_NONE, ROUTE_READ },
	{ "GET", "/v1/volumes/{id}", h_volume_get, BODY_NONE, ROUTE_READ },
	{ "DELETE", "/v1/volumes/{id}", h_volume_delete, BODY_NONE, 0 },
	/* The dashboard (docs/dashboard.md): its files, sign-in, events, keys. */
	{ "GET", "/", h_dashboard_root, BODY_NONE, ROUTE_PUBLIC | ROUTE_READ },
	{ "GET", "/dashboard/{path}", h_dashboard, BODY_NONE, ROUTE_PUBLIC | ROUTE_READ },
	{ "POST", "/v1/session", h_session_create, BODY_JSON, ROUTE_PUBLIC },
	/* Hosts joining the cluster (docs/cluster.md): a join token or the
	 * host's credential instead of an API key. */
	{ "POST", "/v1/cluster/join", h_cluster_join, BODY_JSON, ROUTE_PUBLIC },
	{ "POST", "/v1/cluster/heartbeat", h_cluster_heartbeat, BODY_JSON, ROUTE_PUBLIC },
	/* The cluster's API calling this host (h_host.c, docs/cluster.md). */
	{ "POST", "/v1/host/sandboxes", h_host_create, BODY_JSON, ROUTE_HOST },
	{ "GET", "/v1/host/sandboxes", h_host_list, BODY_NONE, ROUTE_HOST },
	{ "GET", HOSTSBX, h_host_get, BODY_NONE, ROUTE_HOST },
	{ "DELETE", HOSTSBX, h_host_delete, BODY_NONE, ROUTE_HOST },
	{ "POST", HOSTSBX "/{action}", h_host_action, BODY_JSON, ROUTE_HOST },
	{ "GET", HOSTSBX "/{action}", h_host_relay, BODY_NONE, ROUTE_HOST },
	{ "DELETE", "/v1/host/snapshots/{ws}/{id}", h_host_snapshot_delete, BODY_NONE, ROUTE_HOST },
	{ "POST", "/v1/host/volumes", h_host_volume_create, BODY_JSON, ROUTE_HOST },
	{ "GET", "/v1/host/volumes/{ws}/{id}", h_host_volume_get, BODY_NONE, ROUTE_HOST },
	{ "DELETE", "/v1/host/volumes/{ws}/{id}", h_host_volume_delete, BODY_NONE, ROUTE_HOST },
	{ "GET", "/v1/host/templates", h_host_templates, BODY_NONE, ROUTE_HOST },
	{ "POST", "/v1/host/templates/{name}", h_host_template_build, BODY_FILE, ROUTE_HOST },
	{ "GET", "/v1/host/templates/{name}", h_host_template_get, BODY_NONE, ROUTE_HOST },
	{ "GET", "/v1/host/templates/{name}/logs", h_host_template_logs, BODY_NONE, ROUTE_HOST },
	{ "DELETE", "/v1/host/templates/{name}", h_host_template_delete, BODY_NONE, ROUTE_HOST },
	{ "GET", "/v1/host/templates/{name}/export", h_host_template_export, BODY_NONE, ROUTE_HOST },
	{ "PUT", "/v1/host/templates/{name}/import", h_host_template_import, BODY_FILE, ROUTE_HOST },
	{ "GET", "/v1/session", h_session_get, BODY_NONE, ROUTE_READ },
	{ "DELETE", "/v1/session", h_session_delete, BODY_NONE, ROUTE_READ },	/* signing out */
	{ "GET", "/v1/events", h_events, BODY_NONE, ROUTE_READ },
	{ "GET", "/v1/keys", h_key_list, BODY_NONE, ROUTE_READ },
	{ "POST", "/v1/keys", h_key_create, BODY_JSON, 0 },
	{ "DELETE", "/v1/keys/{id}", h_key_delete, BODY_NONE, 0 },
	{ "GET", "/v1/audit", h_audit_list, BODY_NONE, ROUTE_READ },
	/* The operator's (docs/security.md "Operators"): its credential only. */
	{ "GET", "/v1/admin/workspaces", h_admin_ws_list, BODY_NONE, ROUTE_ADMIN },
	{ "POST", "/v1/admin/workspaces", h_admin_ws_create, BODY_JSON, ROUTE_ADMIN },
	{ "GET", "/v1/admin/workspaces/{name}", h_admin_ws_get, BODY_NONE, ROUTE_ADMIN },
	{ "PATCH", "/v1/admin/workspaces/{name}", h_admin_ws_patch, BODY_JSON, ROUTE_ADMIN },
	{ "DELETE", "/v1/admin/workspaces/{name}", h_admin_ws_delete, BODY_NONE, ROUTE_ADMIN },
	{ "GET", "/v1/admin/workspaces/{name}/keys", h_admin_ws_keys, BODY_NONE, ROUTE_ADMIN },
	{ "POST", "/v1/admin/workspaces/{name}/keys", h_admin_ws_key, BODY_JSON, ROUTE_ADMIN },
	{ "DELETE", "/v1/admin/workspaces/{name}/keys/{id}", h_admin_ws_key_delete, BODY_NONE, ROUTE_ADMIN },
	{ "GET", "/v1/admin/usage", h_admin_usage, BODY_NONE, ROUTE_ADMIN },
	{ "GET", "/v1/admin/plans", h_admin_plans, BODY_NONE, ROUTE_ADMIN },
	{ "GET", "/v1/admin/plans/{name}", h_admin_plan_get, BODY_NONE, ROUTE_ADMIN },
	{ "PUT", "/v1/admin/plans/{name}", h_admin_plan_put, BODY_JSON, ROUTE_ADMIN },
	{ "DELETE", "/v1/admin/plans/{name}", h_admin_plan_delete, BODY_NONE, ROUTE_ADMIN },
	{ "GET", "/v1/admin/audit", h_admin_audit, BODY_NONE, ROUTE_ADMIN },
};
#pragma GCC diagnostic pop
const size_t nroutes = sizeof routes / sizeof routes[0];

const struct route proxy_host_route = { "*", "PORT-ID.DOMAIN", h_proxy, BODY_STREAM, ROUTE_PROXY, &proxy_hooks };
const struct route *const host_routes[] = { &proxy_host_route };
const size_t nhost_routes = sizeof host_routes / sizeof host_routes[0];

/* Does path match pattern? Captures go to params (copied). */
static bool match(const char *pattern, const char *path, char *params[], int maxparams, int *nparams)
{
	int n = 0;
	const char *p = pattern, *s = path;
	while (*p && *s) {
		if (*p != '/' || *s != '/')
			goto no;
		p++, s++;
		const char *pe = strchrnul(p, '/'), *se = strchrnul(s, '/');
		if (!strcmp(p, "{path}")) {
			if (n >= maxparams || !(params[n] = strdup(s)))
				goto no;
			n++;
			p += strlen(p), s += strlen(s);
			break;
		}
		if (*p == '{') {
			if (se == s || n >= maxparams)
				goto no;
			params[n] = strndup(s, se - s);
			if (!params[n])
				goto no;
			n++;
		} else if (pe - p != se - s || memcmp(p, s, pe - p) != 0) {
			goto no;
		}
		p = pe, s = se;
	}
	/* ".../{port}" matches ".../{port}/{path}" too: the proxy redirects
	 * it to ".../{port}/", as a browser resolves links against that. */
	if (!*s && !strcmp(p, "/{path}")) {
		if (n >= maxparams || !(params[n] = strdup("")))
			goto no;
		n++;
		p += strlen(p);
	}
	if (*p || *s)
		goto no;
	*nparams = n;
	return true;
no:
	while (n > 0)
		free(params[--n]);
	return false;
}

const struct route *route_match(const char *method, const char *path, char *params[],
				int maxparams, int *nparams, bool *path_known)
{
	*path_known = false;
	*nparams = 0;
	for (size_t i = 0; i < nroutes; i++) {
		if (!match(routes[i].pattern, path, params, maxparams, nparams))
			continue;
		if (strcmp(routes[i].method, method) == 0)
			return &routes[i];
		*path_known = true;
		while (*nparams > 0)
			free(params[--*nparams]);
	}
	return NULL;
}
