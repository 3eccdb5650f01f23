/**
 * Watching a guest directory (docs/api.md, Files: watch): changes as they
 * happen, from `sandbox.files.watch(path)` (an async iterator) or E2B's
 * `files.watchDir(path, onEvent)` (a callback).
 */
import { NotFound, errorFor } from "./errors.js";
import { sseEvents, type SseEvent } from "./stream.js";

/** kilnd sends a comment every 15 s; this much silence means it is gone. */
export const WATCH_SILENCE_MS = 60_000;

/**
 * One change: `type` is create, write, remove, rename (`moved` says "from" or "to") or chmod;
 * `name` is relative to the watched path ("" for the path itself). `overflow` and `gone` are
 * the stream's own: events were lost, or the watched path went away (the watch then ends).
 */
export interface FsEvent {
  type: "create" | "write" | "remove" | "rename" | "chmod" | "overflow" | "gone";
  name: string;
  dir: boolean;
  moved?: "from" | "to";
}

/** An open watch: iterate it for FsEvents; close() ends it. */
export class FileWatch implements AsyncIterable<FsEvent> {
  private closed = false;

  constructor(private readonly events: AsyncGenerator<SseEvent>, private readonly abort: () => void) {}

  async *[Symbol.asyncIterator](): AsyncGenerator<FsEvent> {
    try {
      for await (const ev of this.events) {
        const j = JSON.parse(ev.data);
        if (ev.event === "fs") {
          yield { type: j.type, name: j.name, dir: Boolean(j.dir), ...(j.moved ? { moved: j.moved } : {}) };
        } else if (ev.event === "overflow") {
          yield { type: "overflow", name: "", dir: false };
        } else if (ev.event === "gone") {
          yield { type: "gone", name: "", dir: false };
          return;
        } else if (ev.event === "error") {
          throw errorFor(undefined, String(j.code ?? "error"), String(j.message ?? ""));
        }
      }
    } catch (e) {
      if (!this.closed) throw e;
    } finally {
      this.close();
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.abort();
  }
}

/** E2B's watch handle: events go to a callback until stop(). */
export interface WatchHandle {
  stop(): Promise<void>;
}

/** Open the stream and wait for kilnd's `ready` (the guest watches the path from then on). */
export async function openWatch(open: () => Promise<{ body: ReadableStream<Uint8Array>; abort: () => void }>,
  path: string): Promise<FileWatch> {
  const { body, abort } = await open();
  const events = sseEvents(body, WATCH_SILENCE_MS, abort);
  let first: IteratorResult<SseEvent>;
  try {
    first = await events.next();
  } catch (e) {
    abort();
    throw e;
  }
  if (first.done || first.value.event !== "ready") {
    abort();
    throw new NotFound(`the watch of ${path} did not start`, "watch_failed");
  }
  return new FileWatch(events, abort);
}

/** Run a watch's events into onEvent until stop(); onExit gets the error that ended it, if any. */
export function watchHandle(w: FileWatch, onEvent: (e: FsEvent) => void | Promise<void>,
  onExit?: (err?: unknown) => void): WatchHandle {
  const done = (async () => {
    let err: unknown;
    try {
      for await (const ev of w) await onEvent(ev);
    } catch (e) {
      err = e;
    }
    onExit?.(err);
  })();
  return {
    async stop() {
      w.close();
      await done;
    },
  };
}
