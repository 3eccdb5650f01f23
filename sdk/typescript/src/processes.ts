/**
 * Background processes of a sandbox (docs/api.md, Processes): started,
 * they outlive the call; the guest agent keeps them and a ring of their
 * output, to be listed, signalled and read later.
 */
import type { Client } from "./client.js";

/** A process the agent keeps; `id` names it in the API (the guest pid may be reused). */
export interface Process {
  id: number;
  pid: number;
  status: "running" | "exited";
  command?: string;
  startedAt?: string;
  /** Once it ended: its exit status, or 128 + the signal. */
  exitCode?: number | null;
  signal?: number | null;
  outputDropped?: number;
}

/** What a process printed (what the agent kept of it), and whether it had ended. */
export interface ProcessOutput {
  id: number;
  pid: number;
  status: "running" | "exited";
  stdout: string;
  stderr: string;
  exitCode: number | null;
  signal: number | null;
  outputDropped: number;
  truncated: boolean;
}

interface ProcessJSON {
  id: number; pid: number; status: "running" | "exited"; command?: string; started_at?: string;
  exit_code?: number | null; signal?: number | null; output_dropped?: number;
}

interface OutputJSON {
  id: number; pid: number; status: "running" | "exited"; stdout: string; stderr: string;
  exit_code: number | null; signal: number | null; output_dropped: number; truncated: boolean;
}

function processFrom(j: ProcessJSON): Process {
  return {
    id: j.id, pid: j.pid, status: j.status, command: j.command, startedAt: j.started_at,
    exitCode: j.exit_code, signal: j.signal, outputDropped: j.output_dropped,
  };
}

function idOf(p: Process | number): number {
  const id = typeof p === "number" ? p : p?.id;
  if (!Number.isInteger(id) || id <= 0) throw new TypeError("a process is a Process or its id (a positive integer)");
  return id;
}

/** `sandbox.processes`: start, list, kill, sendStdin, output. */
export class Processes {
  constructor(
    private readonly client: Client,
    private readonly base: () => string,
    private readonly body: (cmd: string | string[], o: Record<string, unknown>) => Record<string, unknown>,
  ) {}

  /** Start `cmd` in the background and return at once. */
  async start(
    cmd: string | string[],
    options: { env?: Record<string, string>; cwd?: string; user?: string; timeout?: number; stdin?: boolean } = {},
  ): Promise<Process> {
    const { stdin, ...rest } = options;
    if (stdin !== undefined && typeof stdin !== "boolean") throw new TypeError("stdin must be true or false (send the bytes with sendStdin)");
    const json = this.body(cmd, rest);
    if (stdin) json.stdin = true;
    const j = await this.client.json<ProcessJSON>("POST", `${this.base()}/processes`, { json });
    return processFrom(j);
  }

  async list(): Promise<Process[]> {
    const j = await this.client.json<{ processes: ProcessJSON[] }>("GET", `${this.base()}/processes`);
    return j.processes.map(processFrom);
  }

  /** Signal the process's group: a name (TERM, KILL, INT...) or a number. */
  async kill(process: Process | number, signal: string | number = "KILL"): Promise<void> {
    await this.client.empty("POST", `${this.base()}/processes/${idOf(process)}/signal`, { json: { signal } });
  }

  /**
   * Write `data` to the stdin of a process started with `stdin: true` (`close` closes it after);
   * the bytes sent. A process that reads nothing gets a Conflict error once 2 MiB wait.
   */
  async sendStdin(process: Process | number, data: string | Uint8Array, options: { close?: boolean } = {}): Promise<number> {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    if (!(bytes instanceof Uint8Array)) throw new TypeError("data must be a string or Uint8Array");
    const j = await this.client.json<{ bytes: number }>("POST", `${this.base()}/processes/${idOf(process)}/stdin`, {
      query: options.close ? { close: "true" } : undefined,
      body: bytes as unknown as BodyInit, headers: { "Content-Type": "application/octet-stream" },
    });
    return j.bytes;
  }

  /** Close the process's stdin (it reads end of file). */
  async closeStdin(process: Process | number): Promise<void> {
    await this.client.json("POST", `${this.base()}/processes/${idOf(process)}/stdin`, {
      query: { close: "true" }, body: new Uint8Array(0) as unknown as BodyInit,
      headers: { "Content-Type": "application/octet-stream" },
    });
  }

  /** Its output kept so far; with `wait` (seconds), also what comes until it ends or the time passes. */
  async output(process: Process | number, options: { wait?: number } = {}): Promise<ProcessOutput> {
    const wait = options.wait ?? 0;
    if (!Number.isInteger(wait) || wait < 0 || wait > 3600) throw new TypeError("wait must be whole seconds from 0 to 3600");
    const j = await this.client.json<OutputJSON>("GET", `${this.base()}/processes/${idOf(process)}/output`, {
      query: { wait_seconds: wait },
      timeoutMs: (wait + 60) * 1000,
    });
    return {
      id: j.id, pid: j.pid, status: j.status, stdout: j.stdout, stderr: j.stderr, exitCode: j.exit_code,
      signal: j.signal, outputDropped: j.output_dropped, truncated: j.truncated,
    };
  }
}
