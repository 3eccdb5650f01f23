/**
 * kiln sandbox tools for LlamaIndex.TS (`llamaindex`): each is a
 * FunctionTool (JSON Schema parameters), for `agent({ llm, tools })` of
 * @llamaindex/workflow or any LlamaIndex tool-calling LLM.
 *
 *     import { agent } from "@llamaindex/workflow";
 *     import { withSandboxTools } from "@kiln/sdk/llamaindex";
 *     await withSandboxTools({ template: "base" }, async (tools) =>
 *       (await agent({ llm, tools }).run("What is 6*7? Use python.")).data.result);
 *
 * The sandbox is made on the first tool call and deleted when the callback
 * settles.
 */
import { FunctionTool, type BaseToolWithCall } from "llamaindex";

import {
  SandboxSession, sandboxToolSpecs, withToolsOf, type SandboxToolsOptions, type SandboxSessionOptions, type SandboxSource,
} from "./tools.js";

export { SandboxSession } from "./tools.js";
export type { SandboxSessionOptions, SandboxToolName, SandboxToolsOptions } from "./tools.js";


/** The sandbox tools as LlamaIndex FunctionTools. */
export function sandboxTools(source: SandboxSource, options: SandboxToolsOptions = {}): BaseToolWithCall[] {
  return sandboxToolSpecs(source, options.only).map((t) => FunctionTool.from(
    (args: Record<string, unknown>) => t.execute(args),
    { name: t.name, description: t.description, parameters: t.parameters as any },
  ) as unknown as BaseToolWithCall);
}

/** A sandbox for one conversation: fn gets the tools; the sandbox is deleted when fn settles. */
export function withSandboxTools<T>(options: SandboxSessionOptions & SandboxToolsOptions,
  fn: (tools: BaseToolWithCall[], session: SandboxSession) => Promise<T>): Promise<T> {
  return withToolsOf(sandboxTools, options, fn);
}
