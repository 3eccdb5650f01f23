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
 *                                logs
 *
 * mcp.c is the protocol (JSON-RPC, versions, Origin, the tool registry and
 * argument checking against each tool's inputSchema); mcp_tools.c the
 * tools, which call the operations and the host interface as the REST
 * handlers do.
 */
#ifndef KILN_MCP_MCP_H
#define KILN_MCP_MCP_H

#include <jansson.h>
#include <stdbool.h>

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

/* A tool runs with arguments already checked against input_schema. It
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
	/* JSON Schema text. A sandbox tool's schema has no sandbox_id: the
	 * workspace endpoint adds it. */
	const char *input_schema, *output_schema;
	unsigned flags;
	mcp_tool_fn *fn;
};

extern const struct mcp_tool mcp_tools[];
extern const int mcp_ntools;

/* Helpers for tools (mcp.c). */
void mcp_text(struct mcp_out *out, const char *text, size_t len);
/* The structured object as the text block too (the spec's advice for
 * clients that read only content); steals obj. */
void mcp_json(struct mcp_out *out, json_t *obj);

#endif
