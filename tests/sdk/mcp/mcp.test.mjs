// kiln's MCP servers, driven by the official MCP TypeScript SDK client as an
// independent client (tests/sdk/run mcp): connect, list the tools, call each
// one and check results and errors, on the workspace endpoint (POST /mcp)
// and the per-sandbox one (POST /v1/sandboxes/{id}/mcp); then the protocol
// edges with raw HTTP: versions, notifications, batches, Origin, bad keys.
// The MCP client configuration of examples/mcp-config.json is the one used.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const URL_ = process.env.KILN_API_URL;
const KEY = process.env.KILN_API_KEY;
const made = new Set();       // sandboxes a test made and has not deleted yet
const everMade = new Set();   // every sandbox made here, deleted or not (its snapshots go at the end)
/** A sandbox made here: deleted at the end if a test has not, its snapshots in any case. */
function track(id) {
  made.add(id);
  everMade.add(id);
}
const vols = new Set();   // volumes a test made and has not deleted yet
const apps = new Set();   // apps likewise

/** The server entries of examples/mcp-config.json, ${VAR} filled from the environment. */
function configServers(sandboxId = "sbx_none") {
  process.env.KILN_SANDBOX_ID = sandboxId;
  const text = readFileSync(join(process.env.KILN_REPO, "examples", "mcp-config.json"), "utf8")
    .replace(/\$\{(\w+)\}/g, (_, v) => {
      assert.ok(process.env[v] !== undefined, `examples/mcp-config.json uses \${${v}}, which is not set`);
      return process.env[v];
    });
  return JSON.parse(text).mcpServers;
}

async function connect(url, key = KEY) {
  const client = new Client({ name: "kiln-mcp-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return client;
}

/** A tool call that must succeed: its structured result. */
async function call(client, name, args = {}) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, false, `${name}: ${JSON.stringify(r.content)}`);
  return r;
}

/** A tool call that must fail as a tool (isError): its text. */
async function toolError(client, name, args) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, true, `${name} should fail: ${JSON.stringify(r)}`);
  return r.content.map((c) => c.text ?? "").join("");
}

/** A request that must fail with a JSON-RPC error of this code. */
async function rpcError(promise, code) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof McpError, `wanted McpError ${code}, got ${e}`);
    assert.equal(e.code, code, String(e));
    return e.message;
  }
  assert.fail(`no JSON-RPC error ${code}`);
}

