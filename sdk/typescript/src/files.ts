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

/** Every files method takes `user`: a guest user name, uid or "uid:gid".
 * The guest then acts as that user, with its permissions (PermissionDenied
 * for a file it may not read), and new files are its own; an unknown user
 * is InvalidRequest. Default: root. */
export interface UserOption {
  user?: string;
}

export interface WriteOptions extends UserOption {
  /** Permission bits, e.g. 0o644 (the default). */
  mode?: number;
  /** Make missing directories (default true). */
  mkdirs?: boolean;
}

/** One file of a multi-file write: text or bytes. */
export interface WriteEntry {
  path: string;
  data: string | Uint8Array | ArrayBuffer;
  mode?: number;
}

function modeBits(mode: number): string {
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777) throw new TypeError("mode must be permission bits, e.g. 0o644");
  return mode.toString(8).padStart(4, "0");
}

function base64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
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
  return { path: guest(path), mode: mode.toString(8).padStart(4, "0"), mkdirs: o.mkdirs ?? true, user: o.user };
}

/** `sandbox.files`: read, write (one file or many), list, stat, remove, makeDir, rename, copy,
 * chmod, watch, upload, download, uploadDir, downloadDir; each with a `user` option. */
export class Files {
  constructor(private readonly client: Client, private readonly base: () => string) {}

  private get url() {
    return `${this.base()}/files`;
  }

  /** The file's bytes; `{ format: "text" }` (E2B's default, not kiln's)
   * decodes them as UTF-8. */
  read(path: string, opts?: { format?: "bytes" } & UserOption): Promise<Uint8Array>;
  read(path: string, opts: { format: "text" } & UserOption): Promise<string>;
  async read(path: string, opts: { format?: "bytes" | "text" } & UserOption = {}): Promise<Uint8Array | string> {
    if (opts.format !== undefined && opts.format !== "bytes" && opts.format !== "text") {
      throw new TypeError(`format is "bytes" or "text", not ${JSON.stringify(opts.format)} (download() streams a file)`);
    }
    const r = await this.client.request("GET", this.url, { query: { path: guest(path), user: opts.user } });
    const bytes = new Uint8Array(await r.arrayBuffer());
    return opts.format === "text" ? new TextDecoder().decode(bytes) : bytes;
  }

  async readText(path: string, options: UserOption = {}): Promise<string> {
    return new TextDecoder().decode(await this.read(path, options));
  }

  /** Create or replace the file (atomically). Returns the bytes written. E2B's form,
   * `write([{ path, data }, ...])`, writes them all in one request (writeMany). */
  write(path: string, data: string | Uint8Array | ArrayBuffer, options?: WriteOptions): Promise<number>;
  write(files: WriteEntry[], options?: UserOption): Promise<Array<{ path: string; size: number }>>;
  async write(path: string | WriteEntry[], data?: string | Uint8Array | ArrayBuffer | UserOption,
    options: WriteOptions = {}): Promise<number | Array<{ path: string; size: number }>> {
    if (Array.isArray(path)) return this.writeMany(path, (data as UserOption | undefined) ?? {});
    const bytes = typeof data === "string" ? new TextEncoder().encode(data)
      : data instanceof ArrayBuffer ? new Uint8Array(data) : data;
    if (!(bytes instanceof Uint8Array)) throw new TypeError("data must be a string, Uint8Array or ArrayBuffer");
    const j = await this.client.json<{ size: number }>("PUT", this.url, {
      query: putQuery(path, options), body: bytes as unknown as BodyInit, headers: { "Content-Type": "application/octet-stream" },
    });
    return j.size;
  }

  /** Write several files in one request. All or none: a failure while writing changes no
   * file (docs/api.md). At most 1000 files and 64 MiB. */
  async writeMany(files: WriteEntry[], options: UserOption = {}): Promise<Array<{ path: string; size: number }>> {
    const out = files.map((f, i) => {
      if (!f || typeof f !== "object" || !("path" in f) || !("data" in f)) {
        throw new TypeError(`files[${i}] must be { path, data }`);
      }
      const e: Record<string, string> = { path: guest(f.path) };
      if (typeof f.data === "string") e.content = f.data;
      else if (f.data instanceof Uint8Array || f.data instanceof ArrayBuffer) {
        e.content_base64 = base64(f.data instanceof ArrayBuffer ? new Uint8Array(f.data) : f.data);
      } else throw new TypeError(`files[${i}].data must be a string, Uint8Array or ArrayBuffer`);
      if (f.mode !== undefined) e.mode = modeBits(f.mode);
      return e;
    });
    const j = await this.client.json<{ files: Array<{ path: string; size: number }> }>("POST", `${this.url}/write`, {
      query: { user: options.user }, json: { files: out },
    });
    return j.files;
  }

  /** The entries below a directory, depth levels deep (names relative to it). */
  async list(path = "/", options: { depth?: number } & UserOption = {}): Promise<FileInfo[]> {
    const j = await this.client.json<{ entries: FileInfoJSON[] }>("GET", `${this.url}/list`, {
      query: { path: guest(path), depth: options.depth ?? 1, user: options.user },
    });
    return j.entries.map(fileInfoFrom);
  }

