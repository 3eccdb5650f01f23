/*
 * mcp_tools_ws: the rest of what a workspace can do, as tools of the
 * workspace endpoint (POST /mcp, docs/mcp.md): fork_tree, snapshots, the
 * egress policy, exposed ports, background processes and the templates.
 * Each calls what its REST handler calls (the operations layer, the host
 * interface, the store, or the handler's own helper in api/hcommon.h), so
 * the limits and the messages are the REST API's; only the framing
 * differs: an error is the tool's answer (isError), not a status.
 */
#include "host/guest_conn.h"
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/hcommon.h"
#include "api/render.h"
#include "api/http.h"
#include "mcp/mcp.h"
#include "ops/ops.h"
#include "ops/validate.h"
#include "common/err.h"
#include "store/store.h"
#include "net/net.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OUTPUT_MAX (1u << 20)		/* process_output: bytes kept per stream */
#define STR_(x) #x
#define NUM(x) STR_(x)

/* ---- results (field tables, ops/fields.h: mcp.c makes the outputSchema; the
 * objects the REST API answers with too are api/render.h's) ------------ */

static const struct field out_fork_tree[] = {
	{ .name = "sandboxes", .type = FIELD_OBJECTS, .required = true, .items = render_sandbox_fields },
	{ .name = "failed", .type = FIELD_INTEGER },
	{ .name = "error", .type = FIELD_STRING },
	{ .type = FIELD_END }
};
static const struct field out_list_snapshots[] = {
	{ .name = "snapshots", .type = FIELD_OBJECTS, .required = true, .items = render_snapshot_fields },
	{ .type = FIELD_END }
};
static const struct field out_delete_snapshot[] = {
	{ .name = "snapshot_id", .type = FIELD_STRING, .required = true },
	{ .name = "deleted", .type = FIELD_BOOLEAN, .required = true },
	{ .type = FIELD_END }
};
static const struct field out_unexpose_port[] = {
	{ .name = "sandbox_id", .type = FIELD_STRING, .required = true },
	{ .name = "port", .type = FIELD_INTEGER, .required = true },
	{ .name = "unexposed", .type = FIELD_BOOLEAN, .required = true },
	{ .type = FIELD_END }
};
static const struct field out_list_ports[] = {
	{ .name = "ports", .type = FIELD_OBJECTS, .required = true, .items = render_port_fields },
	{ .type = FIELD_END }
};
static const struct field out_start_process[] = {
	{ .name = "id", .type = FIELD_INTEGER, .required = true },
	{ .name = "pid", .type = FIELD_INTEGER, .required = true },
	{ .name = "status", .type = FIELD_STRING, .required = true },
	{ .type = FIELD_END }
};
static const struct field out_list_processes[] = {
	{ .name = "processes", .type = FIELD_OBJECTS, .required = true, .items = render_process_fields },
	{ .type = FIELD_END }
};
static const struct field out_signal_process[] = {
	{ .name = "sandbox_id", .type = FIELD_STRING, .required = true },
	{ .name = "process_id", .type = FIELD_INTEGER, .required = true },
	{ .name = "signal", .type = FIELD_INTEGER, .required = true },
	{ .name = "sent", .type = FIELD_BOOLEAN, .required = true },
	{ .type = FIELD_END }
};
static const struct field out_list_templates[] = {
	{ .name = "templates", .type = FIELD_OBJECTS, .required = true, .items = render_template_fields },
	{ .type = FIELD_END }
};

/* ---- arguments (field tables, ops/fields.h: mcp.c makes the inputSchema) ------------------------- */

static const struct field fork_tree_args[] = {
	MCP_SANDBOX_ID("The sandbox (sbx_...)."), { .type = FIELD_INCLUDE, .items = ops_fork_fields }, { .type = FIELD_END }
};
static const struct field delete_snapshot_args[] = {
	{ .name = "snapshot_id", .type = FIELD_STRING, .required = true, .max = OPS_NAME_MAX,
	  .description = "The snapshot (snap_...)." },
	{ .type = FIELD_END }
};
/* set_network: PUT .../network's body and the sandbox. */
static const struct field network_args[] = {
	MCP_SANDBOX_ID("The sandbox (sbx_...)."), { .type = FIELD_INCLUDE, .items = ops_network_fields },
	{ .type = FIELD_END }
};
#define PORT_ARG { .name = "port", .type = FIELD_INTEGER, .required = true, .min = 1, .max = 65535, \
		   .description = "A TCP port of the sandbox." }