/** POST raw JSON-RPC to an endpoint. */
async function post(path, body, headers = {}) {
  const r = await fetch(URL_ + path, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${KEY}`, "Content-Type": "application/json",
      Accept: "application/json, text/event-stream", ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, type: r.headers.get("content-type"), json: text ? JSON.parse(text) : null };
}

const init = (version) => ({
  jsonrpc: "2.0", id: 1, method: "initialize",
  params: { protocolVersion: version, capabilities: {}, clientInfo: { name: "raw", version: "1" } },
});

let ws;          // the workspace endpoint's client, from examples/mcp-config.json
let sbx;         // a sandbox made through it
// The tools ws called that succeeded, and that failed (a tool error or a
// JSON-RPC error): the last test checks every tool has both here.
const seen = { ok: new Set(), error: new Set() };

before(async () => {
  const kiln = configServers().kiln;
  assert.equal(kiln.type, "http");
  const client = new Client({ name: "kiln-mcp-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(kiln.url), { requestInit: { headers: kiln.headers } }));
  const callTool = client.callTool.bind(client);
  client.callTool = async (params, resultSchema, options) => {
    try {
      // 180 s rather than the SDK's 60: a snapshot_sandbox in the emulated
      // host under the CI's load timed out at 60 s (session 38).
      const r = await callTool(params, resultSchema, { timeout: 180_000, ...options });
      (r.isError ? seen.error : seen.ok).add(params.name);
      return r;
    } catch (e) {
      if (e instanceof McpError) seen.error.add(params.name);
      throw e;
    }
  };
  // The SDK checks each structuredContent against the tool's outputSchema
  // (made from the response tables of src/api/render_fields.c) once it has
  // listed the tools: list them before any call, so that every success
  // below is checked, whichever tests run.
  await client.listTools();
  ws = client;
});

test("workspace: initialize and list the tools", async () => {
  assert.equal(ws.getServerVersion().name, "kiln");
  assert.ok(ws.getServerCapabilities().tools);
  assert.match(ws.getInstructions(), /sandbox/);
  const { tools } = await ws.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [
    "app_logs", "attach_volume", "backup_database", "copy_file", "create_app", "create_database", "create_sandbox", "create_volume",
    "delete_app", "delete_database", "delete_sandbox",
    "delete_snapshot", "delete_volume", "deploy_app", "detach_volume", "expose_port", "fork_sandbox", "fork_tree",
    "get_app", "get_database", "get_sandbox", "hibernate_sandbox", "list_apps", "list_database_backups", "list_databases", "list_dir",
    "list_ports", "list_processes",
    "list_sandboxes", "list_snapshots", "list_templates", "list_volumes", "move_file", "pause_sandbox", "process_output",
    "promote_sandbox", "read_file", "reset_database_password", "resume_sandbox", "run_code", "set_network", "shell", "signal_process",
    "snapshot_sandbox", "start_process", "unexpose_port", "update_database", "wake_sandbox", "write_file", "write_files",
  ]);
  // The annotations say which tools only read and which destroy.
  const hint = (n) => tools.find((t) => t.name === n).annotations;
  for (const n of ["list_snapshots", "list_ports", "list_processes", "process_output", "list_templates"]) {
    assert.equal(hint(n).readOnlyHint, true, n);
  }
  for (const n of ["delete_snapshot", "unexpose_port", "signal_process", "start_process"]) {
    assert.equal(hint(n).destructiveHint, true, n);
  }
  assert.deepEqual(tools.find((t) => t.name === "expose_port").inputSchema.required, ["sandbox_id", "port"]);
  for (const t of tools) {
    assert.equal(t.inputSchema.type, "object", t.name);
    assert.ok(t.description && t.title && t.outputSchema, t.name);
    // The client checks every result by it (before() listed the tools):
    // a key the server's table lacks fails the call that returns it.
    const check = ws.getToolOutputValidator(t.name);
    assert.equal(typeof check, "function", t.name);
    assert.equal(check({ not_a_key: 1 }).valid, false, t.name);
    assert.equal(t.outputSchema.additionalProperties, false, t.name);
  }
  const shell = tools.find((t) => t.name === "shell");
  assert.deepEqual(shell.inputSchema.required, ["sandbox_id", "command"]);
  // The schemas are made from src/ops' field tables (docs/mcp.md): a tool
  // over PATCH /v1/databases/{id} shows the bounds create_database does.
  const props = (n) => tools.find((t) => t.name === n).inputSchema.properties;
  for (const f of ["backup_interval_seconds", "backups_kept", "idle_seconds", "external_access"]) {
    assert.deepEqual(props("update_database")[f], props("create_database")[f], f);
  }
  assert.deepEqual([props("update_database").backups_kept.minimum, props("update_database").backups_kept.maximum], [1, 100]);
  await ws.ping();
});

test("workspace: create_sandbox, get_sandbox, list_sandboxes", async () => {
  const r = await call(ws, "create_sandbox", { template: "minimal", metadata: { by: "mcp" }, ttl_seconds: 3600 });
  sbx = r.structuredContent.id;
  track(sbx);
  assert.equal(r.structuredContent.status, "running");
  assert.equal(JSON.parse(r.content[0].text).id, sbx, "the text block is the same JSON");
  const g = await call(ws, "get_sandbox", { sandbox_id: sbx });
  assert.deepEqual([g.structuredContent.id, g.structuredContent.metadata.by], [sbx, "mcp"]);
  const l = await call(ws, "list_sandboxes");
  assert.ok(l.structuredContent.sandboxes.some((s) => s.id === sbx));
  assert.match(await toolError(ws, "create_sandbox", { template: "nope-not-built" }), /not built|unknown template/);
  assert.match(await toolError(ws, "get_sandbox", { sandbox_id: "sbx_doesnotexist" }), /not found/);
});

test("workspace: shell", async () => {
  let r = await call(ws, "shell", { sandbox_id: sbx, command: "echo hello; echo oops >&2" });
  assert.deepEqual([r.structuredContent.stdout, r.structuredContent.stderr, r.structuredContent.exit_code], ["hello\n", "oops\n", 0]);
  assert.match(r.content[0].text, /^hello\n[\s\S]*\[stderr\]\noops/);
  r = await call(ws, "shell", { sandbox_id: sbx, command: "exit 3" });
  assert.equal(r.structuredContent.exit_code, 3);
  assert.match(r.content[0].text, /\[exit code 3\]/);
  r = await call(ws, "shell", { sandbox_id: sbx, command: "sleep 30", timeout_ms: 1000 });
  assert.equal(r.structuredContent.timed_out, true);
  assert.match(await toolError(ws, "shell", { sandbox_id: "sbx_doesnotexist", command: "true" }), /not found/);
});

test("workspace: run_code keeps its variables between calls", async () => {
  const b = (await call(ws, "create_sandbox", { template: "base", ttl_seconds: 3600 })).structuredContent.id;
  track(b);
  let r = await call(ws, "run_code", { sandbox_id: b, code: "x = 41\nprint('set')" });
  assert.deepEqual([r.structuredContent.stdout, r.structuredContent.error], ["set\n", null]);
  r = await call(ws, "run_code", { sandbox_id: b, code: "x + 1" });
  assert.equal(r.structuredContent.results[0].text, "42");
  assert.match(r.content[0].text, /\[value\]\n42/);
  r = await call(ws, "run_code", { sandbox_id: b, code: "1/0" });
  assert.equal(r.structuredContent.error.name, "ZeroDivisionError");
  assert.match(r.content[0].text, /\[error\] ZeroDivisionError/);
  assert.match(await toolError(ws, "run_code", { sandbox_id: sbx, code: "1" }), /python3/);
  assert.match(await toolError(ws, "run_code", { sandbox_id: b, code: "1", context: "ctx-nope" }), /no context/);
  // bash keeps its exports and cwd too; a failing command is its error.
  await call(ws, "run_code", { sandbox_id: b, code: "export M=41; cd /tmp", language: "bash" });
  r = await call(ws, "run_code", { sandbox_id: b, code: "echo $((M + 1)) $PWD; false", language: "bash" });
  assert.deepEqual([r.structuredContent.stdout, r.structuredContent.error?.name], ["42 /tmp\n", "NonZeroExit"]);
  await assert.rejects(call(ws, "run_code", { sandbox_id: b, code: "1", language: "cobol" }), /language/);
  // envs: that cell's environment variables only.
  r = await call(ws, "run_code", { sandbox_id: b, code: "echo \"[$ME]\"", language: "bash", envs: { ME: "m" } });
  assert.equal(r.structuredContent.stdout, "[m]\n");
  r = await call(ws, "run_code", { sandbox_id: b, code: "echo \"[$ME]\"", language: "bash" });
  assert.equal(r.structuredContent.stdout, "[]\n");
  assert.match(await toolError(ws, "run_code", { sandbox_id: b, code: "1", envs: { "1BAD": "x" } }),
    /'1BAD' is not a variable name/);
  await call(ws, "delete_sandbox", { sandbox_id: b });
  made.delete(b);
});

test("workspace: write_file, read_file (text and binary), list_dir", async () => {
  let r = await call(ws, "write_file", { sandbox_id: sbx, path: "/work/notes.txt", content: "héllo\n" });
  assert.deepEqual(r.structuredContent, { path: "/work/notes.txt", size: 7 });
  r = await call(ws, "read_file", { sandbox_id: sbx, path: "/work/notes.txt" });
  assert.equal(r.content[0].text, "héllo\n");
  assert.equal(r.structuredContent.encoding, "utf-8");
  const bin = Buffer.from([0, 1, 2, 0xff, 0xfe, 0x80]);
  await call(ws, "write_file", { sandbox_id: sbx, path: "/work/blob.bin", content: bin.toString("base64"), encoding: "base64" });
  r = await call(ws, "read_file", { sandbox_id: sbx, path: "/work/blob.bin" });
  assert.equal(r.content[0].type, "resource");
  assert.equal(r.content[0].resource.blob, bin.toString("base64"));
  assert.deepEqual([r.structuredContent.encoding, r.structuredContent.content, r.structuredContent.size],
    ["base64", bin.toString("base64"), 6]);
  const sh = await call(ws, "shell", { sandbox_id: sbx, command: "od -An -tx1 /work/blob.bin" });
  assert.equal(sh.structuredContent.stdout.trim(), "00 01 02 ff fe 80", "the bytes in the guest");
  r = await call(ws, "list_dir", { sandbox_id: sbx, path: "/work" });
  assert.deepEqual(r.structuredContent.entries.map((e) => e.name).sort(), ["blob.bin", "notes.txt"]);
  assert.match(r.content[0].text, /file\s+7\s+notes.txt/);
  assert.match(await toolError(ws, "read_file", { sandbox_id: sbx, path: "/no/such/file" }), /No such file|not found/i);
  assert.match(await toolError(ws, "list_dir", { sandbox_id: sbx, path: "/no/such/dir" }), /No such|not found/i);
  assert.match(await toolError(ws, "write_file", { sandbox_id: sbx, path: "/x", content: "%%%", encoding: "base64" }), /base64/);
  assert.match(await toolError(ws, "read_file", { sandbox_id: sbx, path: "relative" }), /absolute/);
});

test("workspace: write_files (all or none), copy_file, move_file", async () => {
  const sb = { sandbox_id: sbx };
  let r = await call(ws, "write_files", { ...sb, files: [
    { path: "/tmp/mcpb/a.txt", content: "alpha\n" },
    { path: "/tmp/mcpb/sub/run.sh", content: "#!/bin/sh\necho ran\n", mode: "755" },
    { path: "/tmp/mcpb/b.bin", content_base64: Buffer.from([0, 255]).toString("base64") },
  ] });
  assert.deepEqual(r.structuredContent, { count: 3, files: [
    { path: "/tmp/mcpb/a.txt", size: 6 }, { path: "/tmp/mcpb/sub/run.sh", size: 19 }, { path: "/tmp/mcpb/b.bin", size: 2 }] });
  assert.match(r.content[0].text, /wrote 3 files/);
  let sh = await call(ws, "shell", { ...sb, command: "/tmp/mcpb/sub/run.sh && cat /tmp/mcpb/a.txt && od -An -tx1 /tmp/mcpb/b.bin" });
  assert.equal(sh.structuredContent.stdout, "ran\nalpha\n 00 ff\n");
  assert.match(await toolError(ws, "write_files", { ...sb, files: [
    { path: "/tmp/mcpb/new.txt", content: "x" }, { path: "/tmp/mcpb/sub", content: "x" }] }), /directory.*no file was changed/);
  sh = await call(ws, "shell", { ...sb, command: "test -e /tmp/mcpb/new.txt && echo there || echo absent" });
  assert.equal(sh.structuredContent.stdout, "absent\n", "all or none");
  assert.match(await toolError(ws, "write_files", { ...sb, files: [{ path: "/tmp/x", content: "a", content_base64: "YQ==" }] }), /one of/);
  assert.match(await toolError(ws, "write_files", { ...sb, files: [{ path: "/tmp/x", content: "a", mode: "999" }] }), /mode/);
  r = await call(ws, "copy_file", { ...sb, from: "/tmp/mcpb/sub", to: "/tmp/mcpb/sub2", recursive: true });
  assert.deepEqual(r.structuredContent, { from: "/tmp/mcpb/sub", to: "/tmp/mcpb/sub2" });
  assert.match(await toolError(ws, "copy_file", { ...sb, from: "/tmp/mcpb/a.txt", to: "/tmp/mcpb/b.bin" }), /exist/i);
  await call(ws, "copy_file", { ...sb, from: "/tmp/mcpb/a.txt", to: "/tmp/mcpb/b.bin", replace: true });
  r = await call(ws, "move_file", { ...sb, from: "/tmp/mcpb/a.txt", to: "/tmp/mcpb/moved.txt" });
  assert.deepEqual(r.structuredContent, { from: "/tmp/mcpb/a.txt", to: "/tmp/mcpb/moved.txt" });
  sh = await call(ws, "shell", { ...sb, command: "cd /tmp/mcpb && ls -A | tr '\\n' ' ' && ls sub2 && cat b.bin moved.txt && test -x sub2/run.sh && echo x" });
  assert.equal(sh.structuredContent.stdout, "b.bin moved.txt sub sub2 run.sh\nalpha\nalpha\nx\n");
  assert.match(await toolError(ws, "move_file", { ...sb, from: "/tmp/mcpb/nope", to: "/tmp/mcpb/n2" }), /No such|not found/i);
  assert.match(await toolError(ws, "copy_file", { ...sb, from: "relative", to: "/tmp/x" }), /absolute/);
});

test("workspace: fork_sandbox", async () => {
  const f = await call(ws, "fork_sandbox", { sandbox_id: sbx, count: 2 });
  const [kid, other] = f.structuredContent.sandboxes.map((s) => s.id);
  track(kid);
  track(other);
  assert.equal(f.structuredContent.sandboxes[0].parent_id, sbx);
  const r = await call(ws, "read_file", { sandbox_id: kid, path: "/work/notes.txt" });
  assert.equal(r.content[0].text, "héllo\n", "the child has the parent's files");
  const p = await call(ws, "promote_sandbox", { sandbox_id: kid });
  assert.deepEqual([p.structuredContent.kept, p.structuredContent.parent, p.structuredContent.deleted, p.structuredContent.failed],
    [kid, sbx, [other], []], "promote: the sibling goes");
  made.delete(other);
  await call(ws, "delete_sandbox", { sandbox_id: kid });
  made.delete(kid);
  assert.match(await toolError(ws, "promote_sandbox", { sandbox_id: sbx }), /not forked/);
  assert.match(await toolError(ws, "fork_sandbox", { sandbox_id: "sbx_doesnotexist" }), /not found/);
});

test("workspace: hibernate and wake", async () => {
  const h = await call(ws, "hibernate_sandbox", { sandbox_id: sbx });
  assert.equal(h.structuredContent.status, "hibernated");
  assert.match(await toolError(ws, "hibernate_sandbox", { sandbox_id: sbx }), /hibernat/);
  const w = await call(ws, "wake_sandbox", { sandbox_id: sbx });
  assert.equal(w.structuredContent.status, "running");
  await call(ws, "hibernate_sandbox", { sandbox_id: sbx });
  const s = await call(ws, "shell", { sandbox_id: sbx, command: "cat /work/notes.txt" });
  assert.equal(s.structuredContent.stdout, "héllo\n", "a tool call wakes it, files intact");
  assert.match(await toolError(ws, "wake_sandbox", { sandbox_id: "sbx_doesnotexist" }), /not found/);
});

test("workspace: pause and resume", async () => {
  const p = await call(ws, "pause_sandbox", { sandbox_id: sbx });
  assert.equal(p.structuredContent.status, "paused");
  const r = await call(ws, "resume_sandbox", { sandbox_id: sbx });
  assert.equal(r.structuredContent.status, "running");
  await call(ws, "pause_sandbox", { sandbox_id: sbx });
  const s = await call(ws, "shell", { sandbox_id: sbx, command: "cat /work/notes.txt" });
  assert.equal(s.structuredContent.stdout, "héllo\n", "a tool call resumes it");
  assert.match(await toolError(ws, "pause_sandbox", { sandbox_id: "sbx_doesnotexist" }), /not found/);
  assert.match(await toolError(ws, "resume_sandbox", { sandbox_id: "sbx_doesnotexist" }), /not found/);
});

test("workspace: list_templates", async () => {
  const r = await call(ws, "list_templates");
  const names = r.structuredContent.templates.map((t) => t.name);
  assert.ok(names.includes("minimal") && names.includes("base"), `templates: ${names}`);
  assert.equal(r.structuredContent.templates.find((t) => t.name === "minimal").status, "ready");
  assert.match(await rpcError(ws.callTool({ name: "list_templates", arguments: { name: "x" } }), -32602), /unknown argument 'name'/);
});

test("workspace: fork_tree", async () => {
  const f = await call(ws, "fork_tree", { sandbox_id: sbx, count: 2 });
  const kids = f.structuredContent.sandboxes.map((s) => s.id);
  kids.forEach(track);
  assert.equal(kids.length, 2);
  assert.ok(f.structuredContent.sandboxes.every((s) => s.parent_id === sbx && s.status === "running"));
  for (const k of kids) {
    const r = await call(ws, "read_file", { sandbox_id: k, path: "/work/notes.txt" });
    assert.equal(r.content[0].text, "héllo\n", "each child has the parent's files");
    await call(ws, "delete_sandbox", { sandbox_id: k });
    made.delete(k);
  }
  assert.match(await toolError(ws, "fork_tree", { sandbox_id: "sbx_doesnotexist", count: 2 }), /not found/);
  assert.match(await rpcError(ws.callTool({ name: "fork_tree", arguments: { sandbox_id: sbx, count: 65 } }), -32602), /count/);
});

test("workspace: snapshot_sandbox, list_snapshots, delete_snapshot", async () => {
  const s = (await call(ws, "snapshot_sandbox", { sandbox_id: sbx })).structuredContent;
  assert.match(s.id, /^snap_/);
  assert.deepEqual([s.sandbox_id, s.template], [sbx, "minimal"]);
  const listed = async () => (await call(ws, "list_snapshots")).structuredContent.snapshots.map((x) => x.id);
  assert.ok((await listed()).includes(s.id));
  // create_sandbox takes it (from_snapshot): the files come with it.
  const c = (await call(ws, "create_sandbox", { from_snapshot: s.id, ttl_seconds: 600 })).structuredContent;
  track(c.id);
  assert.equal(c.from_snapshot, s.id);
  assert.equal((await call(ws, "read_file", { sandbox_id: c.id, path: "/work/notes.txt" })).content[0].text, "héllo\n");
  await call(ws, "delete_sandbox", { sandbox_id: c.id });
  made.delete(c.id);
  assert.deepEqual((await call(ws, "delete_snapshot", { snapshot_id: s.id })).structuredContent, { snapshot_id: s.id, deleted: true });
  assert.ok(!(await listed()).includes(s.id));
  assert.match(await toolError(ws, "delete_snapshot", { snapshot_id: s.id }), /not found/);
  assert.match(await toolError(ws, "delete_snapshot", { snapshot_id: "nope" }), /snapshot nope not found/);
  assert.match(await toolError(ws, "snapshot_sandbox", { sandbox_id: "sbx_doesnotexist" }), /not found/);
  assert.match(await rpcError(ws.callTool({ name: "list_snapshots", arguments: { all: true } }), -32602), /unknown argument/);
});

test("workspace: set_network", async () => {
  let r = await call(ws, "set_network", { sandbox_id: sbx, allow_internet: false });
  assert.deepEqual([r.structuredContent.id, r.structuredContent.status], [sbx, "running"]);
  r = await call(ws, "set_network", { sandbox_id: sbx, allow_out: ["10.0.0.0/8"], deny_out: ["10.1.2.3"] });
  assert.equal(r.structuredContent.id, sbx);
  r = await call(ws, "set_network", { sandbox_id: sbx });   // the open policy again
  assert.equal(r.structuredContent.id, sbx);
  assert.match(await toolError(ws, "set_network", { sandbox_id: sbx, allow_out: ["not-an-address"] }), /allow_out/);
  assert.match(await toolError(ws, "set_network", { sandbox_id: "sbx_doesnotexist", allow_internet: false }), /not found/);
  assert.match(await rpcError(ws.callTool({ name: "set_network", arguments: { sandbox_id: sbx, allow_internet: "no" } }), -32602),
    /allow_internet.*boolean/);
});

test("workspace: expose_port, list_ports, unexpose_port", async () => {
  let r = await call(ws, "expose_port", { sandbox_id: sbx, port: 8080 });
  assert.deepEqual([r.structuredContent.port, r.structuredContent.public], [8080, false]);
  assert.ok(r.structuredContent.url.includes(`${sbx}/proxy/8080`) || r.structuredContent.url.includes("8080"), r.structuredContent.url);
  r = await call(ws, "expose_port", { sandbox_id: sbx, port: 8080, public: true });
  assert.equal(r.structuredContent.public, true, "exposing again changes public");
  await call(ws, "expose_port", { sandbox_id: sbx, port: 9000 });
  const l = await call(ws, "list_ports", { sandbox_id: sbx });
  assert.deepEqual(l.structuredContent.ports.map((p) => [p.port, p.public]), [[8080, true], [9000, false]]);
  assert.deepEqual((await call(ws, "unexpose_port", { sandbox_id: sbx, port: 8080 })).structuredContent,
    { sandbox_id: sbx, port: 8080, unexposed: true });
  await call(ws, "unexpose_port", { sandbox_id: sbx, port: 9000 });
  assert.deepEqual((await call(ws, "list_ports", { sandbox_id: sbx })).structuredContent.ports, []);
  assert.match(await toolError(ws, "unexpose_port", { sandbox_id: sbx, port: 8080 }), /not exposed/);
  assert.match(await toolError(ws, "expose_port", { sandbox_id: "sbx_doesnotexist", port: 80 }), /not found/);
  assert.match(await toolError(ws, "list_ports", { sandbox_id: "sbx_doesnotexist" }), /not found/);
  assert.match(await rpcError(ws.callTool({ name: "expose_port", arguments: { sandbox_id: sbx, port: 70000 } }), -32602), /port/);
});

test("workspace: start_process, list_processes, process_output, signal_process", async () => {
  const p = (await call(ws, "start_process", { sandbox_id: sbx, cmd: "echo started; sleep 300" })).structuredContent;
  assert.equal(p.status, "running");
  assert.ok(p.id > 0 && p.pid > 0, JSON.stringify(p));
  const l = (await call(ws, "list_processes", { sandbox_id: sbx })).structuredContent.processes;
  assert.equal(l.find((x) => x.id === p.id)?.status, "running", JSON.stringify(l));
  let o = (await call(ws, "process_output", { sandbox_id: sbx, process_id: p.id, wait_seconds: 1 })).structuredContent;
  assert.deepEqual([o.status, o.stdout], ["running", "started\n"]);
  const s = (await call(ws, "signal_process", { sandbox_id: sbx, process_id: p.id, signal: "TERM" })).structuredContent;
  assert.deepEqual(s, { sandbox_id: sbx, process_id: p.id, signal: 15, sent: true });
  o = (await call(ws, "process_output", { sandbox_id: sbx, process_id: p.id, wait_seconds: 30 })).structuredContent;
  assert.equal(o.status, "exited");

  // argv, env and cwd, as POST .../processes takes them.
  const q = (await call(ws, "start_process", { sandbox_id: sbx, argv: ["sh", "-c", "echo $WHO in $(pwd)"],
    env: { WHO: "mcp" }, cwd: "/work" })).structuredContent;
  o = (await call(ws, "process_output", { sandbox_id: sbx, process_id: q.id, wait_seconds: 30 })).structuredContent;
  assert.deepEqual([o.status, o.stdout, o.exit_code], ["exited", "mcp in /work\n", 0]);

  assert.match(await toolError(ws, "start_process", { sandbox_id: sbx, cmd: "true", argv: ["true"] }), /exactly one of 'cmd'/);
  assert.match(await toolError(ws, "start_process", { sandbox_id: "sbx_doesnotexist", cmd: "true" }), /not found/);
  assert.match(await toolError(ws, "signal_process", { sandbox_id: sbx, process_id: p.id, signal: "NOPE" }), /unknown signal 'NOPE'/);
  await toolError(ws, "signal_process", { sandbox_id: sbx, process_id: 999999, signal: "KILL" });
  await toolError(ws, "process_output", { sandbox_id: sbx, process_id: 999999 });
  assert.match(await toolError(ws, "list_processes", { sandbox_id: "sbx_doesnotexist" }), /not found/);
  assert.match(await rpcError(ws.callTool({ name: "process_output", arguments: { sandbox_id: sbx, process_id: 0 } }), -32602), /process_id/);
});

test("workspace: a server started with start_process, reached at expose_port's URL", async () => {
  const b = (await call(ws, "create_sandbox", { template: "base", ttl_seconds: 600 })).structuredContent.id;
  track(b);
  await call(ws, "write_file", { sandbox_id: b, path: "/srv/mcp/hi.txt", content: "served\n" });
  const p = (await call(ws, "start_process", { sandbox_id: b,
    argv: ["python3", "-m", "http.server", "8090", "--bind", "127.0.0.1", "--directory", "/srv/mcp"] })).structuredContent;
  const { url } = (await call(ws, "expose_port", { sandbox_id: b, port: 8090 })).structuredContent;
  assert.ok(url.endsWith(`/v1/sandboxes/${b}/proxy/8090/`), url);
  let status, body;
  for (let i = 0; i < 120; i++) {   // 502 until the server listens
    const r = await fetch(url + "hi.txt", { headers: { Authorization: `Bearer ${KEY}` } });
    [status, body] = [r.status, await r.text()];
    if (status !== 502) break;
    await new Promise((res) => setTimeout(res, 500));
  }
  assert.deepEqual([status, body], [200, "served\n"]);
  assert.equal((await fetch(url + "hi.txt")).status, 401, "private: the key is needed");
  await call(ws, "signal_process", { sandbox_id: b, process_id: p.id, signal: "KILL" });
  await call(ws, "delete_sandbox", { sandbox_id: b });
  made.delete(b);
});

test("workspace: create_volume, list_volumes, attach_volume, detach_volume, delete_volume", async () => {
  const name = `mcp-vol-${process.pid}`;
  const listed = async () => (await call(ws, "list_volumes")).structuredContent.volumes;
  const v = (await call(ws, "create_volume", { name, size_mib: 16 })).structuredContent;
  vols.add(v.id);
  assert.match(v.id, /^vol_/);
  assert.equal(v.name, name);
  assert.equal(v.size_mib, 16);
  assert.deepEqual(v.attached_to, []);
  assert.match(v.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.deepEqual((await listed()).filter((x) => x.id === v.id).map((x) => x.name), [name]);

  // A bad name, a name taken, a size out of the schema's range.
  assert.match(await toolError(ws, "create_volume", { name: "Bad_Name", size_mib: 1 }), /'name' must be .*a-z, 0-9 and '-'/);
  assert.match(await toolError(ws, "create_volume", { name, size_mib: 1 }), new RegExp(`named '${name}' exists \\(${v.id}\\)`));
  assert.match(await rpcError(ws.callTool({ name: "create_volume", arguments: { name: "x", size_mib: 0 } }), -32602), /size_mib/);

  // Attached to a sandbox: listed so, and not deleted, by id or by name; the error names the sandbox.
  const s = (await call(ws, "create_sandbox", { template: "minimal", ttl_seconds: 600,
    volumes: [{ name, path: "/data" }] })).structuredContent;
  track(s.id);
  const sh = await call(ws, "shell", { sandbox_id: s.id, command: "grep ' /data ' /proc/mounts | cut -d' ' -f2,3" });
  assert.equal(sh.structuredContent.stdout, "/data ext4\n");
  assert.deepEqual((await listed()).find((x) => x.id === v.id).attached_to.map((a) => [a.sandbox_id, a.path, a.read_only]),
    [[s.id, "/data", false]]);
  assert.match(await toolError(ws, "delete_volume", { volume_id: v.id }), new RegExp(`attached to sandbox ${s.id}`));
  assert.match(await toolError(ws, "delete_volume", { name }), new RegExp(`attached to sandbox ${s.id}`));

  // Detached and attached again while the sandbox runs; twice is refused.
  assert.deepEqual((await call(ws, "detach_volume", { sandbox_id: s.id, volume: name })).structuredContent,
    { sandbox_id: s.id, volume: name, detached: true });
  assert.deepEqual((await listed()).find((x) => x.id === v.id).attached_to, []);
  assert.match(await toolError(ws, "detach_volume", { sandbox_id: s.id, volume: name }), /not attached/);
  const a = (await call(ws, "attach_volume", { sandbox_id: s.id, name, path: "/again", read_only: true })).structuredContent;
  assert.deepEqual(a.attached_to.map((x) => [x.sandbox_id, x.path, x.read_only]), [[s.id, "/again", true]]);
  const sh2 = await call(ws, "shell", { sandbox_id: s.id, command: "grep ' /again ' /proc/mounts | cut -d' ' -f2,3,4 | cut -d, -f1" });
  assert.equal(sh2.structuredContent.stdout, "/again ext4 ro\n");
  assert.match(await toolError(ws, "attach_volume", { sandbox_id: s.id, name, path: "/third" }), /attached to sandbox .* already/);
  assert.match(await toolError(ws, "attach_volume", { sandbox_id: "sbx_nope", name, path: "/x" }), /not found/);
  await call(ws, "delete_sandbox", { sandbox_id: s.id });
  made.delete(s.id);

  // Deleted by name once free; by id (a second volume); then gone.
  const d = await call(ws, "delete_volume", { name });
  assert.deepEqual(d.structuredContent, { volume_id: v.id, deleted: true });
  vols.delete(v.id);
  const w = (await call(ws, "create_volume", { name: `${name}-b`, size_mib: 1 })).structuredContent;
  vols.add(w.id);
  assert.deepEqual((await call(ws, "delete_volume", { volume_id: w.id })).structuredContent, { volume_id: w.id, deleted: true });
  vols.delete(w.id);
  const left = (await listed()).map((x) => x.id);
  assert.ok(!left.includes(v.id) && !left.includes(w.id), `both gone: ${left}`);
  assert.match(await toolError(ws, "delete_volume", { volume_id: v.id }), /not found/);
  assert.match(await toolError(ws, "delete_volume", { name }), new RegExp(`volume ${name} not found`));
  assert.match(await toolError(ws, "delete_volume", {}), /volume_id \(vol_\.\.\.\) or its name, not both/);
  assert.match(await toolError(ws, "delete_volume", { volume_id: w.id, name }), /not both/);
});

test("workspace: unknown tools and bad arguments are JSON-RPC errors", async () => {
  assert.match(await rpcError(ws.callTool({ name: "no_such_tool", arguments: {} }), -32602), /unknown tool/);
  assert.match(await rpcError(ws.callTool({ name: "shell", arguments: { sandbox_id: sbx, command: 5 } }), -32602), /command.*string/);
  assert.match(await rpcError(ws.callTool({ name: "shell", arguments: { sandbox_id: sbx } }), -32602), /'command' is required/);
  assert.match(await rpcError(ws.callTool({ name: "shell", arguments: { sandbox_id: sbx, command: "x", cmd: "y" } }), -32602), /unknown argument 'cmd'/);
  assert.match(await rpcError(ws.callTool({ name: "fork_sandbox", arguments: { sandbox_id: sbx, count: 0 } }), -32602), /count/);
  assert.match(await rpcError(ws.callTool({ name: "write_file", arguments: { sandbox_id: sbx, path: "/x", content: "y", encoding: "rot13" } }), -32602), /encoding/);
  for (const name of ["list_sandboxes", "list_volumes", "list_apps", "list_databases"]) {
    assert.match(await rpcError(ws.callTool({ name, arguments: { bogus: 1 } }), -32602), /unknown argument 'bogus'/, name);
  }
  assert.match(await rpcError(ws.request({ method: "resources/list", params: {} },
    (await import("@modelcontextprotocol/sdk/types.js")).ListResourcesResultSchema), -32601), /not found/);
});

test("per sandbox: the sandbox tools on one sandbox", async () => {
  const conf = configServers(sbx)["kiln-sandbox"];
  assert.equal(conf.url, `${URL_}/v1/sandboxes/${sbx}/mcp`);
  const c = new Client({ name: "kiln-mcp-test", version: "1.0.0" });
  await c.connect(new StreamableHTTPClientTransport(new URL(conf.url), { requestInit: { headers: conf.headers } }));
  try {
    assert.equal(c.getServerVersion().name, "kiln-sandbox");
    const { tools } = await c.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ["copy_file", "list_dir", "move_file", "read_file", "run_code", "shell", "write_file", "write_files"]);
    assert.deepEqual(tools.find((t) => t.name === "shell").inputSchema.required, ["command"]);
    const r = await call(c, "shell", { command: "echo $((6*7)) > /work/answer; cat /work/answer" });
    assert.equal(r.structuredContent.stdout, "42\n");
    await call(c, "write_file", { path: "/work/from-sandbox-endpoint", content: "yes" });
    assert.equal((await call(c, "read_file", { path: "/work/from-sandbox-endpoint" })).content[0].text, "yes");
    const l = await call(c, "list_dir", { path: "/work" });
    assert.ok(l.structuredContent.entries.some((e) => e.name === "answer"));
    await rpcError(c.callTool({ name: "create_sandbox", arguments: {} }), -32602);
    await rpcError(c.callTool({ name: "shell", arguments: { sandbox_id: sbx, command: "true" } }), -32602);
    await c.ping();
  } finally {
    await c.close();
  }
  await assert.rejects(connect(`${URL_}/v1/sandboxes/sbx_doesnotexist/mcp`), /404|not found/);
});

test("a bad API key is 401 on both endpoints", async () => {
  const bad = "kiln_abcdefghijkmnpqrstuvwxyz23456789";
  await assert.rejects(connect(`${URL_}/mcp`, bad), /401|unauthorized|API key/i);
  await assert.rejects(connect(`${URL_}/v1/sandboxes/${sbx}/mcp`, bad), /401|unauthorized|API key/i);
  const r = await fetch(`${URL_}/mcp`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(init("2025-06-18")) });
  assert.equal(r.status, 401);
  assert.equal((await r.json()).error.code, "unauthorized");
});

test("raw: protocol versions, notifications, ping, batches, parse errors", async () => {
  for (const v of ["2025-06-18", "2025-03-26", "2024-11-05"]) {
    const r = await post("/mcp", init(v));
    assert.deepEqual([r.status, r.json.result.protocolVersion], [200, v], `version ${v}`);
    assert.match(r.type, /application\/json/);
  }
  let r = await post("/mcp", init("2099-01-01"));
  assert.equal(r.json.result.protocolVersion, "2025-06-18", "an unknown version gets our newest");
  r = await post("/mcp", { jsonrpc: "2.0", method: "notifications/initialized" });
  assert.deepEqual([r.status, r.json], [202, null]);
  r = await post("/mcp", { jsonrpc: "2.0", id: "p", method: "ping" }, { "MCP-Protocol-Version": "2025-06-18" });
  assert.deepEqual(r.json, { jsonrpc: "2.0", id: "p", result: {} });
  r = await post("/mcp", { jsonrpc: "2.0", id: 1, method: "ping" }, { "MCP-Protocol-Version": "1999-01-01" });
  assert.equal(r.status, 400);
  assert.equal(r.json.error.code, -32600);
  // 2024-11-05 clients get no fields their version does not define.
  r = await post("/mcp", { jsonrpc: "2.0", id: 2, method: "tools/list" }, { "MCP-Protocol-Version": "2024-11-05" });
  assert.ok(r.json.result.tools.every((t) => !("outputSchema" in t) && !("title" in t) && !("annotations" in t)));
  r = await post("/mcp", { jsonrpc: "2.0", id: 2, method: "tools/list" }, { "MCP-Protocol-Version": "2025-03-26" });
  assert.ok(r.json.result.tools.every((t) => "annotations" in t && !("outputSchema" in t)));
  r = await post("/mcp", [{ jsonrpc: "2.0", id: 1, method: "ping" }, { jsonrpc: "2.0", method: "notifications/x" },
    { jsonrpc: "2.0", id: 2, method: "nope" }]);
  assert.deepEqual(r.json.map((m) => m.result ? "ok" : m.error.code), ["ok", -32601]);
  r = await post("/mcp", "{not json");
  assert.deepEqual([r.status, r.json.error.code, r.json.id], [400, -32700, null]);
  r = await post("/mcp", { jsonrpc: "1.0", id: 1, method: "ping" });
  assert.equal(r.json.error.code, -32600);
  const g = await fetch(`${URL_}/mcp`, { headers: { Authorization: `Bearer ${KEY}`, Accept: "text/event-stream" } });
  assert.equal(g.status, 405, "no server-initiated stream");
  await g.body?.cancel();
});

test("raw: Origin is validated", async () => {
  let r = await post("/mcp", init("2025-06-18"), { Origin: "http://evil.example" });
  assert.deepEqual([r.status, r.json.error.code], [403, "forbidden"]);
  r = await post(`/v1/sandboxes/${sbx}/mcp`, init("2025-06-18"), { Origin: "http://evil.example" });
  assert.equal(r.status, 403);
  r = await post("/mcp", init("2025-06-18"), { Origin: "http://localhost:8080" });
  assert.equal(r.status, 200, "a loopback origin");
  r = await post("/mcp", init("2025-06-18"), { Origin: process.env.KILN_TEST_ORIGIN_ALLOWED });
  assert.equal(r.status, 200, "an origin of kilnd --mcp-origins");
  r = await post("/mcp", init("2025-06-18"), { Origin: "http://localhost.evil.example" });
  assert.equal(r.status, 403, "a name that starts like localhost");
});

/**
 * GET an app's URL. Its host name (app-ID.DOMAIN) resolves nowhere on this
 * machine: the request goes to kilnd's address with the URL's Host, as a
 * DNS name pointing at kilnd would send it. Resolves to [status, body].
 */
function getApp(url) {
  const api = new URL(URL_), u = new URL(url);
  const tls = api.protocol === "https:";
  return new Promise((resolve, reject) => {
    const req = (tls ? httpsRequest : httpRequest)({
      host: api.hostname, port: api.port, path: u.pathname, method: "GET", headers: { Host: u.host },
      ...(tls ? { servername: "localhost" } : {}),   // the test CA's certificate names localhost and 127.0.0.1
    }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => { body += d; });
      res.on("end", () => resolve([res.statusCode, body]));
    });
    req.on("error", reject);
    req.end();
  });
}

test("workspace: create_app, get_app, list_apps, app_logs, deploy_app, delete_app", async () => {
  const name = `mcp-app-${process.pid}`;
  const serve = (text) => `mkdir -p /srv/w && echo ${text} > /srv/w/index.html && echo serving ${text} && ` +
    "exec httpd -f -p 8000 -h /srv/w";  // minimal's busybox: a smaller VM to create, and again on a deploy
  // The arguments are checked before anything is made: by the schema (-32602), then by src/ops/.
  assert.match(await rpcError(ws.callTool({ name: "create_app", arguments: { name, port: 8000, restart: "sometimes" } }), -32602), /restart/);
  assert.match(await rpcError(ws.callTool({ name: "create_app", arguments: { name, port: 70000, command: "x" } }), -32602), /port/);
  assert.match(await toolError(ws, "create_app", { name: "Bad_Name", port: 8000, command: "true" }), /field 'name' of an app/);
  assert.match(await toolError(ws, "create_app", { name, port: 8000, command: "true", template: "base", from_snapshot: "snap_x" }), /one of 'template'/);

  const a = (await call(ws, "create_app", { name, port: 8000, template: "minimal", command: serve("v1"), env: { WHO: "mcp" }, restart: "always" })).structuredContent;
  apps.add(a.id);
  assert.match(a.id, /^app_/);
  assert.deepEqual([a.name, a.port, a.version, a.restart, a.template, a.env.WHO, a.status], [name, 8000, 1, "always", "minimal", "mcp", "running"]);
  assert.match(a.url, new RegExp(`^http://app-${a.id.slice(4)}\\.sdk\\.test:${new URL(URL_).port}/$`), "its own origin, under --domain");
  assert.match(a.sandbox_id, /^sbx_/);
  assert.ok(a.created_at && a.updated_at && !("created_ms" in a), "times as the REST API gives them");
  assert.deepEqual(await getApp(a.url), [200, "v1\n"], "served at its URL, no key");

  const byName = (await call(ws, "get_app", { app: name })).structuredContent;
  const byId = (await call(ws, "get_app", { app: a.id })).structuredContent;
  assert.deepEqual([byName.id, byId.name, byId.url], [a.id, name, a.url]);
  assert.ok((await call(ws, "list_apps")).structuredContent.apps.some((x) => x.id === a.id && x.url === a.url));
  assert.match(await toolError(ws, "create_app", { name, port: 8000, command: "true" }), /exists/);

  const logs = await call(ws, "app_logs", { app: name, tail: 10 });
  assert.ok(logs.structuredContent.events.some((e) => /version 1 deployed/.test(e.text) && e.at), JSON.stringify(logs.structuredContent));
  assert.ok(logs.structuredContent.lines.includes("serving v1"), JSON.stringify(logs.structuredContent.lines));
  assert.match(logs.content[0].text, /version 1 deployed[\s\S]*\[log\][\s\S]*serving v1/);

  // A new version: the URL is the same, what it serves is v2; the fields not given are kept.
  const d = (await call(ws, "deploy_app", { app: a.id, command: serve("v2") })).structuredContent;
  assert.deepEqual([d.id, d.version, d.url, d.restart, d.env.WHO], [a.id, 2, a.url, "always", "mcp"]);
  assert.notEqual(d.sandbox_id, a.sandbox_id);
  assert.deepEqual(await getApp(a.url), [200, "v2\n"]);
  assert.match(await rpcError(ws.callTool({ name: "deploy_app", arguments: { app: name, name: "other" } }), -32602), /name/);
  assert.match(await toolError(ws, "deploy_app", { app: "no-such-app", port: 8001 }), /not found/);
  assert.match(await toolError(ws, "app_logs", { app: "no-such-app" }), /not found/);

  const del = (await call(ws, "delete_app", { app: name })).structuredContent;
  assert.deepEqual(del, { id: a.id, name, deleted: true });
  apps.delete(a.id);
  assert.match(await toolError(ws, "get_app", { app: a.id }), /not found/);
  assert.match(await toolError(ws, "delete_app", { app: name }), /not found/);
  assert.ok(!(await call(ws, "list_apps")).structuredContent.apps.some((x) => x.id === a.id));
  assert.equal((await getApp(a.url))[0], 404, "its URL answers nothing once deleted");
});

