/**
 * Files inside a sandbox. Paths are absolute guest paths, taken literally
 * (`/../etc` is the guest's `/etc`): nothing outside the VM is reachable
 * through them.
 */
import { NotFound } from "./errors.js";
import { type FileWatch, type FsEvent, type WatchHandle, openWatch, watchHandle } from "./watch.js";
import type { Client } from "./client.js";
import type { FileInfo, FileInfoJSON } from "./types.js";
import { fileInfoFrom } from "./types.js";

export interface WriteOptions {
  /** Permission bits, e.g. 0o644 (the default). */
  mode?: number;
  /** Make missing directories (default true). */
  mkdirs?: boolean;
}

function guest(path: string): string {
  if (typeof path !== "string" || !path.startsWith("/")) {
    throw new TypeError(`guest paths are absolute: ${JSON.stringify(path)}`);
  }
  return path;
}

function putQuery(path: string, o: WriteOptions) {
  const mode = o.mode ?? 0o644;
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777) throw new TypeError("mode must be permission bits, e.g. 0o644");
  return { path: guest(path), mode: mode.toString(8).padStart(4, "0"), mkdirs: o.mkdirs ?? true };
}

/** `sandbox.files`: read, write, list, stat, remove, watch, upload, download. */
export class Files {
  constructor(private readonly client: Client, private readonly base: () => string) {}

  private get url() {
    return `${this.base()}/files`;
  }

  /** The file's bytes; `{ format: "text" }` (E2B's default, not kiln's)
   * decodes them as UTF-8. */
  read(path: string, opts?: { format?: "bytes" }): Promise<Uint8Array>;
  read(path: string, opts: { format: "text" }): Promise<string>;
  async read(path: string, opts: { format?: "bytes" | "text" } = {}): Promise<Uint8Array | string> {
    if (opts.format !== undefined && opts.format !== "bytes" && opts.format !== "text") {
      throw new TypeError(`format is "bytes" or "text", not ${JSON.stringify(opts.format)} (download() streams a file)`);
    }
    const r = await this.client.request("GET", this.url, { query: { path: guest(path) } });
    const bytes = new Uint8Array(await r.arrayBuffer());
    return opts.format === "text" ? new TextDecoder().decode(bytes) : bytes;
  }

  async readText(path: string): Promise<string> {
    return new TextDecoder().decode(await this.read(path));
  }

