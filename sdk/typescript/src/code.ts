/**
 * A stateful code interpreter in a sandbox (docs/api.md, Code): cells run in a context that keeps
 * its state between calls, with the last expression's value and rich results (HTML, PNG,
 * JSON...) returned, as Jupyter does. Python, bash, sh and javascript; the template needs python3
 * (`base` has it), javascript node (`code-interpreter` has it).
 */
import type { Client } from "./client.js";
import { ConnectionFailed, errorFor } from "./errors.js";
import { STREAM_SILENCE_MS, sseEvents } from "./stream.js";

/** One result of a cell: the last expression's value (isMainResult) or a figure it drew. */
export interface Result {
  text?: string;
  html?: string;
  markdown?: string;
  /** base64 */
  png?: string;
  svg?: string;
  json?: unknown;
  isMainResult: boolean;
}

/** The exception a cell raised. */
export interface ExecutionError {
  name: string;
  value: string;
  traceback: string;
}

/** What a cell did. `text` is the last expression's value as text, as E2B's Execution.text. */
export interface Execution {
  stdout: string;
  stderr: string;
  results: Result[];
  error: ExecutionError | null;
  executionCount: number;
  truncated: boolean;
  text: string | undefined;
}

/** A context: its own state, in its own interpreter process. */
export interface CodeContext {
  id: string;
  language: "python" | "bash" | "sh" | "javascript";
  cwd: string | null;
}

interface ExecutionJSON {
  stdout: string; stderr: string; error: ExecutionError | null; execution_count: number; truncated: boolean;
  results: Array<{ text?: string; html?: string; markdown?: string; png?: string; svg?: string; json?: unknown; is_main_result: boolean }>;
}

const cid = (c: CodeContext | string) => (typeof c === "string" ? c : c.id);

/** The languages of cells and contexts; the aliases are E2B's. javascript runs in node (the
 * code-interpreter template has it): top-level `await` works, the cell's value is what the last
 * expression awaited, and its declarations (`let`, `const`, `class`) last to the next cell. */
export const LANGUAGES: Readonly<Record<string, CodeContext["language"]>> = {
  python: "python", python3: "python", bash: "bash", sh: "sh", javascript: "javascript", js: "javascript", node: "javascript",
};

/** `language`'s canonical name (`js` is javascript), undefined for undefined; a TypeError naming
 * the languages for one kiln does not run. */
export function languageOf(language: string | undefined): CodeContext["language"] | undefined {
  if (language === undefined) return undefined;
  const lang = typeof language === "string" ? LANGUAGES[language.toLowerCase()] : undefined;
  if (!lang) throw new TypeError(`unknown language ${JSON.stringify(language)}; kiln runs: ${Object.keys(LANGUAGES).sort().join(", ")}`);
  return lang;
}

/** code.run's options: callbacks make it a stream (output as the cell writes it). */
export interface RunOptions {
  context?: CodeContext | string;
  /** python, bash, sh, javascript (or an alias of LANGUAGES): without a context, that language's
   * default context; with one, the context's. javascript cells may `await` at top level. */
  language?: string;
  timeout?: number;
  /** Environment variables of this cell only (os.environ, process.env, exported shell
   * variables; what it starts inherits them), undone after it. As E2B's runCode. */
  envs?: Record<string, string>;
  onStdout?: (text: string) => void | Promise<void>;
  onStderr?: (text: string) => void | Promise<void>;
  onResult?: (r: Result) => void | Promise<void>;
  onError?: (e: ExecutionError) => void | Promise<void>;
}

/** `sandbox.code`: run cells in contexts that keep their state. */
export class Code {
  constructor(private readonly client: Client, private readonly base: () => string) {}