static const struct field expose_args[] = {
	MCP_SANDBOX_ID("The sandbox (sbx_...)."), PORT_ARG,
	{ .name = "public", .type = FIELD_BOOLEAN, .description = "Reachable without the API key (default false)." },
	{ .type = FIELD_END }
};
static const struct field unexpose_args[] = { MCP_SANDBOX_ID("The sandbox (sbx_...)."), PORT_ARG, { .type = FIELD_END } };
/* start_process: POST .../processes's fields but stdin (no tool writes to a process). */
static const struct field proc_start_args[] = {
	MCP_SANDBOX_ID("The sandbox (sbx_...)."), { .type = FIELD_INCLUDE, .items = exec_fields }, { .type = FIELD_END }
};
#define PROCESS_ARG { .name = "process_id", .type = FIELD_INTEGER, .required = true, .min = 1, .max = 4294967295, \
		      .description = "The process's id, as start_process or list_processes gave it (not its pid)." }
static const struct field proc_signal_args[] = {
	MCP_SANDBOX_ID("The sandbox (sbx_...)."), PROCESS_ARG,
	{ .name = "signal", .type = FIELD_SCALAR, .required = true,
	  .description = "A name (TERM, SIGKILL...) or a number (1 to 64)." },
	{ .type = FIELD_END }
};
static const struct field proc_output_args[] = {
	MCP_SANDBOX_ID("The sandbox (sbx_...)."), PROCESS_ARG,
	{ .name = "wait_seconds", .type = FIELD_INTEGER, .min = 0, .max = PROC_WAIT_MAX,
	  .description = "Wait this long for more output or its end (default 0: what there is now)." },
	{ .type = FIELD_END }
};

/* ---- helpers --------------------------------------------------------------------------------------- */

/* args less sandbox_id: the REST body of the same request, for the
 * operations that check its fields themselves (and refuse unknown ones). */
static json_t *rest_body(const json_t *args)
{
	json_t *body = json_deep_copy(args);
	if (body)
		json_object_del(body, "sandbox_id");
	return body;
}

/* An answer built as JSON (NULL: out of memory) as the tool's result. */
static int answer(struct mcp_out *out, json_t *j)
{
	if (!j)
		return errf(ENOMEM, "out of memory");
	mcp_json(out, j);
	return 0;
}

/* The end of most tools: rc, the error of what they called (j, made
 * regardless, is dropped), or j as the result. Call what fills j before:
 * the order in which arguments are evaluated is unspecified. */
static int answer_rc(struct mcp_out *out, int rc, json_t *j)
{
	if (rc < 0) {
		json_decref(j);
		return rc;
	}
	return answer(out, j);
}

static struct ops_caller caller(struct mcp_call *c, bool touch)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	oc.touch = touch;
	return oc;
}

/* ---- fork_tree --------------------------------------------------------------------------------------- */

static int t_fork_tree(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc = caller(c, true);
	struct ops_forked f;
	/* a plan's limit: its message names it */
	int rc = ops_fork(&oc, tool_sandbox_id(c, args), args, true, &f);
	if (rc < 0 && f.made == 0)
		return rc;
	return answer(out, forked_json(rc, &f));	/* some made, some not: says both */
}

/* ---- snapshots ---------------------------------------------------------------------------------------- */

static int t_snapshot(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc = caller(c, true);
	char id[ID_MAX];
	json_t *j = NULL;
	int rc = ops_sandbox(&oc, tool_sandbox_id(c, args), NULL);
	rc = rc ?: ops_snapshot(&oc, tool_sandbox_id(c, args), id);	/* the plan's snapshots limit */
	rc = rc ?: snapshot_json(c->r, id, &j);
	return answer_rc(out, rc, j);
}

static int t_snapshot_list(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	(void)args;
	json_t *j = NULL;
	int rc = snapshot_list(c->r, &j);
	return answer_rc(out, rc, j);
}

static int t_snapshot_delete(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	const char *id = field_str(args, "snapshot_id", "");
	int rc = v_is_id(id, "snap_") ? hostif_snapshot_delete(c->r->api->hostif, c->r->workspace, id)
				      : errf(ENOENT, "snapshot %.40s not found", id);
	return answer_rc(out, rc, json_pack("{s:s,s:b}", "snapshot_id", id, "deleted", 1));
}

