/**
 * @kiln/sdk/openai-agents: the kiln tools in the OpenAI Agents SDK's own
 * runner (run(agent, input)), driven by a scripted Model (the SDK's Model
 * interface, no OpenAI account), against a real kilnd.
 */
import { test } from "node:test";
import assert from "node:assert/strict";

import { Agent, run, setTracingDisabled, Usage, type Model, type ModelRequest, type ModelResponse } from "@openai/agents";

import { withSandboxTools } from "@kiln/sdk/openai-agents";
import { checkRoundTrip, conversation, text, TOOL_NAMES } from "./conversation.js";

setTracingDisabled(true);

class ScriptedModel implements Model {
  results: string[] = [];
  offered: string[] = [];
  constructor(private c: ReturnType<typeof conversation>) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.offered = request.tools.map((t: any) => t.name);
    const items = Array.isArray(request.input) ? request.input : [];
    this.results = items.filter((i: any) => i.type === "function_call_result").map((i: any) => text(i.output));
    const step = this.c.next(this.results.length);
    const output: any[] = step
      ? [{ type: "function_call", callId: `call_${this.results.length}`, name: step.name, arguments: JSON.stringify(step.args), status: "completed" }]
      : [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: this.c.answer(this.results) }] }];
    return { usage: new Usage(), output, responseId: `resp_${this.results.length}` };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<any> {
    throw new Error("the test runs without streaming");
  }
}

test("openai agents: run() calls the sandbox tools, results flow back, sandbox deleted", async () => {
  const c = conversation();
  const model = new ScriptedModel(c);
  let id: string | undefined;
  const final = await withSandboxTools({ template: "base" }, async (tools, session) => {
    const agent = new Agent({ name: "coder", instructions: "Use the sandbox.", model, tools });
    const r = await run(agent, "use the sandbox", { maxTurns: 20 });
    id = session.sandboxId;
    return String(r.finalOutput);
  });
  assert.deepEqual([...model.offered].sort(), [...TOOL_NAMES].sort());
  await checkRoundTrip(c, model.results, final, id);
});
