/**
 * @kiln/sdk/ai: the kiln tools in the Vercel AI SDK's own agent loop
 * (generateText with stopWhen), driven by ai/test's MockLanguageModelV3,
 * against a real kilnd (tests/sdk/run frameworks).
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { sandboxTools, SandboxSession, withSandboxTools } from "@kiln/sdk/ai";
import { checkRoundTrip, conversation, text, TOOL_NAMES } from "./conversation.js";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
} as any;

test("vercel ai: generateText calls the sandbox tools, results flow back, sandbox deleted", async () => {
  const c = conversation();
  const seen: string[][] = [];
  let results: string[] = [];
  const model = new MockLanguageModelV3({
    doGenerate: async (opts: any) => {
      seen.push((opts.tools ?? []).map((t: any) => `${t.name}:${t.inputSchema?.type}`));
      results = [];
      for (const m of opts.prompt) {
        if (m.role !== "tool") continue;
        for (const p of m.content) if (p.type === "tool-result") results.push(text(p.output));
      }
      const step = c.next(results.length);
      if (step) {
        return {
          content: [{ type: "tool-call", toolCallId: `call_${results.length}`, toolName: step.name, input: JSON.stringify(step.args) }],
          finishReason: { unified: "tool-calls", raw: undefined }, usage, warnings: [],
        };
      }
      return { content: [{ type: "text", text: c.answer(results) }], finishReason: { unified: "stop", raw: undefined }, usage, warnings: [] };
    },
  });
  let id: string | undefined;
  const final = await withSandboxTools({ template: "base" }, async (tools, session) => {
    const r = await generateText({ model, tools, stopWhen: stepCountIs(20), prompt: "use the sandbox" });
    id = session.sandboxId;
    return r.text;
  });
  assert.deepEqual(seen[0].sort(), TOOL_NAMES.map((n) => `${n}:object`).sort(), "the model was offered the five tools with JSON Schemas");
  await checkRoundTrip(c, results, final, id);
});

test("vercel ai: the sandbox is deleted when the conversation throws, and none is made without a tool call", async () => {
  const session = new SandboxSession({ template: "minimal" });
  const tools = sandboxTools(session, { only: ["shell"] });
  assert.deepEqual(Object.keys(tools), ["shell"]);
  assert.equal(session.sandboxId, undefined, "no sandbox before the first tool call");
  let id: string | undefined;
  await assert.rejects(withSandboxTools({ template: "minimal", only: ["shell"] }, async (t, s) => {
    const out = await (t.shell as any).execute({ command: "echo hi" }, { toolCallId: "x", messages: [] });
    assert.equal(out, "hi\n");
    id = s.sandboxId;
    throw new Error("the conversation failed");
  }), /the conversation failed/);
  assert.ok(id);
  const { NotFound, Sandbox } = await import("@kiln/sdk");
  await assert.rejects(Sandbox.get(id!), NotFound, "deleted although the callback threw");
  await session.close();
  await assert.rejects((tools.shell as any).execute({ command: "true" }, { toolCallId: "y", messages: [] }), /closed/,
    "a closed session refuses tool calls");
  assert.throws(() => sandboxTools(session, { only: ["rm_rf" as any] }), /no sandbox tool named "rm_rf"/);
});
