/**
 * kiln sandbox tools for the Vercel AI SDK (`ai`, v6): each tool is the
 * SDK's own `tool()`, so they go straight into generateText / streamText /
 * ToolLoopAgent's `tools`.
 *
 *     import { generateText, stepCountIs } from "ai";
 *     import { withSandboxTools } from "@kiln/sdk/ai";
 *     const text = await withSandboxTools({ template: "base" }, async (tools) =>
 *       (await generateText({ model, tools, stopWhen: stepCountIs(10), prompt })).text);
 *
 * The sandbox is made on the first tool call and deleted when the callback
 * settles. A tool that fails (no such file, say) rejects, which the SDK
 * hands the model as a tool error.
 */
import { jsonSchema, tool, type Tool, type ToolSet } from "ai";

import {
  SandboxSession, sandboxToolSpecs, withToolsOf, type SandboxToolsOptions, type SandboxSessionOptions, type SandboxSource,
} from "./tools.js";

export { SandboxSession } from "./tools.js";
export type { SandboxSessionOptions, SandboxToolName, SandboxToolsOptions } from "./tools.js";


/** The sandbox tools as an AI SDK ToolSet, keyed by tool name. */
export function sandboxTools(source: SandboxSource, options: SandboxToolsOptions = {}): ToolSet {
  const set: Record<string, Tool> = {};
  for (const t of sandboxToolSpecs(source, options.only)) {
    set[t.name] = tool({
      description: t.description,
      inputSchema: jsonSchema<Record<string, unknown>>(t.parameters),
      execute: (args: Record<string, unknown>) => t.execute(args),
    });
  }
  return set;
}

/** A sandbox for one conversation: fn gets the tools; the sandbox is deleted when fn settles. */
export function withSandboxTools<T>(options: SandboxSessionOptions & SandboxToolsOptions,
  fn: (tools: ToolSet, session: SandboxSession) => Promise<T>): Promise<T> {
  return withToolsOf(sandboxTools, options, fn);
}