  /**
   * Run a cell in `context` (default: the sandbox's default context); `timeout` (seconds)
   * interrupts it. With callbacks, output and results reach them while the cell runs (a stream);
   * the Execution at the end holds all of it either way.
   */
  async run(code: string, options: RunOptions = {}): Promise<Execution> {
    if (typeof code !== "string") throw new TypeError("code must be a string");
    const json: Record<string, unknown> = { code };
    if (options.context !== undefined) json.context = cid(options.context);
    const lang = languageOf(options.language);
    if (lang !== undefined) json.language = lang;
    if (options.timeout !== undefined) json.timeout_seconds = options.timeout;
    if (options.envs !== undefined) json.envs = options.envs;
    if (options.onStdout || options.onStderr || options.onResult || options.onError) return this.stream(json, options);
    const j = await this.client.json<ExecutionJSON>("POST", `${this.base()}/code`, {
      json, timeoutMs: options.timeout ? (options.timeout + 90) * 1000 : null,
    });
    const results = j.results.map(({ is_main_result, ...r }) => ({ ...r, isMainResult: is_main_result }));
    return {
      stdout: j.stdout, stderr: j.stderr, results, error: j.error, executionCount: j.execution_count,
      truncated: j.truncated, text: results.find((r) => r.isMainResult)?.text,
    };
  }

  private async stream(json: Record<string, unknown>, o: RunOptions): Promise<Execution> {
    const ctl = new AbortController();
    const resp = await this.client.request("POST", `${this.base()}/code/stream`, {
      json, timeoutMs: null, ok: [200], signal: ctl.signal, headers: { Accept: "text/event-stream" },
    });
    if (!resp.body) throw new TypeError("the stream has no body");
    const out = { stdout: [] as string[], stderr: [] as string[] };
    const results: Result[] = [];
    let error: ExecutionError | null = null;
    try {
      for await (const ev of sseEvents(resp.body, STREAM_SILENCE_MS, () => ctl.abort())) {
        const j = JSON.parse(ev.data);
        if (ev.event === "stdout" || ev.event === "stderr") {
          out[ev.event].push(j.text);
          await (ev.event === "stdout" ? o.onStdout : o.onStderr)?.(j.text);
        } else if (ev.event === "result") {
          const { is_main_result, ...rest } = j;
          const r: Result = { ...rest, isMainResult: Boolean(is_main_result) };
          results.push(r);
          await o.onResult?.(r);
        } else if (ev.event === "error") {
          error = { name: j.name, value: j.value, traceback: j.traceback };
          await o.onError?.(error);
        } else if (ev.event === "end") {
          return {
            stdout: out.stdout.join(""), stderr: out.stderr.join(""), results, error,
            executionCount: j.execution_count, truncated: Boolean(j.truncated), text: results.find((r) => r.isMainResult)?.text,
          };
        } else if (ev.event === "fail") {
          throw errorFor(undefined, String(j.code ?? "error"), String(j.message ?? ""));
        }
      }
    } finally {
      ctl.abort();
    }
    throw new ConnectionFailed("the cell's stream ended before the cell did", "stream_ended");
  }

  /** A new context of `language` (python, the default; bash, sh, javascript, or an alias: js, node)
   * starting in `cwd`; its own interpreter process, so its state is its own. */
  async createContext(options: { cwd?: string; language?: string } = {}): Promise<CodeContext> {
    const json: Record<string, string> = {};
    if (options.cwd) json.cwd = options.cwd;
    const lang = languageOf(options.language);
    if (lang !== undefined) json.language = lang;
    const j = await this.client.json<CodeContext>("POST", `${this.base()}/code/contexts`, { json });
    return { id: j.id, language: j.language ?? "python", cwd: j.cwd ?? null };
  }

  async listContexts(): Promise<CodeContext[]> {
    const j = await this.client.json<{ contexts: CodeContext[] }>("GET", `${this.base()}/code/contexts`);
    return j.contexts.map((c) => ({ id: c.id, language: c.language ?? "python", cwd: c.cwd ?? null }));
  }

  /** Its variables are gone; the context stays. */
  async restartContext(context: CodeContext | string): Promise<void> {
    await this.client.json("POST", `${this.base()}/code/contexts/${cid(context)}/restart`);
  }

  async deleteContext(context: CodeContext | string): Promise<void> {
    await this.client.empty("DELETE", `${this.base()}/code/contexts/${cid(context)}`);
  }
}
