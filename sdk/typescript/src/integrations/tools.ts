/**
 * The sandbox tools every framework integration exposes, written once
 * without any framework: a name, a description, a JSON Schema for the
 * arguments and an execute function that returns the text the model reads.
 * @kiln/sdk/ai, /openai-agents, /mastra, /langchain and /llamaindex wrap
 * these in each framework's own tool type (`@kiln/sdk/tools` gives them
 * bare, for a framework kiln has no adapter for).
 *
 * The tools work on a SandboxSession: a sandbox made on the first tool call
 * (a conversation that never calls a tool makes none) and deleted by
 * close(), which withSandbox() calls when the conversation ends, however it
 * ends. Tool names match kilnd's MCP tools (shell, read_file, write_file,
 * list_dir) plus run_code.
 */
import { NotFound } from "../errors.js";
import { LANGUAGES, Sandbox, type CreateOptions } from "../sandbox.js";
import type { ExecResult } from "../types.js";
import type { Execution } from "../code.js";

/** The JSON Schema of a tool's arguments (always an object). */
export interface ToolParameters {
  type: "object";
  properties: Record<string, { type: "string" | "number"; description: string; enum?: string[] }>;
  required: string[];
  additionalProperties: false;
}

export interface SandboxTool<A = Record<string, unknown>> {
  name: SandboxToolName;
  description: string;
  parameters: ToolParameters;
  /** Runs the tool; the text is what the model reads. A command that fails
   * (non-zero exit) is a result; a kiln error (no such file, bad path)
   * rejects, and each framework reports that to the model its own way. */
  execute(args: A): Promise<string>;
}

export type SandboxToolName = "run_code" | "shell" | "read_file" | "write_file" | "list_dir";
export const SANDBOX_TOOL_NAMES: readonly SandboxToolName[] = ["run_code", "shell", "read_file", "write_file", "list_dir"];

export interface SandboxSessionOptions extends CreateOptions {
  /** Work in this existing sandbox instead of making one; close() leaves it alone. */
  sandbox?: Sandbox;
}

/**
 * One conversation's sandbox: created on first use (from `template`,
 * default "base", or a snapshot, as Sandbox.create), deleted by close().
 * With `await using`, closed when the block ends.
 */
export class SandboxSession {
  private readonly options: SandboxSessionOptions;
  private made: Promise<Sandbox> | null = null;
  private current: Sandbox | null = null;
  private closed = false;

  constructor(options: SandboxSessionOptions = {}) {
    this.options = options;
    if (options.sandbox) this.current = options.sandbox;
  }

  /** The sandbox, made now if this is the first use. */
  async sandbox(): Promise<Sandbox> {
    if (this.closed) throw new Error("this sandbox session is closed: the conversation it belonged to has ended");
    if (this.current) return this.current;
    if (!this.made) {
      const { sandbox: _unused, ...create } = this.options;
      this.made = Sandbox.create({ template: "base", ...create }).then((sb) => {
        this.current = sb;  // close() deletes it, even if it closed meanwhile
        return sb;
      });
      // A failed create may be retried by the next tool call.
      this.made.catch(() => { if (!this.current) this.made = null; });
    }
    return this.made;
  }

  /** The sandbox's id, once there is one. */
  get sandboxId(): string | undefined {
    return this.current?.id;
  }

  /** Delete the sandbox if this session made it; later tool calls fail. Safe to call twice. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.made) await this.made.catch(() => undefined);
    if (this.current && !this.options.sandbox) {
      try {
        await this.current.delete();
      } catch (e) {
        if (!(e instanceof NotFound)) throw e;  // already gone: what close() wants
      }
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** What the tools work on: a session, or a sandbox the caller owns. */
export type SandboxSource = SandboxSession | Sandbox;

function sandboxOf(source: SandboxSource): Promise<Sandbox> {
  return source instanceof SandboxSession ? source.sandbox() : Promise.resolve(source);
}

/**
 * Run fn with a new session and close it (deleting the sandbox) when fn
 * settles, whether it returned or threw: the sandbox-per-conversation
 * pattern every integration offers as withSandboxTools.
 */
export async function withSandbox<T>(options: SandboxSessionOptions, fn: (session: SandboxSession) => Promise<T>): Promise<T> {
  const session = new SandboxSession(options);
  try {
    return await fn(session);
  } finally {
    await session.close();
  }
}

/** Which tools an integration makes (every integration's sandboxTools takes it). */
export interface SandboxToolsOptions {
  /** Only these tools (default: run_code, shell, read_file, write_file, list_dir). */
  only?: readonly SandboxToolName[];
}

/**
 * withSandbox for an integration: a new session, its tools in the
 * framework's own type (make: that integration's sandboxTools), and the
 * sandbox deleted when fn settles.
 */
export function withToolsOf<Tools, T>(make: (source: SandboxSource, options: SandboxToolsOptions) => Tools,
  options: SandboxSessionOptions & SandboxToolsOptions,
  fn: (tools: Tools, session: SandboxSession) => Promise<T>): Promise<T> {
  const { only, ...create } = options;
  return withSandbox(create, (session) => fn(make(session, { only }), session));
}

/** An exec result as the model reads it: what MCP's shell tool prints. */
export function execText(r: ExecResult): string {
  let s = r.stdout;
  if (r.stderr) s += `${s && !s.endsWith("\n") ? "\n" : ""}[stderr]\n${r.stderr}`;
  if (r.exitCode !== 0 || r.signal !== null) {
    s += `${s && !s.endsWith("\n") ? "\n" : ""}[exit code ${r.exitCode}${r.signal !== null ? `, signal ${r.signal}` : ""}]`;
  }
  if (r.timedOut) s += `${s && !s.endsWith("\n") ? "\n" : ""}[timed out]`;
  if (r.truncated) s += `${s && !s.endsWith("\n") ? "\n" : ""}[output truncated]`;
  return s === "" ? "(no output)" : s;
}

/** A cell's Execution as a model reads it: stdout, then [stderr], [value], [error] when there is something to say. */
export function executionText(e: Execution): string {
  let s = e.stdout;
  const add = (t: string) => { s += `${s && !s.endsWith("\n") ? "\n" : ""}${t}`; };
  if (e.stderr) add(`[stderr]\n${e.stderr}`);
  if (e.text !== undefined) add(`[value]\n${e.text}`);
  if (e.error) add(`[error] ${e.error.name}: ${e.error.value}${e.error.traceback ? `\n${e.error.traceback}` : ""}`);
  if (e.truncated) add("[output truncated]");
  return s === "" ? "(no output)" : s;
}

function str(args: Record<string, unknown>, key: string, optional = false): string | undefined {
  const v = args?.[key];
  if (v === undefined || v === null) {
    if (optional) return undefined;
    throw new TypeError(`argument '${key}' is required`);
  }
  if (typeof v !== "string") throw new TypeError(`argument '${key}' must be a string, not ${typeof v}`);
  return v;
}

function seconds(args: Record<string, unknown>): number | undefined {
  const v = args?.timeout_seconds;
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !(v > 0) || v > 3600) throw new TypeError("argument 'timeout_seconds' must be a number from 1 to 3600");
  return v;
}

