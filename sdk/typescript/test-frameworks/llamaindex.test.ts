/**
 * @kiln/sdk/llamaindex: the kiln tools (FunctionTools) in LlamaIndex.TS's
 * agent workflow (@llamaindex/workflow's agent()), driven by a scripted
 * ToolCallLLM, against a real kilnd.
 */
import { test } from "node:test";
import assert from "node:assert/strict";

import { agent } from "@llamaindex/workflow";
import { ToolCallLLM } from "llamaindex";

import { withSandboxTools } from "@kiln/sdk/llamaindex";
import { checkRoundTrip, conversation, text, TOOL_NAMES } from "./conversation.js";

class ScriptedLLM extends ToolCallLLM {
  supportToolCall = true;
  results: string[] = [];
  offered: string[] = [];
  metadata = { model: "kiln-scripted", temperature: 0, topP: 1, contextWindow: 100000, tokenizer: undefined, structuredOutput: false } as any;
  constructor(private c: ReturnType<typeof conversation>) { super(); }

  private turn(params: any): { delta: string; options: any } {
    this.offered = (params.tools ?? []).map((t: any) => t.metadata.name);
    this.results = params.messages.filter((m: any) => m.options?.toolResult).map((m: any) => text(m.options.toolResult.result));
    const step = this.c.next(this.results.length);
    if (step) return { delta: "", options: { toolCall: [{ id: `call_${this.results.length}`, name: step.name, input: step.args }] } };
    return { delta: this.c.answer(this.results), options: {} };
  }

  chat(params: any): any {
    const r = this.turn(params);
    if (params.stream) {
      return (async function* () { yield { delta: r.delta, options: r.options, raw: null }; })();
    }
    return Promise.resolve({ message: { role: "assistant", content: r.delta, options: r.options }, raw: null });
  }

  override complete(): any {
    throw new Error("the scripted LLM only chats");
  }
}

test("llamaindex: agent workflow calls the sandbox tools, results flow back, sandbox deleted", async () => {
  const c = conversation();
  const llm = new ScriptedLLM(c);
  let id: string | undefined;
  const final = await withSandboxTools({ template: "base" }, async (tools, session) => {
    const r = await agent({ llm, tools }).run("use the sandbox");
    id = session.sandboxId;
    return text(r.data.result);
  });
  assert.deepEqual([...llm.offered].sort(), [...TOOL_NAMES].sort());
  await checkRoundTrip(c, llm.results, final, id);
});
