/*
 * mcp: kiln as Model Context Protocol servers (docs/mcp.md), over the
 * Streamable HTTP transport:
 *
 *   POST /v1/sandboxes/{id}/mcp  the tools of one sandbox: shell,
 *                                read_file, write_file, list_dir
 *   POST /mcp                    the tools of the caller's workspace: the
 *                                same four with a sandbox_id argument, and
 *                                create, list, get, delete, fork, hibernate
 *                                and wake sandboxes; create, list and
 *                                delete volumes; create, list, get,
 *                                deploy and delete apps, and read their
 *                                logs; snapshots, the egress policy,
 *                                ports, background processes and
 *                                templates (mcp_tools_ws.c)
 *
 * mcp.c is the protocol (JSON-RPC, versions, Origin, the tool registry and
 * argument checking against each tool's field table); mcp_tools.c and
 * mcp_tools_ws.c the tools, which call the operations and the host interface as the REST
 * handlers do.
 */
#ifndef KILN_MCP_MCP_H
#define KILN_MCP_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops/fields.h"

struct req;

/* Protocol versions, newest first: the index is what a call carries. */
enum mcp_version { MCP_2025_06_18, MCP_2025_03_26, MCP_2024_11_05, MCP_NVERSIONS };

struct mcp_call {
	struct req *r;
	const char *sandbox_id;		/* the per-sandbox endpoint's, or NULL */
	enum mcp_version version;
};

/* What a tool produces: content blocks for the model, and the same as one
 * object (structuredContent, 2025-06-18) matching the tool's outputSchema. */
struct mcp_out {
	json_t *content;		/* array */
	json_t *structured;		/* object, or NULL */
};

/* A tool runs with arguments already checked against its input table. It
 * returns 0, or -errno with errmsg() set: a failure the model is told
 * about (isError), not a protocol error. */
typedef int mcp_tool_fn(struct mcp_call *c, const json_t *args, struct mcp_out *out);

enum {
	MCP_SANDBOX = 1,	/* acts on a sandbox: listed on both endpoints */
	MCP_READ_ONLY = 2,	/* annotations: readOnlyHint */
	MCP_DESTRUCTIVE = 4,	/* destructiveHint */
};

struct mcp_tool {
	const char *name, *title, *description;
	/* The arguments, as a field table (ops/fields.h): the inputSchema is
	 * made from it (fields_schema), never written as text. A sandbox
	 * tool's has no sandbox_id: the workspace endpoint adds it. */
	const struct field *input;
	/* structuredContent, as a response's field table (ops/fields.h): the
	 * outputSchema is made from it (fields_out_schema). An object the
	 * REST API answers with too is api/render.h's table. */
	const struct field *output;
	unsigned flags;
	mcp_tool_fn *fn;
};

/* The tables of tools, listed in this order: mcp_tools.c's (sandboxes,
 * guest work, volumes), then mcp_tools_ws.c's (snapshots, network,
 * ports, processes, templates). */
extern const struct mcp_tool mcp_tools[];
extern const int mcp_ntools;
extern const struct mcp_tool mcp_ws_tools[];
extern const int mcp_ws_ntools;

/* The argument tables tools share: none; only sandbox_id (the field
 * MCP_SANDBOX_ID makes). */
extern const struct field mcp_no_args[];
extern const struct field mcp_sandbox_only[];
#define MCP_SANDBOX_ID(desc) { .name = "sandbox_id", .type = FIELD_STRING, .required = true, .description = desc }

/* Tool t's inputSchema as the endpoint (sandbox_id: the per-sandbox one's,
 * or NULL) shows it; NULL when out of memory. */
json_t *mcp_input_schema(const struct mcp_tool *t, const char *sandbox_id);

/* Helpers for tools (mcp_tools.c). The tool's sandbox: the endpoint's, or
 * its sandbox_id argument. */
struct hostif_guest;
struct sbx_row;
const char *tool_sandbox_id(struct mcp_call *c, const json_t *args);
/* It is the caller's; touch: the lookup is activity (TTL); *row (NULL:
 * only the check) gets its record. */
int tool_sandbox(struct mcp_call *c, const json_t *args, bool touch, struct sbx_row *row);
/* It is the caller's, entered for guest work (woken if it hibernates):
 * hg->g, until tool_leave. */
int tool_guest(struct mcp_call *c, const json_t *args, struct hostif_guest *hg);
void tool_leave(struct mcp_call *c, struct hostif_guest *hg);
/* The record as a tool's answer (the row is cleared). */
json_t *sandbox_json(struct sbx_row *row);

/* Helpers for tools (mcp.c). */
void mcp_text(struct mcp_out *out, const char *text, size_t len);
/* The structured object as the text block too (the spec's advice for
 * clients that read only content); steals obj. 0, or -ENOMEM for a NULL
 * obj (a json_pack that ran out of memory), so a tool can end with
 * `return mcp_json(out, j);`. */
int mcp_json(struct mcp_out *out, json_t *obj);

#endif
