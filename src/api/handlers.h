/*
 * handlers: one function per route (routes.c lists them), grouped in files
 * by resource: h_system.c (health, metrics, templates), h_billing.c (usage, billing),
 * h_statements.c (monthly statements),
 * h_sandbox.c (create, list, get, delete, lifecycle), h_exec.c (exec and
 * its SSE stream), h_pty.c (WebSocket terminal), h_files.c, h_snapshot.c,
 * h_ports.c (exposed ports) and proxy.c (requests to them), h_admin.c (the
 * operator's /v1/admin).
 */
#ifndef KILN_API_HANDLERS_H
#define KILN_API_HANDLERS_H

#include "api/routes.h"

handler_fn h_healthz, h_metrics, h_templates, h_limits;
handler_fn h_usage, h_billing;			/* h_billing.c */
handler_fn h_statement_list, h_statement_get;	/* h_statements.c */
handler_fn h_sandbox_create, h_sandbox_list, h_sandbox_get, h_sandbox_delete, h_sandbox_logs;
handler_fn h_sandbox_hibernate, h_sandbox_wake, h_sandbox_fork, h_sandbox_fork_tree;
handler_fn h_sandbox_lifecycle, h_sandbox_snapshot, h_sandbox_network, h_sandbox_pause, h_sandbox_resume;
handler_fn h_snapshot_list, h_snapshot_get, h_snapshot_delete;
handler_fn h_app_create, h_app_list, h_app_get, h_app_delete, h_app_deploy, h_app_logs;
handler_fn h_db_create, h_db_list, h_db_get, h_db_update, h_db_delete, h_db_reset_password, h_db_backup, h_db_backups;
handler_fn h_volume_create, h_volume_list, h_volume_get, h_volume_delete, h_sandbox_volume_attach,
	h_sandbox_volume_detach;
handler_fn h_exec, h_exec_stream, h_pty;
handler_fn h_sandbox_promote, h_port_preview;
handler_fn h_file_get, h_file_put, h_file_delete, h_file_list, h_file_stat, h_file_mkdir, h_file_chmod, h_file_rename, h_file_watch;
handler_fn h_cluster_join, h_cluster_heartbeat;
handler_fn h_host_create, h_host_list, h_host_get, h_host_delete, h_host_action, h_host_relay,
	h_host_snapshot_delete, h_host_templates, h_host_template_build, h_host_template_get,
	h_host_template_logs, h_host_template_delete, h_host_template_export, h_host_template_import,
	h_host_volume_create, h_host_volume_get, h_host_volume_delete;
handler_fn h_code_run, h_code_stream, h_code_context_create, h_code_context_list, h_code_context_delete, h_code_context_restart;
handler_fn h_proc_start, h_proc_list, h_proc_signal, h_proc_output, h_proc_stdin;
extern const struct route_hooks file_put_hooks;   /* checks an upload before its body */
/* h_file_tree.c: copy, multi-file write, tar archives */
handler_fn h_file_copy, h_file_write_many, h_file_archive_get, h_file_archive_put;
extern const struct route_hooks file_write_hooks, archive_put_hooks;
/* h_templates.c: a workspace's own templates */
handler_fn h_template_build, h_template_get, h_template_logs, h_template_delete;
extern const struct route_hooks template_build_hooks;
handler_fn h_mcp_sandbox, h_mcp_workspace;	/* mcp/mcp.c */
handler_fn h_port_expose, h_port_list, h_port_delete;	/* h_ports.c */
handler_fn h_proxy;				/* proxy/proxy.c */
handler_fn h_dashboard_root, h_dashboard;	/* h_dashboard.c */
handler_fn h_session_create, h_session_get, h_session_delete;	/* h_session.c */
handler_fn h_events;				/* h_events.c */
handler_fn h_key_list, h_key_create, h_key_delete;	/* h_keys.c */
/* POST /v1/keys's body made into a key of workspace (an id), answered 201;
 * /v1/admin/workspaces/{name}/keys makes keys the same way. */
int key_create_reply(struct req *r, const char *workspace);
/* GET /v1/keys and DELETE /v1/keys/{id} for workspace (the operator's
 * routes name another). */
int key_list_reply(struct req *r, const char *workspace);
int key_delete_reply(struct req *r, const char *workspace, const char *id);
handler_fn h_admin_ws_list, h_admin_ws_create, h_admin_ws_get, h_admin_ws_patch;	/* h_admin.c */
handler_fn h_admin_ws_delete, h_admin_ws_key, h_admin_ws_keys, h_admin_ws_key_delete, h_admin_usage;
handler_fn h_admin_plans, h_admin_plan_get, h_admin_plan_put, h_admin_plan_delete;	/* h_admin_plans.c */
handler_fn h_admin_audit;						/* h_audit.c */
handler_fn h_audit_list;	/* h_audit.c */

#endif
