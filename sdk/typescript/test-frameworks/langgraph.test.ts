/**
 * @kiln/sdk/langchain: the kiln tools (LangChain StructuredTools) in
 * LangGraph.js's prebuilt ReAct agent (createReactAgent: ToolNode and the
 * model loop), driven by a scripted LangChain chat model (BaseChatModel),
 * against a real kilnd.
 */
import { test } from "node:test";
import assert from "node:assert/strict";

import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { createReactAgent } from "@langchain/langgraph/prebuilt";

import { withSandboxTools } from "@kiln/sdk/langchain";
import { checkRoundTrip, conversation, text, TOOL_NAMES } from "./conversation.js";

class ScriptedChatModel extends BaseChatModel {
  results: string[] = [];
  offered: string[] = [];
  constructor(private c: ReturnType<typeof conversation>) { super({}); }
  _llmType() { return "kiln-scripted"; }
  override bindTools(tools: any[]): any {
    this.offered = tools.map((t) => t.name);
    return this;
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    this.results = messages.filter((m) => m.getType() === "tool").map((m) => text(m.content));
    const step = this.c.next(this.results.length);
    const message = step
      ? new AIMessage({ content: "", tool_calls: [{ id: `call_${this.results.length}`, name: step.name, args: step.args, type: "tool_call" }] })
      : new AIMessage({ content: this.c.answer(this.results) });
    return { generations: [{ text: typeof message.content === "string" ? message.content : "", message }] };
  }
}

test("langgraph: createReactAgent calls the sandbox tools, results flow back, sandbox deleted", async () => {
  const c = conversation();
  const llm = new ScriptedChatModel(c);
  let id: string | undefined;
  const final = await withSandboxTools({ template: "base" }, async (tools, session) => {
    const agent = createReactAgent({ llm, tools });
    const r = await agent.invoke({ messages: [{ role: "user", content: "use the sandbox" }] }, { recursionLimit: 40 });
    id = session.sandboxId;
    return text(r.messages[r.messages.length - 1].content);
  });
  assert.deepEqual([...llm.offered].sort(), [...TOOL_NAMES].sort());
  await checkRoundTrip(c, llm.results, final, id);
});
