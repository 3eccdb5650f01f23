/**
 * kiln sandbox tools for LangChain.js and LangGraph.js (`@langchain/core`):
 * each is a StructuredTool made with LangChain's own `tool()`, for
 * `model.bindTools(tools)`, LangGraph's ToolNode or createReactAgent.
 *
 *     import { createReactAgent } from "@langchain/langgraph/prebuilt";
 *     import { withSandboxTools } from "@kiln/sdk/langchain";
 *     await withSandboxTools({ template: "base" }, async (tools) => {
 *       const agent = createReactAgent({ llm, tools });
 *       return agent.invoke({ messages: [{ role: "user", content: "..." }] });
 *     });
 *
 * The sandbox is made on the first tool call and deleted when the callback
 * settles. A failing tool throws; LangGraph's ToolNode hands the error to
 * the model as a ToolMessage.
 */
import { tool, type StructuredToolInterface } from "@langchain/core/tools";

import {
  SandboxSession, sandboxToolSpecs, withToolsOf, type SandboxToolsOptions, type SandboxSessionOptions, type SandboxSource,
} from "./tools.js";

export { SandboxSession } from "./tools.js";
export type { SandboxSessionOptions, SandboxToolName, SandboxToolsOptions } from "./tools.js";


/** The sandbox tools as LangChain structured tools (JSON Schema arguments). */
export function sandboxTools(source: SandboxSource, options: SandboxToolsOptions = {}): StructuredToolInterface[] {
  return sandboxToolSpecs(source, options.only).map((t) => tool(
    (args: Record<string, unknown>) => t.execute(args),
    { name: t.name, description: t.description, schema: t.parameters as any },
  ) as unknown as StructuredToolInterface);
}

/** A sandbox for one conversation: fn gets the tools; the sandbox is deleted when fn settles. */
export function withSandboxTools<T>(options: SandboxSessionOptions & SandboxToolsOptions,
  fn: (tools: StructuredToolInterface[], session: SandboxSession) => Promise<T>): Promise<T> {
  return withToolsOf(sandboxTools, options, fn);
}
