/*
 * mcp: the protocol side of kiln's MCP servers (see mcp.h, docs/mcp.md).
 *
 * Transport: Streamable HTTP, stateless. Each POST carries one JSON-RPC
 * message, or a batch (2025-03-26 allowed them); the answer is one
 * application/json body, or 202 with no body when the POST held only
 * notifications and responses. There is no Mcp-Session-Id and no
 * server-to-client stream (GET answers 405, which clients take as "none"),
 * so every request stands alone and a tool call is a thread blocking on
 * the guest, as POST .../exec is.
 *
 * Errors, by layer:
 *   - HTTP, kilnd's error shape: 401 (API key, before we run), 404 (the
 *     sandbox of the per-sandbox endpoint), 403 (an Origin not allowed:
 *     the spec's defence against DNS rebinding);
 *   - JSON-RPC, with HTTP 400: a body that is not JSON (-32700), not a
 *     message (-32600), or an MCP-Protocol-Version header we do not speak;
 *   - JSON-RPC, with HTTP 200: unknown methods (-32601), unknown tools and
 *     arguments that break the tool's field table, whose inputSchema says
 *     the same (-32602);
 *   - a tool that ran and failed (no such file, sandbox gone) answers a
 *     result with isError: true, so the model reads why.
 */
#include "mcp/mcp.h"
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "ops/ops.h"
#include "ops/validate.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RPC_PARSE_ERROR      (-32700)
#define RPC_INVALID_REQUEST  (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS   (-32602)
#define RPC_INTERNAL         (-32603)

#define SERVER_VERSION "0.1.0"
#define BATCH_MAX 64

static const char *const versions[MCP_NVERSIONS] = { "2025-06-18", "2025-03-26", "2024-11-05" };

static int version_of(const char *s, enum mcp_version *out)
{
	for (int i = 0; i < MCP_NVERSIONS; i++)
		if (s && !strcmp(s, versions[i])) {
			*out = (enum mcp_version)i;
			return 0;
		}
	return -1;
}

/* ---- Origin ------------------------------------------------------------------------------------ */

/* http(s)://HOST[:PORT] with HOST a loopback name: a page served from this
 * machine. Anything after the port (a path) makes it no origin at all. */
static bool loopback_origin(const char *o)
{
	const char *p;
	if (!strncmp(o, "http://", 7))
		p = o + 7;
	else if (!strncmp(o, "https://", 8))
		p = o + 8;
	else
		return false;
	static const char *const hosts[] = { "localhost", "127.0.0.1", "[::1]" };
	for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
		size_t n = strlen(hosts[i]);
		if (strncasecmp(p, hosts[i], n) != 0)
			continue;
		p += n;
		if (*p == ':')
			for (p++; *p >= '0' && *p <= '9'; p++)
				;
		return *p == 0;
	}
	return false;
}

/* Browsers send Origin; agents' HTTP clients do not. A request without one
 * cannot come from a web page, so it passes (it still needs the key). */
static bool origin_allowed(const struct api_config *cfg, const char *origin)
{
	if (!origin || loopback_origin(origin))
		return true;
	size_t n = strlen(origin);
	for (const char *p = cfg->mcp_origins; *p;) {
		const char *end = strchrnul(p, ',');
		if ((size_t)(end - p) == n && !strncmp(p, origin, n))
			return true;
		p = *end ? end + 1 : end;
	}
	return false;
}

/* ---- JSON-RPC replies ------------------------------------------------------------------------------ */

