/**
 * kiln sandbox tools for Mastra (`@mastra/core`): each is Mastra's own
 * `createTool()` with a zod input schema (zod is Mastra's peer dependency),
 * keyed by id, for an Agent's `tools`.
 *
 *     import { Agent } from "@mastra/core/agent";
 *     import { withSandboxTools } from "@kiln/sdk/mastra";
 *     await withSandboxTools({ template: "base" }, async (tools) => {
 *       const agent = new Agent({ name: "coder", instructions, model, tools });
 *       return (await agent.generate("What is 6*7? Use python.", { maxSteps: 10 })).text;
 *     });
 *
 * The sandbox is made on the first tool call and deleted when the callback
 * settles.
 */
import { createTool } from "@mastra/core/tools";
import { z } from "zod";

import {
  SandboxSession, sandboxToolSpecs, withToolsOf, type SandboxToolsOptions, type SandboxSessionOptions, type SandboxSource, type SandboxTool,
} from "./tools.js";

export { SandboxSession } from "./tools.js";
export type { SandboxSessionOptions, SandboxToolName, SandboxToolsOptions } from "./tools.js";


/** The JSON Schema of a kiln tool's arguments as the zod object Mastra wants. */
function zodOf(t: SandboxTool): z.ZodTypeAny {
  const shape: Record<string, z.ZodTypeAny> = {};
  for (const [key, p] of Object.entries(t.parameters.properties)) {
    let s: z.ZodTypeAny = p.enum ? z.enum(p.enum as [string, ...string[]]) : p.type === "number" ? z.number() : z.string();
    s = s.describe(p.description);
    shape[key] = t.parameters.required.includes(key) ? s : s.optional();
  }
  return z.object(shape).strict();
}

// Mastra's tool type is generic over its schemas; kiln's are all
// objects of strings and numbers.
export type SandboxMastraTool = ReturnType<typeof createTool>;

/** The sandbox tools as Mastra tools, keyed by id (the tool name). */
export function sandboxTools(source: SandboxSource, options: SandboxToolsOptions = {}): Record<string, SandboxMastraTool> {
  const tools: Record<string, SandboxMastraTool> = {};
  for (const t of sandboxToolSpecs(source, options.only)) {
    tools[t.name] = createTool({
      id: t.name,
      description: t.description,
      inputSchema: zodOf(t) as any,
      execute: async ({ context }: { context: Record<string, unknown> }) => t.execute(context),
    } as any) as SandboxMastraTool;
  }
  return tools;
}

/** A sandbox for one conversation: fn gets the tools; the sandbox is deleted when fn settles. */
export function withSandboxTools<T>(options: SandboxSessionOptions & SandboxToolsOptions,
  fn: (tools: Record<string, SandboxMastraTool>, session: SandboxSession) => Promise<T>): Promise<T> {
  return withToolsOf(sandboxTools, options, fn);
}