test("workspace: database tools' errors (docs/databases.md; the databases themselves: tests/e2e/90)", async () => {
  assert.match(await toolError(ws, "create_database", { name: "Bad_Name" }), /field 'name' of a database/);
  assert.match(await toolError(ws, "create_database", { from_backup: "snap_nothere" }), /backup snap_nothere not found/);
  assert.match(await toolError(ws, "get_database", { database: "db_nothere" }), /database db_nothere not found/);
  assert.match(await toolError(ws, "delete_database", { database: "nothere" }), /database nothere not found/);
  assert.match(await toolError(ws, "reset_database_password", { database: "nothere" }), /database nothere not found/);
  assert.match(await toolError(ws, "backup_database", { database: "db_nothere" }), /database db_nothere not found/);
  assert.match(await toolError(ws, "list_database_backups", { database: "nothere" }), /database nothere not found/);
  await rpcError(ws.callTool({ name: "backup_database", arguments: {} }), -32602);
  await rpcError(ws.callTool({ name: "create_database", arguments: { colour: "red" } }), -32602);
  assert.match(await toolError(ws, "update_database", { database: "nothere", idle_seconds: 60 }), /database nothere not found/);
  // A bound of the table: the schema's check (-32602) and REST's PATCH say the same range.
  assert.match(await rpcError(ws.callTool({ name: "update_database", arguments: { database: "nothere", backups_kept: 101 } }), -32602),
    /'backups_kept' must be from 1 to 100/);
  const rest = await fetch(`${URL_}/v1/databases/nothere`, {
    method: "PATCH", headers: { Authorization: `Bearer ${KEY}`, "Content-Type": "application/json" }, body: JSON.stringify({ backups_kept: 101 }),
  });
  assert.equal(rest.status, 400);
  assert.match((await rest.json()).error.message, /field 'backups_kept' must be from 1 to 100/);
  assert.deepEqual((await call(ws, "list_databases")).structuredContent, { databases: [] });
});