/* ---- the egress policy -------------------------------------------------------------------------------- */

static int t_network(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc = caller(c, true);
	struct sbx_row row;
	json_t *body = rest_body(args);
	oc.shaped = body;	/* checked as network_args: sandbox_id and ops_network_fields */
	int rc = body ? ops_set_network(&oc, tool_sandbox_id(c, args), body, &row) : errf(ENOMEM, "out of memory");
	json_decref(body);
	return answer_rc(out, rc, rc < 0 ? NULL : sandbox_json(&row));
}

/* ---- ports -------------------------------------------------------------------------------------------- */

static int t_port_expose(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	bool existed;
	json_t *j = NULL;
	int rc = tool_sandbox(c, args, true, NULL);
	rc = rc ?: port_expose(c->r, tool_sandbox_id(c, args), (int)field_int(args, "port", 0),
			       json_is_true(json_object_get(args, "public")), &existed, &j);
	return answer_rc(out, rc, j);
}

static int t_port_unexpose(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	const char *id = tool_sandbox_id(c, args);
	int port = (int)field_int(args, "port", 0);
	int rc = tool_sandbox(c, args, true, NULL);
	rc = rc ?: store_port_delete(c->r->api->store, id, port);	/* not exposed: -ENOENT saying so */
	return answer_rc(out, rc, json_pack("{s:s,s:i,s:b}", "sandbox_id", id, "port", port, "unexposed", 1));
}

static int t_port_list(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	json_t *j = NULL;
	int rc = tool_sandbox(c, args, false, NULL);
	rc = rc ?: port_list(c->r, tool_sandbox_id(c, args), &j);
	return answer_rc(out, rc, j);
}

/* ---- background processes ------------------------------------------------------------------------------ */

static int t_proc_start(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct exec_req e;
	struct sbx_row row;
	struct hostif_guest hg;
	const char *id = tool_sandbox_id(c, args);
	json_t *body = rest_body(args);
	/* The fields of POST .../processes, but for stdin (the schema has
	 * none: no tool writes to a process). */
	int rc = body ? exec_parse_json(body, 0, &e) : errf(ENOMEM, "out of memory");
	if (rc < 0) {
		json_decref(body);
		return rc;
	}
	e.background = true;
	char **env = NULL;
	if ((rc = tool_sandbox(c, args, true, &row)) == 0) {
		env = ops_env_merge(row.env, e.env);
		sbx_row_clear(&row);
		rc = env ? hostif_enter(c->r->api->hostif, c->r->workspace, id, &hg) : errf(ENOMEM, "out of memory");
	}
	if (rc == 0) {
		/* Leaving the guest leaves the process running: it is the agent's. */
		rc = exec_launch(c->r->api, c->r->workspace, id, hg.g, env, &e);
		tool_leave(c, &hg);
	}
	free(env);
	free(e.argv);
	json_decref(body);	/* after e, which borrows from it */
	return answer_rc(out, rc, json_pack("{s:I,s:I,s:s}", "id", (json_int_t)e.id, "pid", (json_int_t)e.pid,
					    "status", "running"));
}

static int t_proc_list(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct hostif_guest hg;
	json_t *j = NULL;
	int rc = tool_guest(c, args, &hg);
	if (rc == 0) {
		rc = proc_list(hg.g, &j);
		tool_leave(c, &hg);
	}
	return answer_rc(out, rc, j);
}

static int t_proc_signal(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct hostif_guest hg;
	uint32_t pid = (uint32_t)field_int(args, "process_id", 0);
	int sig = 0;
	int rc = proc_signal_of(json_object_get(args, "signal"), &sig);
	rc = rc ?: tool_guest(c, args, &hg);
	if (rc == 0) {
		rc = guest_signal(hg.g, pid, sig);
		tool_leave(c, &hg);
	}
	return answer_rc(out, rc, json_pack("{s:s,s:I,s:i,s:b}", "sandbox_id", tool_sandbox_id(c, args),
					    "process_id", (json_int_t)pid, "signal", sig, "sent", 1));
}