static json_t *rpc_error(json_t *id, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static json_t *rpc_error(json_t *id, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	json_t *m = json_string(msg);
	if (!m)
		m = json_string("(message not valid UTF-8)");
	return json_pack("{s:s,s:O,s:{s:i,s:o}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
			 "error", "code", code, "message", m);
}

static json_t *rpc_result(json_t *id, json_t *result)
{
	return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

/* ---- argument checking ------------------------------------------------------------------------------ */

/* The arguments tool t takes on the endpoint (sandbox_id: the per-sandbox
 * one's, or NULL): its table, and on the workspace endpoint a sandbox
 * tool's sandbox_id first (in buf). */
static const struct field *tool_fields(const struct mcp_tool *t, const char *sandbox_id, struct field buf[3])
{
	if (sandbox_id || !(t->flags & MCP_SANDBOX))
		return t->input;
	buf[0] = (struct field)MCP_SANDBOX_ID("The sandbox (sbx_...), from create_sandbox or list_sandboxes.");
	buf[1] = (struct field){ .type = FIELD_INCLUDE, .items = t->input };
	buf[2] = (struct field){ .type = FIELD_END };
	return buf;
}

/* args against the tool's field table, as the operation behind the tool
 * checks a REST body (same bounds, same messages, but "argument" where
 * REST says "field"), with sandbox_id first on the workspace endpoint for
 * a sandbox tool: the table's shape (fields_check_shape), which the
 * inputSchema made from it shows; what the schema cannot say (a field's
 * own parser, a plan's cap) the operation checks, told by ops_caller's
 * shaped that the rest is all it has left (each rule once). -EINVAL with
 * errmsg() set. */
static int args_check(const struct mcp_call *c, const struct mcp_tool *t, const json_t *args)
{
	struct field buf[3];
	int rc = fields_check_shape(tool_fields(t, c->sandbox_id, buf), args);
	if (rc == 0)
		return 0;
	char why[512];
	const char *m = errmsg();
	if (!strncmp(m, "unknown field ", 14))
		snprintf(why, sizeof why, "unknown argument %s", m + 14);
	else if (!strncmp(m, "field ", 6))
		snprintf(why, sizeof why, "argument %s", m + 6);
	else
		snprintf(why, sizeof why, "%s", m);
	return errf(-rc, "%s", why);
}

/* ---- the tool registry ------------------------------------------------------------------------------ */

/* Every table, in the order tools/list shows them (mcp.h). */
static const struct {
	const struct mcp_tool *tools;
	const int *n;
} tables[] = { { mcp_tools, &mcp_ntools }, { mcp_ws_tools, &mcp_ws_ntools } };
#define NTABLES (int)(sizeof tables / sizeof tables[0])

/* The tools this endpoint serves, table after table: start it at
 * {0, -1}; NULL after the last. */
struct tool_it {
	int t, k;
};

static const struct mcp_tool *next_tool(const struct mcp_call *c, struct tool_it *it)
{
	while (it->t < NTABLES) {
		if (++it->k >= *tables[it->t].n) {
			it->t++;
			it->k = -1;
			continue;
		}
		const struct mcp_tool *x = &tables[it->t].tools[it->k];
		if (!c->sandbox_id || (x->flags & MCP_SANDBOX))
			return x;
	}
	return NULL;
}

static const struct mcp_tool *find_tool(const struct mcp_call *c, const char *name)
{
	struct tool_it it = { 0, -1 };
	const struct mcp_tool *t;
	while ((t = next_tool(c, &it)))
		if (!strcmp(t->name, name))
			return t;
	return NULL;
}

/* A tool's inputSchema, made from its field table (the operation's own
 * where it has one, so that the bounds shown are the ones checked). */
json_t *mcp_input_schema(const struct mcp_tool *t, const char *sandbox_id)
{
	struct field buf[3];
	return fields_schema(tool_fields(t, sandbox_id, buf));
}

static json_t *tool_json(const struct mcp_call *c, const struct mcp_tool *t)
{
	json_t *j = json_pack("{s:s,s:s,s:o}", "name", t->name, "description", t->description,
			      "inputSchema", mcp_input_schema(t, c->sandbox_id));
	if (!j)
		return NULL;
	/* Fields a version does not define are left out for its clients. */
	if (c->version <= MCP_2025_06_18) {
		json_object_set_new(j, "title", json_string(t->title));
		if (t->output)
			json_object_set_new(j, "outputSchema", fields_out_schema(t->output));
	}
	if (c->version <= MCP_2025_03_26)
		json_object_set_new(j, "annotations", json_pack("{s:s,s:b,s:b,s:b}",
			"title", t->title, "readOnlyHint", !!(t->flags & MCP_READ_ONLY),
			"destructiveHint", !!(t->flags & MCP_DESTRUCTIVE), "openWorldHint", 0));
	return j;
}

void mcp_text(struct mcp_out *out, const char *text, size_t len)
{
	json_t *s = json_stringn(text ? text : "", len);
	json_array_append_new(out->content, json_pack("{s:s,s:o}", "type", "text", "text",
		s ? s : json_string("(output not valid UTF-8)")));
}

int mcp_json(struct mcp_out *out, json_t *obj)
{
	if (!obj)
		return errf(ENOMEM, "out of memory");
	char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	if (text)
		mcp_text(out, text, strlen(text));
	free(text);
	json_decref(out->structured);
	out->structured = obj;
	return 0;
}

/* ---- methods ------------------------------------------------------------------------------------------ */

static json_t *m_initialize(struct mcp_call *c, json_t *id, json_t *params)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
	if (!asked)
		return rpc_error(id, RPC_INVALID_PARAMS, "initialize: params.protocolVersion (a string) is required");
	/* The client's version if we speak it, else our newest: the client
	 * then decides whether it can go on. */
	enum mcp_version v = MCP_2025_06_18;
	version_of(asked, &v);
	c->version = v;
	const char *instructions = c->sandbox_id
		? "Tools that act inside one kiln sandbox, a Linux microVM: run shell commands, "
		  "read, write and list files. Paths are absolute guest paths."
		: "Tools for kiln sandboxes (Linux microVMs): create, list, fork, hibernate, "
		  "snapshot and delete sandboxes, run shell commands and background processes and "
		  "read, write and list files in them, set what they may reach, expose their ports, "
		  "and keep data in named volumes that outlive them. "
		  "Create a sandbox first; the other tools take its sandbox_id.";
	json_t *info = json_pack("{s:s,s:s}", "name", c->sandbox_id ? "kiln-sandbox" : "kiln",
				 "version", SERVER_VERSION);
	if (info && v <= MCP_2025_06_18)
		json_object_set_new(info, "title", json_string(c->sandbox_id ? "kiln sandbox" : "kiln"));
	return rpc_result(id, json_pack("{s:s,s:{s:{s:b}},s:o,s:s}", "protocolVersion", versions[v],
					"capabilities", "tools", "listChanged", 0,
					"serverInfo", info, "instructions", instructions));
}

static json_t *m_tools_list(struct mcp_call *c, json_t *id, json_t *params)
{
	(void)params;
	json_t *a = json_array();
	struct tool_it it = { 0, -1 };
	const struct mcp_tool *t;
	while ((t = next_tool(c, &it)))
		json_array_append_new(a, tool_json(c, t));
	return rpc_result(id, json_pack("{s:o}", "tools", a));
}

static json_t *m_tools_call(struct mcp_call *c, json_t *id, json_t *params)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	if (!name)
		return rpc_error(id, RPC_INVALID_PARAMS, "tools/call: params.name (a string) is required");
	const struct mcp_tool *t = find_tool(c, name);
	if (!t)
		return rpc_error(id, RPC_INVALID_PARAMS, "unknown tool '%.64s'; tools/list names them", name);
	if (args && !json_is_null(args) && !json_is_object(args))
		return rpc_error(id, RPC_INVALID_PARAMS, "tool %s: arguments must be an object", name);
	json_t *empty = json_object();
	if (!args || json_is_null(args))
		args = empty;
	int rc = args_check(c, t, args);
	if (rc < 0) {
		json_decref(empty);
		return rpc_error(id, RPC_INVALID_PARAMS, "tool %s: %s", name, errmsg());
	}
	struct mcp_out out = { json_array(), NULL };
	rc = out.content ? t->fn(c, args, &out) : errf(ENOMEM, "out of memory");
	json_decref(empty);
	json_t *result;
	if (rc < 0) {
		/* The model is told what went wrong, as the tool's answer. */
		json_array_clear(out.content);
		const char *msg = errmsg();
		mcp_text(&out, msg, strlen(msg));
		result = json_pack("{s:o,s:b}", "content", out.content, "isError", 1);
	} else {
		result = json_pack("{s:o,s:b}", "content", out.content, "isError", 0);
		if (result && out.structured && c->version <= MCP_2025_06_18)
			json_object_set(result, "structuredContent", out.structured);
	}
	json_decref(out.structured);
	return result ? rpc_result(id, result) : rpc_error(id, RPC_INTERNAL, "out of memory");
}