  /** Create or replace the file (atomically). Returns the bytes written. */
  async write(path: string, data: string | Uint8Array | ArrayBuffer, options: WriteOptions = {}): Promise<number> {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data)
      : data instanceof ArrayBuffer ? new Uint8Array(data) : data;
    if (!(bytes instanceof Uint8Array)) throw new TypeError("data must be a string, Uint8Array or ArrayBuffer");
    const j = await this.client.json<{ size: number }>("PUT", this.url, {
      query: putQuery(path, options), body: bytes as unknown as BodyInit, headers: { "Content-Type": "application/octet-stream" },
    });
    return j.size;
  }

  /** The entries below a directory, depth levels deep (names relative to it). */
  async list(path = "/", options: { depth?: number } = {}): Promise<FileInfo[]> {
    const j = await this.client.json<{ entries: FileInfoJSON[] }>("GET", `${this.url}/list`, {
      query: { path: guest(path), depth: options.depth ?? 1 },
    });
    return j.entries.map(fileInfoFrom);
  }

  /** Type, size, mode, owner and time (a link is not followed). */
  async stat(path: string): Promise<FileInfo> {
    return fileInfoFrom(await this.client.json<FileInfoJSON>("GET", `${this.url}/stat`, { query: { path: guest(path) } }));
  }

  /** E2B's name for stat. */
  async getInfo(path: string): Promise<FileInfo> {
    return this.stat(path);
  }

  async exists(path: string): Promise<boolean> {
    try {
      await this.stat(path);
      return true;
    } catch (e) {
      if (e instanceof NotFound) return false;
      throw e;
    }
  }

  /** Remove a file, or a directory (a non-empty one with recursive). */
  async remove(path: string, options: { recursive?: boolean } = {}): Promise<void> {
    await this.client.empty("DELETE", this.url, { query: { path: guest(path), recursive: options.recursive ?? false } });
  }

  /** Make a directory (and its missing parents; then an existing one is no error). */
  async makeDir(path: string, options: { parents?: boolean; mode?: number } = {}): Promise<void> {
    const mode = options.mode ?? 0o755;
    if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777) throw new TypeError("mode must be permission bits, e.g. 0o755");
    await this.client.empty("POST", `${this.url}/mkdir`, {
      query: { path: guest(path), parents: options.parents ?? true, mode: mode.toString(8).padStart(4, "0") },
      ok: [201],
    });
  }

  /** Move a file or directory within the guest; an existing `to` is a Conflict unless `replace`. */
  async rename(from: string, to: string, options: { replace?: boolean } = {}): Promise<void> {
    await this.client.empty("POST", `${this.url}/rename`, {
      json: { from: guest(from), to: guest(to), replace: options.replace ?? false },
    });
  }

  /**
   * Watch a guest directory (or file): resolves once the guest watches it (NotFound if it does
   * not exist); iterate the result for FsEvents, close() it to stop. A write to one file in many
   * pieces is one `write` event per 100 ms (docs/api.md).
   */
  async watch(path: string, options: { recursive?: boolean; signal?: AbortSignal } = {}): Promise<FileWatch> {
    const query = { path: guest(path), recursive: options.recursive ?? false };
    return openWatch(async () => {
      const ctl = new AbortController();
      const signal = options.signal ? AbortSignal.any([options.signal, ctl.signal]) : ctl.signal;
      const resp = await this.client.request("GET", `${this.url}/watch`, {
        query, timeoutMs: null, ok: [200], signal, headers: { Accept: "text/event-stream" },
      });
      if (!resp.body) throw new TypeError("the stream has no body");
      return { body: resp.body, abort: () => ctl.abort() };
    }, path);
  }

  /** E2B's name: onEvent(FsEvent) for each change until `(await handle).stop()`. */
  async watchDir(path: string, onEvent: (e: FsEvent) => void | Promise<void>,
    options: { recursive?: boolean; onExit?: (err?: unknown) => void } = {}): Promise<WatchHandle> {
    return watchHandle(await this.watch(path, { recursive: options.recursive }), onEvent, options.onExit);
  }

  /** Copy a local file into the sandbox, streamed from disk (Node). */
  async upload(localPath: string, path: string, options: WriteOptions = {}): Promise<number> {
    const fs = await import("node:fs");
    const blob = await fs.openAsBlob(localPath);
    const j = await this.client.json<{ size: number }>("PUT", this.url, {
      query: putQuery(path, options), body: blob, headers: { "Content-Type": "application/octet-stream" },
    });
    return j.size;
  }

  /** Copy a sandbox file to localPath, streamed to disk (Node); the local
   * file appears whole or not at all. Returns its size. */
  async download(path: string, localPath: string): Promise<number> {
    const fs = await import("node:fs/promises");
    const nodePath = await import("node:path");
    const r = await this.client.request("GET", this.url, { query: { path: guest(path) } });
    const dir = nodePath.dirname(nodePath.resolve(localPath));
    const tmp = nodePath.join(dir, `.kiln-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`);
    const fh = await fs.open(tmp, "wx", 0o644);
    let size = 0;
    try {
      if (r.body) {
        for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
          await fh.write(chunk);
          size += chunk.length;
        }
      }
      await fh.close();
      await fs.rename(tmp, localPath);
      return size;
    } catch (e) {
      await fh.close().catch(() => undefined);
      await fs.unlink(tmp).catch(() => undefined);
      throw e;
    }
  }
}