static int t_proc_output(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct hostif_guest hg;
	json_t *j = NULL;
	/* Tighter than REST's bound: the answer goes into a model's context. */
	uint64_t max = c->r->api->cfg->max_exec_output;
	max = max < OUTPUT_MAX ? max : OUTPUT_MAX;
	int rc = tool_guest(c, args, &hg);
	if (rc == 0) {
		rc = proc_output(hg.g, (uint32_t)field_int(args, "process_id", 0), field_int(args, "wait_seconds", 0), max,
				 req_socket(c->r), &j);
		tool_leave(c, &hg);	/* a process still running stays so */
	}
	return answer_rc(out, rc, j);
}

/* ---- templates ---------------------------------------------------------------------------------------- */

static int t_templates(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	(void)args;
	json_t *j = NULL;
	int rc = templates_list(c->r->api->hostif, c->r->workspace, &j);
	return answer_rc(out, rc, j);
}

/* ---- the table ------------------------------------------------------------------------------------------ */

const struct mcp_tool mcp_ws_tools[] = {
	{ "fork_tree", "Fork a sandbox into identical children",
	  "Fork a running sandbox into count children in one pause: every child continues from the "
	  "same instant of memory and disk (fork_sandbox pauses the parent once per child, so its "
	  "children may differ by what ran in between). For trying several paths from one state.",
	  fork_tree_args,
	  out_fork_tree, 0, t_fork_tree },
	{ "snapshot_sandbox", "Snapshot a sandbox",
	  "Save a sandbox's memory and disk as a snapshot (snap_...) and keep it running. create_sandbox "
	  "with from_snapshot starts new sandboxes from it, as many as you like.",
	  mcp_sandbox_only, render_snapshot_fields, 0, t_snapshot },
	{ "list_snapshots", "List snapshots", "List the workspace's snapshots.",
	  mcp_no_args,
	  out_list_snapshots, MCP_READ_ONLY, t_snapshot_list },
	{ "delete_snapshot", "Delete a snapshot",
	  "Delete a snapshot; sandboxes made from it keep running.",
	  delete_snapshot_args,
	  out_delete_snapshot, MCP_DESTRUCTIVE, t_snapshot_delete },
	{ "set_network", "Set what a sandbox may reach",
	  "Replace a sandbox's whole egress policy (fields left out take their defaults: no fields is "
	  "the open policy); in force when it answers. Connections already open are not cut.",
	  network_args,
	  render_sandbox_fields, 0, t_network },
	{ "expose_port", "Expose a port of a sandbox",
	  "Make a TCP port of the sandbox reachable over HTTP(S) through kiln: answers its URLs. Private "
	  "(the default) needs the API key; public: anyone with the URL. Exposing it again changes public.",
	  expose_args,
	  render_port_fields, 0, t_port_expose },
	{ "unexpose_port", "Stop exposing a port",
	  "Stop exposing a port of the sandbox: its URLs answer no more.",
	  unexpose_args,
	  out_unexpose_port, MCP_DESTRUCTIVE, t_port_unexpose },
	{ "list_ports", "List a sandbox's exposed ports", "The sandbox's exposed ports with their URLs.",
	  mcp_sandbox_only,
	  out_list_ports, MCP_READ_ONLY, t_port_list },
	{ "start_process", "Start a background process",
	  "Start a command in the sandbox that keeps running after this call (a server, a long job): "
	  "answers its id at once. process_output reads what it prints, signal_process stops it.",
	  proc_start_args,
	  out_start_process, MCP_DESTRUCTIVE, t_proc_start },
	{ "list_processes", "List background processes",
	  "The background processes the sandbox keeps, running and exited, with their exit codes.",
	  mcp_sandbox_only,
	  out_list_processes, MCP_READ_ONLY, t_proc_list },
	{ "signal_process", "Signal a background process",
	  "Send a signal to a background process: TERM (stop), KILL, INT, HUP... by name or number.",
	  proc_signal_args,
	  out_signal_process, MCP_DESTRUCTIVE, t_proc_signal },
	{ "process_output", "Read a background process's output",
	  "What a background process printed that the sandbox kept (the latest part), then more until it "
	  "ends or wait_seconds pass; status says whether it has ended, and how (each stream cut after 1 MiB).",
	  proc_output_args,
	  render_process_output_fields, MCP_READ_ONLY, t_proc_output },
	{ "list_templates", "List templates",
	  "The templates sandboxes are made from (create_sandbox's template), with their size and "
	  "whether they are built.",
	  mcp_no_args,
	  out_list_templates, MCP_READ_ONLY, t_templates },
};
const int mcp_ws_ntools = sizeof mcp_ws_tools / sizeof mcp_ws_tools[0];