/* One message of the POST: the response to send, or NULL (notifications
 * and responses get none). */
static json_t *handle(struct mcp_call *c, json_t *msg)
{
	if (!json_is_object(msg))
		return rpc_error(NULL, RPC_INVALID_REQUEST, "a JSON-RPC message must be an object");
	json_t *id = json_object_get(msg, "id");
	const char *jsonrpc = json_string_value(json_object_get(msg, "jsonrpc"));
	json_t *method_j = json_object_get(msg, "method");
	json_t *params = json_object_get(msg, "params");
	if (id && !json_is_string(id) && !json_is_integer(id))
		return rpc_error(NULL, RPC_INVALID_REQUEST, "id must be a string or an integer");
	if (!jsonrpc || strcmp(jsonrpc, "2.0") != 0)
		return rpc_error(id, RPC_INVALID_REQUEST, "jsonrpc must be \"2.0\"");
	if (!method_j) {
		/* A response to a request of ours: we send none, so drop it. */
		if (json_object_get(msg, "result") || json_object_get(msg, "error"))
			return NULL;
		return rpc_error(id, RPC_INVALID_REQUEST, "a message needs a method");
	}
	const char *method = json_string_value(method_j);
	if (!method)
		return rpc_error(id, RPC_INVALID_REQUEST, "method must be a string");
	if (params && !json_is_object(params))
		return id ? rpc_error(id, RPC_INVALID_PARAMS, "params must be an object") : NULL;
	if (!id)
		return NULL;	/* notifications: initialized, cancelled, ...: nothing to do */
	if (!strcmp(method, "initialize"))
		return m_initialize(c, id, params);
	if (!strcmp(method, "ping"))
		return rpc_result(id, json_object());
	if (!strcmp(method, "tools/list"))
		return m_tools_list(c, id, params);
	if (!strcmp(method, "tools/call"))
		return m_tools_call(c, id, params);
	return rpc_error(id, RPC_METHOD_NOT_FOUND, "method '%.64s' not found", method);
}

