// The MCP side of every framework guide (docs/guides/*.md) that connects
// through kiln's workspace MCP server: each guide's configuration block is
// read as written, its URL and headers evaluated by Python exactly as the
// reader's program would (the guide's own expressions, with this run's
// KILN_API_URL and KILN_API_KEY), the framework's transport checked to be
// Streamable HTTP, and then the official MCP client connects with exactly
// that URL and those headers, lists the tools and calls one. The frameworks
// themselves are Python packages that cannot be installed here (no PyPI);
// this is the part of each configuration that kiln answers for.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const GUIDES = join(process.env.KILN_REPO, "docs", "guides");

// Per guide: how that framework is told "Streamable HTTP, this URL, these
// headers" (its own spelling), which the block must say.
const PYTHON_GUIDES = {
  "langchain.md": [/"transport": "streamable_http"/, /"url": KILN_MCP_URL/, /"headers": KILN_MCP_HEADERS/, /MultiServerMCPClient\(\{/],
  "langgraph.md": [/"transport": "streamable_http"/, /"url": KILN_MCP_URL/, /"headers": KILN_MCP_HEADERS/, /MultiServerMCPClient\(\{/],
  "crewai.md": [/"transport": "streamable-http"/, /"url": KILN_MCP_URL/, /"headers": KILN_MCP_HEADERS/, /MCPServerAdapter\(server_params\)/],
  "smolagents.md": [/"transport": "streamable-http"/, /"url": KILN_MCP_URL/, /"headers": KILN_MCP_HEADERS/, /MCPClient\(server_parameters\)/],
  "autogen.md": [/StreamableHttpServerParams\(\s*url=KILN_MCP_URL,\s*headers=KILN_MCP_HEADERS/, /mcp_server_tools\(server_params\)/],
  "pydantic-ai.md": [/MCPServerStreamableHTTP\(KILN_MCP_URL, headers=KILN_MCP_HEADERS/, /toolsets=\[kiln\]/],
  // BasicMCPClient picks Streamable HTTP for any URL not ending in /sse.
  "llamaindex.md": [/BasicMCPClient\(KILN_MCP_URL, headers=KILN_MCP_HEADERS/, /McpToolSpec\(client=client\)/],
  "openai-agents-python.md": [/MCPServerStreamableHttp\(/, /params=\{"url": KILN_MCP_URL, "headers": KILN_MCP_HEADERS/, /mcp_servers=\[kiln\]/],
};

/** The fenced blocks of a language in a markdown file. */
function blocks(text, lang) {
  return [...text.matchAll(new RegExp("^```" + lang + "[^\\n]*\\n([\\s\\S]*?)^```", "gm"))].map((m) => m[1]);
}

// Parses the block as Python 3.9 and evaluates its KILN_MCP_URL and
// KILN_MCP_HEADERS assignments (and only those) the way the program would.
const EVAL = `
import ast, json, os, sys
tree = ast.parse(sys.stdin.read(), feature_version=(3, 9))
got = {}
for node in tree.body:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        name = node.targets[0].id
        if name in ("KILN_MCP_URL", "KILN_MCP_HEADERS"):
            got[name] = eval(compile(ast.Expression(node.value), "<guide>", "eval"), {"os": os})
print(json.dumps(got))
`;

function pythonConfig(block) {
  const out = execFileSync("python3", ["-c", EVAL], { input: block, encoding: "utf8" });
  return JSON.parse(out);
}

async function connect(url, headers) {
  const client = new Client({ name: "kiln-guide-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

/** Connect as the guide says, list the tools, call list_sandboxes. */
async function useKiln(url, headers) {
  const client = await connect(url, headers);
  try {
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const n of ["create_sandbox", "shell", "read_file", "write_file", "delete_sandbox"]) {
      assert.ok(names.includes(n), `tools/list has ${n}: ${names}`);
    }
    const r = await client.callTool({ name: "list_sandboxes", arguments: {} });
    assert.equal(r.isError, false, JSON.stringify(r.content));
    assert.ok(Array.isArray(r.structuredContent?.sandboxes), JSON.stringify(r.structuredContent));
  } finally {
    await client.close();
  }
}

for (const [guide, marks] of Object.entries(PYTHON_GUIDES)) {
  test(`guide ${guide}: its MCP configuration reaches kilnd`, async () => {
    const text = readFileSync(join(GUIDES, guide), "utf8");
    const code = blocks(text, "python").filter((b) => /^KILN_MCP_URL = /m.test(b));
    assert.equal(code.length, 1, `${guide} has one python block setting KILN_MCP_URL`);
    for (const m of marks) assert.match(code[0], m, `${guide}'s configuration`);
    const conf = pythonConfig(code[0]);
    assert.equal(conf.KILN_MCP_URL, `${process.env.KILN_API_URL}/mcp`, "the URL is the workspace MCP endpoint");
    assert.deepEqual(conf.KILN_MCP_HEADERS, { Authorization: `Bearer ${process.env.KILN_API_KEY}` });
    await useKiln(conf.KILN_MCP_URL, conf.KILN_MCP_HEADERS);
  });
}

test("guide claude-managed-agents.md: the hosted agents' URL and Bearer token reach kilnd", async () => {
  const text = readFileSync(join(GUIDES, "claude-managed-agents.md"), "utf8");
  const sh = blocks(text, "sh").join("\n");
  const url = /^export KILN_MCP_URL=(\S+)/m.exec(sh)?.[1];
  assert.ok(url, "the page sets KILN_MCP_URL");
  const path = new URL(url).pathname;
  assert.equal(path, "/mcp", "the URL is kilnd's workspace MCP endpoint behind the proxy");
  // Each provider is given that URL and the kiln key as a Bearer token.
  assert.match(sh, /"mcp_servers": \[\{"type": "url", "name": "kiln", "url": "'"\$KILN_MCP_URL"'"\}\]/);
  assert.match(sh, /"type": "static_bearer", "mcp_server_url": "'"\$KILN_MCP_URL"'", "token": "'"\$KILN_API_KEY"'"/);
  assert.match(sh, /"url": "'"\$KILN_MCP_URL"'",\s*"authorization_token": "'"\$KILN_API_KEY"'"/);
  assert.match(sh, /"server_url": "'"\$KILN_MCP_URL"'",\s*"headers": \{"Authorization": "Bearer '"\$KILN_API_KEY"'"\}/);
  // What the providers send: POST <url> with Authorization: Bearer <token>.
  await useKiln(process.env.KILN_API_URL + path, { Authorization: `Bearer ${process.env.KILN_API_KEY}` });
});

test("guides: the headers are what lets them in (no key, a wrong key: refused)", async () => {
  const url = `${process.env.KILN_API_URL}/mcp`;
  await assert.rejects(connect(url, {}), /401|auth|unauthori/i);
  await assert.rejects(connect(url, { Authorization: "Bearer kiln_wrong" }), /401|auth|unauthori/i);
});

test("guides: every guide in docs/guides is checked here or by the frameworks tests", () => {
  const ts = ["vercel-ai.md", "openai-agents.md", "mastra.md", "langchain-js.md", "llamaindex-ts.md"];
  const all = execFileSync("ls", [GUIDES], { encoding: "utf8" }).split("\n").filter((f) => f.endsWith(".md") && f !== "README.md");
  const known = new Set([...Object.keys(PYTHON_GUIDES), "claude-managed-agents.md", ...ts]);
  assert.deepEqual(all.filter((f) => !known.has(f)), [], "a guide no test looks at");
  for (const f of ts) {
    const text = readFileSync(join(GUIDES, f), "utf8");
    assert.match(text, /sdk\/typescript\/test-frameworks\/[\w-]+\.test\.ts/, `${f} names the test that runs its integration`);
  }
});