test("workspace: delete_sandbox", async () => {
  await call(ws, "delete_sandbox", { sandbox_id: sbx });
  made.delete(sbx);
  assert.match(await toolError(ws, "delete_sandbox", { sandbox_id: sbx }), /not found/);
  const l = await call(ws, "list_sandboxes");
  assert.ok(!l.structuredContent.sandboxes.some((s) => s.id === sbx));
});

test("workspace: every tool listed has a success and an error path in this file", async () => {
  const { tools } = await ws.listTools();
  // A database takes a minute of an emulated host: the database tools'
  // successes are tests/e2e/90's (db_mcp_get_list, db_mcp_backups,
  // db_delete_*, db_mcp_update; db_mcp_create, full tier).
  const elsewhere = new Set(["create_database", "get_database", "delete_database", "reset_database_password",
    "backup_database", "list_database_backups", "update_database"]);
  const e2e = readFileSync(join(process.env.KILN_REPO, "tests", "e2e", "90-kilnd-databases.sh"), "utf8");
  const notThere = [...elsewhere].filter((n) => !new RegExp(`^\\s*mcp ${n} `, "m").test(e2e));
  assert.deepEqual(notThere, [], "tools this file leaves to tests/e2e/90, which never calls them");
  const names = tools.map((t) => t.name);
  const noOk = names.filter((n) => !seen.ok.has(n) && !elsewhere.has(n));
  const noError = names.filter((n) => !seen.error.has(n));
  assert.deepEqual({ noOk, noError }, { noOk: [], noError: [] }, "tools whose success or error path this file never took");
});