const obj = (properties: ToolParameters["properties"], required: string[]): ToolParameters =>
  ({ type: "object", properties, required, additionalProperties: false });

/** The five sandbox tools over one session or sandbox (only: a subset, by name). */
export function sandboxToolSpecs(source: SandboxSource, only?: readonly SandboxToolName[]): SandboxTool[] {
  for (const n of only ?? []) {
    if (!SANDBOX_TOOL_NAMES.includes(n)) throw new TypeError(`no sandbox tool named ${JSON.stringify(n)}; there are: ${SANDBOX_TOOL_NAMES.join(", ")}`);
  }
  const all: SandboxTool[] = [
    {
      name: "run_code",
      description: "Run code in the sandbox's interpreter (a Linux microVM), which keeps its state from one " +
        "call to the next, as a notebook: python variables and imports, bash variables, exports and " +
        "working directory, javascript globals. language: python (default), bash, sh or javascript. " +
        "Returns what it printed, the value of its last expression and its error with the traceback.",
      parameters: obj({
        code: { type: "string", description: "the source text: a cell" },
        language: { type: "string", description: "python, bash, sh or javascript", enum: ["python", "bash", "sh", "javascript"] },
        timeout_seconds: { type: "number", description: "interrupt it after this many seconds (default 120); its state stays" },
      }, ["code"]),
      async execute(a) {
        const sb = await sandboxOf(source);
        // The stateful interpreter (as runCode), each language in its default context.
        const lang = (str(a, "language", true) ?? "python").toLowerCase();
        if (!LANGUAGES[lang]) throw new TypeError(`unknown language ${JSON.stringify(lang)}; kiln runs: ${Object.keys(LANGUAGES).sort().join(", ")}`);
        return executionText(await sb.runCode(str(a, "code")!, lang, { timeout: Math.ceil(seconds(a) ?? 120) }));
      },
    },
    {
      name: "shell",
      description: "Run a shell command (/bin/sh -c) in the sandbox, a Linux microVM, and get its output and exit code.",
      parameters: obj({
        command: { type: "string", description: "the command line" },
        cwd: { type: "string", description: "directory to run it in (absolute path)" },
        timeout_seconds: { type: "number", description: "kill it after this many seconds (default 120)" },
      }, ["command"]),
      async execute(a) {
        const sb = await sandboxOf(source);
        const cwd = str(a, "cwd", true);
        return execText(await sb.exec(str(a, "command")!, { timeout: seconds(a) ?? 120, ...(cwd ? { cwd } : {}) }));
      },
    },
    {
      name: "read_file",
      description: "Read a text file in the sandbox (absolute path).",
      parameters: obj({ path: { type: "string", description: "absolute path inside the sandbox" } }, ["path"]),
      async execute(a) {
        const sb = await sandboxOf(source);
        return sb.files.readText(str(a, "path")!);
      },
    },
    {
      name: "write_file",
      description: "Write a text file in the sandbox (absolute path), replacing it; missing directories are made.",
      parameters: obj({
        path: { type: "string", description: "absolute path inside the sandbox" },
        content: { type: "string", description: "the file's new contents" },
      }, ["path", "content"]),
      async execute(a) {
        const sb = await sandboxOf(source);
        const path = str(a, "path")!;
        const n = await sb.files.write(path, str(a, "content")!);
        return `wrote ${n} bytes to ${path}`;
      },
    },
    {
      name: "list_dir",
      description: "List a directory in the sandbox: one entry a line (type, size, name).",
      parameters: obj({ path: { type: "string", description: "absolute path inside the sandbox" } }, ["path"]),
      async execute(a) {
        const sb = await sandboxOf(source);
        const entries = await sb.files.list(str(a, "path")!);
        return entries.map((e) => `${e.type}\t${e.size}\t${e.name}`).join("\n") || "(empty)";
      },
    },
  ];
  return only ? all.filter((t) => only.includes(t.name)) : all;
}