static int serve(struct req *r, const char *sandbox_id)
{
	struct mcp_call c = { r, sandbox_id, MCP_2025_03_26 };
	const char *origin = req_header(r, "Origin");
	if (!origin_allowed(r->api->cfg, origin))
		return reply_error(r, 403, "forbidden", "Origin %.200s is not allowed (kilnd --mcp-origins)",
				   origin);
	/* Clients name the negotiated version on every request after
	 * initialize; without the header, 2025-03-26 is assumed (the spec). */
	const char *hv = req_header(r, "MCP-Protocol-Version");
	if (hv && version_of(hv, &c.version) < 0)
		return reply_json(r, 400, rpc_error(NULL, RPC_INVALID_REQUEST,
			"MCP-Protocol-Version %.40s is not supported; kiln speaks %s, %s and %s", hv,
			versions[0], versions[1], versions[2]));
	if (!r->body || r->body_len == 0)
		return reply_json(r, 400, rpc_error(NULL, RPC_INVALID_REQUEST,
			"the body must be a JSON-RPC message"));
	json_error_t e;
	json_t *body = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &e);
	if (!body)
		return reply_json(r, 400, rpc_error(NULL, RPC_PARSE_ERROR, "parse error: %s (line %d, column %d)",
						    e.text, e.line, e.column));
	int result;
	if (json_is_array(body)) {
		size_t n = json_array_size(body), i;
		json_t *msg, *out = json_array();
		if (n == 0 || n > BATCH_MAX) {
			json_decref(out);
			json_decref(body);
			return reply_json(r, 400, rpc_error(NULL, RPC_INVALID_REQUEST,
				"a batch holds 1 to %d messages", BATCH_MAX));
		}
		json_array_foreach(body, i, msg) {
			json_t *answer = handle(&c, msg);
			if (answer)
				json_array_append_new(out, answer);
		}
		result = json_array_size(out) ? reply_json(r, 200, out) : (json_decref(out), reply_empty(r, 202));
	} else {
		json_t *answer = handle(&c, body);
		result = answer ? reply_json(r, json_is_object(body) ? 200 : 400, answer) : reply_empty(r, 202);
	}
	json_decref(body);
	return result;
}

int h_mcp_sandbox(struct req *r)
{
	/* Only the 404; each tool says itself whether it is activity. */
	const char *id = r->params[0];
	if (!v_is_id(id, "sbx_") || hostif_get(r->api->hostif, r->workspace, id, false, NULL) < 0)
		return reply_sandbox_missing(r, id);
	return serve(r, r->params[0]);
}

int h_mcp_workspace(struct req *r)
{
	/* A plan may leave the workspace MCP out (ops/plan.h). */
	struct plan p;
	int rc = req_plan(r, &p);
	if (rc < 0)
		return reply_errno(r, rc);
	if (p.limits.no_workspace_mcp)
		return reply_error(r, 403, "forbidden", "plan %s does not include the workspace MCP "
				   "(no_workspace_mcp); a sandbox's own MCP (/v1/sandboxes/ID/mcp) is there", p.name);
	return serve(r, NULL);
}
