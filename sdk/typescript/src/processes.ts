/**
 * Background processes of a sandbox (docs/api.md, Processes): started,
 * they outlive the call; the guest agent keeps them and a ring of their
 * output, to be listed, signalled and read later.
 */
import type { Client } from "./client.js";
import { ConnectionFailed, errorFor } from "./errors.js";
import type { OutputChunk } from "./stream.js";
import { STREAM_SILENCE_MS, base64Bytes, sseEvents } from "./stream.js";

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

/**
 * A process's output as it prints it (`GET .../output?follow=true`): `for await (const chunk of
 * stream)` gets `{stream, data}` chunks, first what the agent's ring kept (`outputDropped` says
 * how much it lost before), then each as the process writes it, until the process ends; then
 * `exitCode` and `signal` are set and `ended` is true. Text is decoded as UTF-8 across chunks.
 * Breaking out of the loop closes the connection; the process runs on. An ended process whose
 * exit a reader has had is forgotten by the agent: NotFound.
 */
export class ProcessStream implements AsyncIterable<OutputChunk> {
  outputDropped = 0;
  exitCode: number | null = null;
  signal: number | null = null;
  ended = false;
  private started = false;

  constructor(private readonly client: Client, private readonly path: string, private readonly abort?: AbortSignal) {}

  async *[Symbol.asyncIterator](): AsyncGenerator<OutputChunk> {
    if (this.started) throw new TypeError("a ProcessStream can be read only once");
    this.started = true;
    const ctl = new AbortController();
    const signal = this.abort ? AbortSignal.any([this.abort, ctl.signal]) : ctl.signal;
    const resp = await this.client.request("GET", this.path, {
      query: { follow: "true" }, timeoutMs: null, ok: [200], signal, headers: { Accept: "text/event-stream" },
    });
    if (!resp.body) throw new TypeError("the stream has no body");
    const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
    try {
      for await (const ev of sseEvents(resp.body, STREAM_SILENCE_MS, () => ctl.abort())) {
        const j = JSON.parse(ev.data);
        if (ev.event === "attached") {
          this.outputDropped = Number(j.output_dropped ?? 0);
        } else if (ev.event === "stdout" || ev.event === "stderr") {
          const bytes = j.data_b64 !== undefined ? base64Bytes(j.data_b64) : new TextEncoder().encode(String(j.data));
          const data = decoders[ev.event].decode(bytes, { stream: true });
          if (data) yield { stream: ev.event, data };
        } else if (ev.event === "exit") {
          for (const s of ["stdout", "stderr"] as const) {
            const rest = decoders[s].decode();
            if (rest) yield { stream: s, data: rest };
          }
          this.exitCode = j.exit_code ?? null;
          this.signal = j.signal ?? null;
          this.ended = true;
          return;
        } else if (ev.event === "error") {
          throw errorFor(undefined, String(j.code ?? "error"), String(j.message ?? ""));
        }
      }
      throw new ConnectionFailed("the output stream ended before the process did", "stream_ended");
    } finally {
      ctl.abort();
    }
  }
}

/** `sandbox.processes`: start, list, kill, sendStdin, output, follow. */
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

  /** Its output live: `for await (const { stream, data } of sandbox.processes.follow(p))` (see ProcessStream). */
  follow(process: Process | number, options: { signal?: AbortSignal } = {}): ProcessStream {
    return new ProcessStream(this.client, `${this.base()}/processes/${idOf(process)}/output`, options.signal);
  }
}