/** DELETE path until it is gone (204 or 404), 120 s at most: a sandbox
 * whose snapshot a timed-out call left running is busy until that ends,
 * and one left behind failed the next group, the examples, whose
 * workspace must start empty (session 38's CI). */
async function deleteUntilGone(path) {
  for (let i = 0; i < 60; i++) {
    const r = await fetch(URL_ + path, { method: "DELETE", headers: { Authorization: `Bearer ${KEY}` } });
    if (r.status === 204 || r.status === 404) return;
    await new Promise((ok) => setTimeout(ok, 2000));
  }
}

after(async () => {
  await ws?.close();
  // Whatever a failed test left behind: its sandboxes, and the snapshots
  // of every sandbox this file made (a snapshot_sandbox that timed out
  // here may still have made one).
  const r = await fetch(`${URL_}/v1/snapshots`, { headers: { Authorization: `Bearer ${KEY}` } });
  const snaps = r.ok ? (await r.json()).snapshots ?? [] : [];
  for (const id of made) await deleteUntilGone(`/v1/sandboxes/${id}`);
  for (const snap of snaps) {
    if (everMade.has(snap.sandbox_id)) await deleteUntilGone(`/v1/snapshots/${snap.id}`);
  }
  for (const id of apps) {
    await fetch(`${URL_}/v1/apps/${id}`, { method: "DELETE", headers: { Authorization: `Bearer ${KEY}` } });
  }
  for (const id of vols) {
    await fetch(`${URL_}/v1/volumes/${id}`, { method: "DELETE", headers: { Authorization: `Bearer ${KEY}` } });
  }
});
