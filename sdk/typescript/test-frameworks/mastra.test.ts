/**
 * @kiln/sdk/mastra: the kiln tools in a Mastra Agent's own loop
 * (agent.generate with maxSteps), driven by a scripted AI SDK v2 language
 * model (the model spec Mastra 0.24 runs on), against a real kilnd.
 */
import { test } from "node:test";
import assert from "node:assert/strict";

import { Agent } from "@mastra/core/agent";

import { withSandboxTools } from "@kiln/sdk/mastra";
import { checkRoundTrip, conversation, text, TOOL_NAMES } from "./conversation.js";

/** An AI SDK LanguageModelV2 that follows the script. */
function scriptedModel(c: ReturnType<typeof conversation>) {
  const state = { results: [] as string[], offered: [] as string[] };
  const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };
  const turn = (opts: any) => {
    state.offered = (opts.tools ?? []).map((t: any) => t.name);
    state.results = [];
    for (const m of opts.prompt) {
      if (m.role !== "tool") continue;
      for (const p of m.content) if (p.type === "tool-result") state.results.push(text(p.output));
    }
    return c.next(state.results.length);
  };
  const model = {
    specificationVersion: "v2", provider: "kiln-test", modelId: "scripted", supportedUrls: {},
    async doGenerate(opts: any) {
      const step = turn(opts);
      const content = step
        ? [{ type: "tool-call", toolCallId: `call_${state.results.length}`, toolName: step.name, input: JSON.stringify(step.args) }]
        : [{ type: "text", text: c.answer(state.results) }];
      return { content, finishReason: step ? "tool-calls" : "stop", usage, warnings: [] };
    },
    async doStream(opts: any) {
      const step = turn(opts);
      const parts: any[] = [{ type: "stream-start", warnings: [] }];
      if (step) {
        parts.push({ type: "tool-call", toolCallId: `call_${state.results.length}`, toolName: step.name, input: JSON.stringify(step.args) });
      } else {
        parts.push({ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: c.answer(state.results) }, { type: "text-end", id: "t" });
      }
      parts.push({ type: "finish", finishReason: step ? "tool-calls" : "stop", usage });
      return { stream: new ReadableStream({ start(ctl) { for (const p of parts) ctl.enqueue(p); ctl.close(); } }) };
    },
  };
  return { model, state };
}

test("mastra: agent.generate calls the sandbox tools, results flow back, sandbox deleted", async () => {
  const c = conversation();
  const { model, state } = scriptedModel(c);
  let id: string | undefined;
  const final = await withSandboxTools({ template: "base" }, async (tools, session) => {
    const agent = new Agent({ name: "coder", instructions: "Use the sandbox.", model: model as any, tools });
    const r = await agent.generate("use the sandbox", { maxSteps: 20 } as any);
    id = session.sandboxId;
    return r.text;
  });
  assert.deepEqual([...state.offered].sort(), [...TOOL_NAMES].sort());
  await checkRoundTrip(c, state.results, final, id);
});
