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
 *     arguments that break the tool's inputSchema (-32602);
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

static bool has_type(const json_t *v, const char *type)
{
	if (!strcmp(type, "string")) return json_is_string(v);
	if (!strcmp(type, "integer")) return json_is_integer(v);
	if (!strcmp(type, "number")) return json_is_number(v);
	if (!strcmp(type, "boolean")) return json_is_boolean(v);
	if (!strcmp(type, "object")) return json_is_object(v);
	if (!strcmp(type, "array")) return json_is_array(v);
	return false;
}

/* v against the subset of JSON Schema our tools' inputSchemas use: type,
 * properties, required, additionalProperties (false or a schema), enum,
 * minimum, maximum, maxLength, maxProperties, propertyNames (its lengths),
 * items, minItems, maxItems.
 * -EINVAL naming the offending argument. */
int mcp_schema_check(const json_t *schema, const json_t *v, const char *where)
{
	const char *type = json_string_value(json_object_get(schema, "type"));
	if (type && !has_type(v, type))
		return errf(EINVAL, "%s must be %s%s, not %s", where,
			    strchr("aeiou", type[0]) ? "an " : "a ", type, v_type_name(v));
	/* A list of types (a signal: a name or a number): one of them. */
	json_t *types = json_object_get(schema, "type"), *ty;
	size_t ti;
	bool any = !json_is_array(types);
	char tnames[80] = "";
	json_array_foreach(types, ti, ty) {
		const char *n = json_string_value(ty);
		any = any || (n && has_type(v, n));
		size_t len = strlen(tnames);
		snprintf(tnames + len, sizeof tnames - len, "%s%s", ti ? " or " : "", n ? n : "?");
	}
	if (!any)
		return errf(EINVAL, "%s must be %s, not %s", where, tnames, v_type_name(v));
	json_t *e = json_object_get(schema, "enum");
	if (e) {
		size_t i;
		json_t *x;
		bool found = false;
		json_array_foreach(e, i, x)
			found = found || json_equal(x, (json_t *)v);
		if (!found)
			return errf(EINVAL, "%s is not one of the allowed values", where);
	}
	json_t *min = json_object_get(schema, "minimum"), *max = json_object_get(schema, "maximum");
	if (json_is_number(v) && ((min && json_number_value(v) < json_number_value(min)) ||
				  (max && json_number_value(v) > json_number_value(max))))
		return errf(EINVAL, "%s must be from %lld to %lld", where,
			    (long long)json_number_value(min), (long long)json_number_value(max));
	json_t *maxlen = json_object_get(schema, "maxLength");
	if (json_is_string(v) && maxlen && json_string_length(v) > (size_t)json_integer_value(maxlen))
		return errf(EINVAL, "%s is longer than %lld bytes", where,
			    (long long)json_integer_value(maxlen));
	char sub[160];
	if (json_is_array(v)) {
		json_t *mi = json_object_get(schema, "minItems"), *ma = json_object_get(schema, "maxItems");
		if ((mi && json_array_size(v) < (size_t)json_integer_value(mi)) ||
		    (ma && json_array_size(v) > (size_t)json_integer_value(ma)))
			return errf(EINVAL, "%s has too few or too many items", where);
		json_t *items = json_object_get(schema, "items"), *x;
		size_t i;
		json_array_foreach(v, i, x) {
			snprintf(sub, sizeof sub, "%s[%zu]", where, i);
			int rc = items ? mcp_schema_check(items, x, sub) : 0;
			if (rc < 0)
				return rc;
		}
	}
	if (!json_is_object(v))
		return 0;
	json_t *props = json_object_get(schema, "properties");
	json_t *extra = json_object_get(schema, "additionalProperties");
	json_t *maxp = json_object_get(schema, "maxProperties");
	if (maxp && json_object_size(v) > (size_t)json_integer_value(maxp))
		return errf(EINVAL, "%s has more than %lld entries", where, (long long)json_integer_value(maxp));
	/* An env's names: as long as the operation takes (fields_schema). */
	json_t *names = json_object_get(schema, "propertyNames");
	if (names) {
		const char *k;
		json_t *x;
		json_int_t lo = json_integer_value(json_object_get(names, "minLength"));
		json_int_t hi = json_integer_value(json_object_get(names, "maxLength"));
		json_object_foreach((json_t *)v, k, x)
			if ((json_int_t)strlen(k) < lo || (hi && (json_int_t)strlen(k) > hi))
				return errf(EINVAL, "%s: keys must be %lld to %lld bytes", where, (long long)lo,
					    (long long)hi);
	}
	size_t i;
	json_t *req;
	json_array_foreach(json_object_get(schema, "required"), i, req) {
		json_t *x = json_object_get(v, json_string_value(req));
		if (!x || json_is_null(x))
			return errf(EINVAL, "argument '%s' is required", json_string_value(req));
	}
	const char *k;
	json_t *x;
	json_object_foreach((json_t *)v, k, x) {
		json_t *ps = props ? json_object_get(props, k) : NULL;
		if (!strcmp(where, "arguments"))
			snprintf(sub, sizeof sub, "argument '%.64s'", k);
		else
			snprintf(sub, sizeof sub, "%.80s['%.64s']", where, k);
		if (!ps && json_is_false(extra))
			return errf(EINVAL, "unknown argument '%.64s'", k);
		if (!ps)
			ps = json_is_object(extra) ? extra : NULL;
		/* null is an absent optional argument, as in the REST API */
		int rc = ps && !json_is_null(x) ? mcp_schema_check(ps, x, sub) : 0;
		if (rc < 0)
			return rc;
	}
	return 0;
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
 * where it has one, so that the bounds shown are the ones checked): on
 * the workspace endpoint a sandbox tool takes sandbox_id first. */
json_t *mcp_input_schema(const struct mcp_tool *t, const char *sandbox_id)
{
	json_t *s = fields_schema(t->input);
	if (!s || sandbox_id || !(t->flags & MCP_SANDBOX))
		return s;
	json_t *props = json_object(), *req = json_array();
	json_object_set_new(props, "sandbox_id", json_pack("{s:s,s:s}", "type", "string",
		"description", "The sandbox (sbx_...), from create_sandbox or list_sandboxes."));
	json_object_update(props, json_object_get(s, "properties"));
	json_array_append_new(req, json_string("sandbox_id"));
	if (json_object_get(s, "required"))
		json_array_extend(req, json_object_get(s, "required"));
	json_object_set_new(s, "properties", props);
	json_object_set_new(s, "required", req);
	return s;
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
	json_t *schema = mcp_input_schema(t, c->sandbox_id);
	int rc = schema ? mcp_schema_check(schema, args, "arguments") : errf(ENOMEM, "out of memory");
	json_decref(schema);
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
