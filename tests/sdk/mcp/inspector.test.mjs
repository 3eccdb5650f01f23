// kiln's workspace MCP (POST /mcp) driven by the MCP Inspector's CLI
// (@modelcontextprotocol/inspector --cli, over Streamable HTTP with the key
// in an Authorization header): a second client, apart from the SDK's, that
// a developer points at a server to see it. tools/list names every tool the
// server lists, a tools/call answers, and a bad key fails.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { dirname } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const URL_ = process.env.KILN_API_URL;
const KEY = process.env.KILN_API_KEY;
const here = dirname(fileURLToPath(import.meta.url));

/** The Inspector's CLI on the workspace endpoint with this key: its stdout as JSON. */
async function inspector(key, ...args) {
  const { stdout } = await promisify(execFile)("npx", ["--no-install", "@modelcontextprotocol/inspector", "--cli",
    `${URL_}/mcp`, "--transport", "http", "--header", `Authorization: Bearer ${key}`, ...args],
  { cwd: here, timeout: 120000, maxBuffer: 16 << 20 });
  return JSON.parse(stdout);
}

/** The tools the server lists, asked with plain JSON-RPC. */
async function served() {
  const r = await fetch(`${URL_}/mcp`, {
    method: "POST",
    headers: { Authorization: `Bearer ${KEY}`, "Content-Type": "application/json",
      Accept: "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
  return (await r.json()).result.tools.map((t) => t.name);
}

test("inspector: tools/list lists every tool", async () => {
  const { tools } = await inspector(KEY, "--method", "tools/list");
  const names = tools.map((t) => t.name);
  assert.deepEqual(names, await served());
  for (const n of ["create_sandbox", "shell", "fork_tree", "snapshot_sandbox", "set_network", "expose_port",
    "start_process", "process_output", "list_templates"]) {
    assert.ok(names.includes(n), `${n} in ${names}`);
  }
  for (const t of tools) assert.equal(t.inputSchema.type, "object", t.name);
});

test("inspector: tools/call list_templates and get_sandbox", async () => {
  const r = await inspector(KEY, "--method", "tools/call", "--tool-name", "list_templates");
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.ok(r.structuredContent.templates.some((t) => t.name === "minimal"), JSON.stringify(r.structuredContent));
  // A tool that fails answers isError with the reason, not a failed call.
  const e = await inspector(KEY, "--method", "tools/call", "--tool-name", "get_sandbox", "--tool-arg", "sandbox_id=sbx_doesnotexist");
  assert.equal(e.isError, true);
  assert.match(e.content[0].text, /not found/);
});

test("inspector: a bad API key fails", async () => {
  await assert.rejects(inspector("kiln_abcdefghijkmnpqrstuvwxyz23456789", "--method", "tools/list"),
    (err) => /401|unauthorized|API key/i.test(`${err.stdout}${err.stderr}`));
});
