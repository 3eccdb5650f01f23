/**
 * kiln sandbox tools for the OpenAI Agents SDK (`@openai/agents`): each is
 * the SDK's own function tool (`tool()`), for an Agent's `tools`.
 *
 *     import { Agent, run } from "@openai/agents";
 *     import { withSandboxTools } from "@kiln/sdk/openai-agents";
 *     await withSandboxTools({ template: "base" }, async (tools) => {
 *       const agent = new Agent({ name: "coder", instructions, tools });
 *       return (await run(agent, "What is 6*7? Use python.")).finalOutput;
 *     });
 *
 * The sandbox is made on the first tool call and deleted when the callback
 * settles. A failing tool call goes back to the model as "error: " and
 * kiln's message (not the SDK's default, which hides the message), and
 * the run goes on.
 */
import { tool, type FunctionTool } from "@openai/agents";

import {
  SandboxSession, sandboxToolSpecs, withToolsOf, type SandboxToolsOptions, type SandboxSessionOptions, type SandboxSource,
} from "./tools.js";

export { SandboxSession } from "./tools.js";
export type { SandboxSessionOptions, SandboxToolName, SandboxToolsOptions } from "./tools.js";


// The Agents SDK's tool types carry a run context type parameter; kiln's
// tools use none.
export type SandboxFunctionTool = FunctionTool<any, any, any>;

/** The sandbox tools as Agents SDK function tools. */
export function sandboxTools(source: SandboxSource, options: SandboxToolsOptions = {}): SandboxFunctionTool[] {
  return sandboxToolSpecs(source, options.only).map((t) => tool({
    name: t.name,
    description: t.description,
    // Non-strict: run_code's language and shell's cwd are optional, which
    // strict mode's schema (every property required) cannot say.
    parameters: t.parameters as any,
    strict: false,
    execute: (args: unknown) => t.execute(args as Record<string, unknown>),
    // The SDK's default hides the error ("An error occurred while running
    // the tool"); the model does better knowing the file was not there.
    errorFunction: (_ctx: unknown, error: unknown) => `error: ${error instanceof Error ? error.message : String(error)}`,
  }) as SandboxFunctionTool);
}

/** A sandbox for one conversation: fn gets the tools; the sandbox is deleted when fn settles. */
export function withSandboxTools<T>(options: SandboxSessionOptions & SandboxToolsOptions,
  fn: (tools: SandboxFunctionTool[], session: SandboxSession) => Promise<T>): Promise<T> {
  return withToolsOf(sandboxTools, options, fn);
}
