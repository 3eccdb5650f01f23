/**
 * Streaming exec: the Server-Sent Events of POST .../exec/stream as an
 * async iterator of output chunks, and the command's result.
 */
import { ConnectionFailed, Timeout, errorFor } from "./errors.js";
import type { ExecResult, ExecResultJSON } from "./types.js";
import { execResultFrom } from "./types.js";

/** The server sends a keepalive every 15 s: a minute of silence is a dead connection. */
export const STREAM_SILENCE_MS = 60_000;

export interface OutputChunk {
  stream: "stdout" | "stderr";
  /** The chunk as text (UTF-8 decoded across chunk boundaries; invalid bytes become U+FFFD). */
  data: string;
}

export interface SseEvent {
  event: string;
  data: string;
  /** The event's id line, when it had one. */
  id?: string;
}

/** Server-Sent Events from a byte stream. */
export async function* sseEvents(body: ReadableStream<Uint8Array>, silenceMs: number,
  abort: () => void): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let event = "message";
  let data: string[] = [];
  let id: string | undefined;
  try {
    for (;;) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const silence = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          abort();
          reject(new Timeout(`no data from kilnd for ${silenceMs} ms`, "client_timeout"));
        }, silenceMs);
      });
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await Promise.race([reader.read(), silence]);
      } catch (e) {
        if (e instanceof Timeout) throw e;
        throw new ConnectionFailed(`the stream from kilnd broke: ${String(e)}`, "connection_error", undefined, { cause: e });
      } finally {
        clearTimeout(timer);
      }
      if (r.done) return;
      buf += decoder.decode(r.value, { stream: true });
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).replace(/\r$/, "");
        buf = buf.slice(i + 1);
        if (line === "") {
          if (data.length) yield id === undefined ? { event, data: data.join("\n") } : { event, data: data.join("\n"), id };
          event = "message";
          data = [];
          id = undefined;
        } else if (!line.startsWith(":")) {
          const c = line.indexOf(":");
          const name = c < 0 ? line : line.slice(0, c);
          let value = c < 0 ? "" : line.slice(c + 1);
          if (value.startsWith(" ")) value = value.slice(1);
          if (name === "event") event = value;
          else if (name === "data") data.push(value);
          else if (name === "id") id = value;
        }
      }
    }
  } finally {
    reader.releaseLock();
  }
}

export function base64Bytes(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export interface StreamCallbacks {
  onStdout?: (data: string) => void;
  onStderr?: (data: string) => void;
}

/**
 * A running command's output. Iterate it (`for await`) to get chunks as
 * they come; `result` resolves when the command ends (and rejects if the
 * stream fails). `wait()` reads whatever is left and returns the result.
 * Breaking out of the iteration, or `cancel()`, closes the connection,
 * which kills the command.
 */
export class ExecStream implements AsyncIterable<OutputChunk> {
  readonly result: Promise<ExecResult>;
  private resolve!: (r: ExecResult) => void;
  private reject!: (e: unknown) => void;
  private started = false;
  private readonly out = { stdout: [] as string[], stderr: [] as string[] };

  constructor(private readonly open: () => Promise<{ body: ReadableStream<Uint8Array>; abort: () => void }>,
    private readonly callbacks: StreamCallbacks = {}) {
    this.result = new Promise<ExecResult>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // Whoever does not await result must not get an unhandled rejection.
    this.result.catch(() => undefined);
  }

  private abortFn: (() => void) | undefined;

  async *[Symbol.asyncIterator](): AsyncGenerator<OutputChunk> {
    if (this.started) throw new TypeError("an ExecStream can be read only once");
    this.started = true;
    let finished = false;
    try {
      const { body, abort } = await this.open();
      this.abortFn = abort;
      const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
      for await (const ev of sseEvents(body, STREAM_SILENCE_MS, abort)) {
        const j = JSON.parse(ev.data);
        if (ev.event === "stdout" || ev.event === "stderr") {
          const bytes = j.data_b64 !== undefined ? base64Bytes(j.data_b64) : new TextEncoder().encode(j.data);
          const text = decoders[ev.event].decode(bytes, { stream: true });
          if (text) yield* this.emit(ev.event, text);
        } else if (ev.event === "exit") {
          for (const s of ["stdout", "stderr"] as const) {
            const rest = decoders[s].decode();
            if (rest) yield* this.emit(s, rest);
          }
          finished = true;
          this.resolve(execResultFrom(j as ExecResultJSON, this.out.stdout.join(""), this.out.stderr.join("")));
        } else if (ev.event === "error") {
          throw errorFor(undefined, String(j.code ?? "error"), String(j.message ?? ""));
        }
      }
      if (!finished) throw new ConnectionFailed("the output stream ended without the command's exit", "stream_ended");
    } catch (e) {
      this.reject(e);
      throw e;
    } finally {
      if (!finished) {
        this.abortFn?.();
        this.reject(new ConnectionFailed("the stream was closed before the command ended", "stream_closed"));
      }
    }
  }

  private *emit(stream: "stdout" | "stderr", data: string): Generator<OutputChunk> {
    this.out[stream].push(data);
    const cb = stream === "stdout" ? this.callbacks.onStdout : this.callbacks.onStderr;
    cb?.(data);
    yield { stream, data };
  }

  /** Read the rest of the output (callbacks still see it) and return the result. */
  async wait(): Promise<ExecResult> {
    if (!this.started) {
      for await (const _ of this) { /* drained: callbacks and result see it */ }
    }
    return this.result;
  }

  /** Close the connection: the command is killed. */
  cancel(): void {
    this.abortFn?.();
  }
}