  /** Type, size, mode, owner and time (a link is not followed). */
  async stat(path: string, options: UserOption = {}): Promise<FileInfo> {
    return fileInfoFrom(await this.client.json<FileInfoJSON>("GET", `${this.url}/stat`, {
      query: { path: guest(path), user: options.user },
    }));
  }

  /** E2B's name for stat. */
  async getInfo(path: string, options: UserOption = {}): Promise<FileInfo> {
    return this.stat(path, options);
  }

  async exists(path: string, options: UserOption = {}): Promise<boolean> {
    try {
      await this.stat(path, options);
      return true;
    } catch (e) {
      if (e instanceof NotFound) return false;
      throw e;
    }
  }

  /** Remove a file, or a directory (a non-empty one with recursive). */
  async remove(path: string, options: { recursive?: boolean } & UserOption = {}): Promise<void> {
    await this.client.empty("DELETE", this.url, {
      query: { path: guest(path), recursive: options.recursive ?? false, user: options.user },
    });
  }

  /** Make a directory (and its missing parents; then an existing one is no error). */
  async makeDir(path: string, options: { parents?: boolean; mode?: number } & UserOption = {}): Promise<void> {
    const mode = options.mode ?? 0o755;
    if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777) throw new TypeError("mode must be permission bits, e.g. 0o755");
    await this.client.empty("POST", `${this.url}/mkdir`, {
      query: { path: guest(path), parents: options.parents ?? true, mode: mode.toString(8).padStart(4, "0"), user: options.user },
      ok: [201],
    });
  }

  /** Move a file or directory within the guest; an existing `to` is a Conflict unless `replace`. */
  async rename(from: string, to: string, options: { replace?: boolean } & UserOption = {}): Promise<void> {
    await this.client.empty("POST", `${this.url}/rename`, {
      query: { user: options.user }, json: { from: guest(from), to: guest(to), replace: options.replace ?? false },
    });
  }

  /** Another name for rename. */
  async move(from: string, to: string, options: { replace?: boolean } & UserOption = {}): Promise<void> {
    await this.rename(from, to, options);
  }

  /** Copy a file, or with `recursive` a directory tree, inside the guest (modes, times and
   * symlinks kept). `to` names the copy; an existing one is a Conflict unless `replace`.
   * NotFound for a missing `from`; InvalidRequest for a directory copied into itself. */
  async copy(from: string, to: string, options: { recursive?: boolean; replace?: boolean } & UserOption = {}): Promise<void> {
    await this.client.empty("POST", `${this.url}/copy`, {
      query: { user: options.user },
      json: { from: guest(from), to: guest(to), recursive: options.recursive ?? false, replace: options.replace ?? false },
    });
  }

  /** Set a path's permission bits (0 to 0o7777; symlinks followed). */
  async chmod(path: string, mode: number, options: UserOption = {}): Promise<void> {
    await this.client.empty("POST", `${this.url}/chmod`, {
      query: { user: options.user }, json: { path: guest(path), mode: modeBits(mode) },
    });
  }

  /** Copy a local directory tree into the sandbox's directory `path` (made with its parents)
   * as one tar archive: files, directories and symlinks with their modes (Node). Returns the
   * archive's size. */
  async uploadDir(localDir: string, path: string, options: UserOption = {}): Promise<number> {
    const { packDir } = await import("./tar.js");
    const blob = await packDir(localDir);
    await this.client.json("PUT", `${this.url}/archive`, {
      query: { path: guest(path), user: options.user }, body: blob, headers: { "Content-Type": "application/x-tar" },
    });
    return blob.size;
  }

  /** Copy the sandbox's directory tree `path` into localDir (made if missing), as a tar
   * archive (Node). Names that would leave localDir and device nodes are refused. Returns the
   * number of entries. */
  async downloadDir(path: string, localDir: string, options: UserOption = {}): Promise<number> {
    const { unpack } = await import("./tar.js");
    const r = await this.client.request("GET", `${this.url}/archive`, { query: { path: guest(path), user: options.user } });
    return unpack(new Uint8Array(await r.arrayBuffer()), localDir);
  }

  /**
   * Watch a guest directory (or file): resolves once the guest watches it (NotFound if it does
   * not exist); iterate the result for FsEvents, close() it to stop. A write to one file in many
   * pieces is one `write` event per 100 ms (docs/api.md).
   */
  async watch(path: string, options: { recursive?: boolean; signal?: AbortSignal } & UserOption = {}): Promise<FileWatch> {
    const query = { path: guest(path), recursive: options.recursive ?? false, user: options.user };
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
    options: { recursive?: boolean; onExit?: (err?: unknown) => void } & UserOption = {}): Promise<WatchHandle> {
    return watchHandle(await this.watch(path, { recursive: options.recursive, user: options.user }), onEvent, options.onExit);
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
  async download(path: string, localPath: string, options: UserOption = {}): Promise<number> {
    const fs = await import("node:fs/promises");
    const nodePath = await import("node:path");
    const r = await this.client.request("GET", this.url, { query: { path: guest(path), user: options.user } });
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
