/** Sandboxes: create, find, run commands and code, files, terminal, lifecycle. */
import type { ConnectOptions } from "./client.js";
import { Client, checkId, resolveClient } from "./client.js";
import { Code, languageOf } from "./code.js";
export { LANGUAGES } from "./code.js";
import type { CodeContext, Execution, RunOptions } from "./code.js";
import { Commands } from "./commands.js";
import { ForkError, NotFound } from "./errors.js";
import { Files } from "./files.js";
import { Processes } from "./processes.js";
import type { PtyOptions } from "./pty.js";
import { Pty } from "./pty.js";
import type { StreamCallbacks } from "./stream.js";
import { ExecStream, STREAM_SILENCE_MS, sseEvents } from "./stream.js";
import type { ExecResult, ExecResultJSON, NetworkPolicyJSON, PortJSON, SandboxJSON, SandboxStatus, Snapshot, SnapshotJSON, VolumeJSON, VolumeMount } from "./types.js";
import { execResultFrom, snapshotFrom } from "./types.js";

export interface CreateOptions extends ConnectOptions {
  /** A template name (the server's default is "base"). */
  template?: string;
  /** Create from a snapshot instead of a template. */
  fromSnapshot?: string;
  /** Idle timeout in seconds (0: never). */
  ttlSeconds?: number;
  /** true: the idle timeout hibernates it instead of deleting it (docs/api.md). */
  persistent?: boolean;
  /** Pause it after this many seconds without a request (0: never); a request resumes it (docs/api.md "Pausing when idle"). */
  idlePauseSeconds?: number;
  metadata?: Record<string, string>;
  /** Environment of every command run in the sandbox. */
  env?: Record<string, string>;
  /** Egress (docs/network.md): if given, the only CIDRs the sandbox may reach. */
  allowOut?: string[];
  /** CIDRs the sandbox may never reach. */
  denyOut?: string[];
  /** false: the sandbox reaches nothing outside itself. */
  allowInternet?: boolean;
  /** Named volumes to mount (Client.createVolume; docs/api.md "Volumes"). */
  volumes?: VolumeMount[];
  /** The root disk in MiB: at least the template's (or snapshot's), at most the plan's disk_mib; its filesystem takes all of it (docs/templates.md "A sandbox's disk size"). Default: the template's size. */
  diskMib?: number;
}

/** An egress policy; fields left out take their defaults. */
export interface NetworkOptions {
  allowOut?: string[];
  denyOut?: string[];
  allowInternet?: boolean;
}

function networkBody(o: NetworkOptions, body: Record<string, unknown>): Record<string, unknown> {
  if (o.allowOut !== undefined) body.allow_out = o.allowOut;
  if (o.denyOut !== undefined) body.deny_out = o.denyOut;
  if (o.allowInternet !== undefined) body.allow_internet = o.allowInternet;
  return body;
}

export interface ExecOptions {
  /** Kill the command after this many seconds (result.timedOut). */
  timeout?: number;
  env?: Record<string, string>;
  cwd?: string;
  /** Fed to the command's standard input, then closed. */
  stdin?: string;
  /** Run as this guest user: a name, a uid or "uid:gid" (default root). */
  user?: string;
  signal?: AbortSignal;
}

export type Command = string | string[];

/** runCode's options: code.run's (envs: the cell's environment variables), and env and cwd, which
 * are refused (envs is the cell's; a context keeps its own working directory). */
export type RunCodeOptions = RunOptions & { env?: Record<string, string>; cwd?: string };

function execBody(cmd: Command, o: Omit<ExecOptions, "signal">): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (typeof cmd === "string") body.cmd = cmd;
  else if (Array.isArray(cmd) && cmd.length > 0) body.argv = cmd.map(String);
  else throw new TypeError("the command must be a string or a non-empty array of strings");
  if (o.timeout !== undefined) {
    if (!(o.timeout >= 0)) throw new TypeError("timeout must be a number of seconds, 0 or more");
    body.timeout_seconds = Math.ceil(o.timeout);  // the server counts whole seconds
  }
  if (o.env !== undefined) body.env = o.env;
  if (o.cwd !== undefined) body.cwd = o.cwd;
  if (o.stdin !== undefined) body.stdin = o.stdin;
  if (o.user !== undefined) body.user = String(o.user);
  return body;
}

/** A line of a sandbox's console (docs/api.md, Logs). */
export interface LogLine {
  /** "init": kiln-init's own line; "console": the guest kernel's or another program's. */
  source: "console" | "init";
  text: string;
  /** Unix seconds, or null: the console records no time. */
  ts: number | null;
}

/** What Sandbox.list and listPage filter on (all must match). */
export interface ListFilter {
  status?: SandboxStatus;
  template?: string;
  metadata?: Record<string, string>;
}

/** A page of the list and the cursor of the next (null on the last). */
export interface SandboxPage {
  sandboxes: Sandbox[];
  nextCursor: string | null;
}

/**
 * A kiln sandbox: a microVM with its own kernel, forked from a template.
 * With `await using`, it is deleted when the block ends, however it ends:
 *
 *     await using sb = await Sandbox.create({ template: "base" });
 *     console.log((await sb.exec("uname -a")).stdout);
 */
export class Sandbox {
  readonly id: string;
  readonly client: Client;
  readonly files: Files;
  readonly processes: Processes;
  /** A stateful code interpreter (contexts keep their variables). */
  readonly code: Code;
  /** E2B's names for running commands (docs/migrating.md). */
  readonly commands: Commands;
  private data: SandboxJSON;

  constructor(client: Client, info: SandboxJSON) {
    this.client = client;
    this.data = info;
    this.id = checkId(info.id);
    this.files = new Files(client, () => this.path);
    this.processes = new Processes(client, () => this.path, execBody);
    this.code = new Code(client, () => this.path);
    this.commands = new Commands(this);
  }

  // ---- finding and making --------------------------------------------------------------------

  /** Create a sandbox from a template or a snapshot; it is running when this resolves. */
  static async create(options: CreateOptions = {}): Promise<Sandbox> {
    const client = resolveClient(options);
    if (options.template !== undefined && options.fromSnapshot !== undefined) {
      throw new TypeError("give either template or fromSnapshot, not both");
    }
    const body: Record<string, unknown> = {};
    if (options.template !== undefined) body.template = options.template;
    if (options.fromSnapshot !== undefined) body.from_snapshot = options.fromSnapshot;
    if (options.ttlSeconds !== undefined) body.ttl_seconds = options.ttlSeconds;
    if (options.volumes !== undefined)
      body.volumes = options.volumes.map((v) => ({ name: v.name, path: v.path, read_only: v.readOnly ?? false }));
    if (options.persistent !== undefined) body.persistent = options.persistent;
    if (options.idlePauseSeconds !== undefined) body.idle_pause_seconds = options.idlePauseSeconds;
    if (options.diskMib !== undefined) body.disk_mib = options.diskMib;
    if (options.metadata !== undefined) body.metadata = options.metadata;
    if (options.env !== undefined) body.env = options.env;
    networkBody(options, body);
    return new Sandbox(client, await client.json<SandboxJSON>("POST", "/v1/sandboxes", { json: body }));
  }

  /** The sandbox with this id (NotFound if the workspace has none). */
  static async get(id: string, options: ConnectOptions = {}): Promise<Sandbox> {
    const client = resolveClient(options);
    return new Sandbox(client, await client.json<SandboxJSON>("GET", `/v1/sandboxes/${checkId(id)}`));
  }

  /** The workspace's sandboxes, oldest first (optionally of one status). */
  /** The workspace's sandboxes that have not ended, oldest first: those of
   * that status, template and metadata (every key/value must match), all of
   * them (the pages followed) or the first `limit`. */
  static async list(options: ConnectOptions & ListFilter & { limit?: number } = {}): Promise<Sandbox[]> {
    const client = resolveClient(options);
    const out: Sandbox[] = [];
    let cursor: string | null = null;
    while (options.limit === undefined || out.length < options.limit) {
      const limit: number = options.limit === undefined ? 1000 : Math.min(1000, options.limit - out.length);
      // The client made once from options (apiKey, apiUrl...), and the filters.
      const { status, template, metadata } = options;
      const page: SandboxPage = await Sandbox.listPage({ status, template, metadata, client, limit, cursor: cursor ?? undefined });
      out.push(...page.sandboxes);
      cursor = page.nextCursor;
      if (cursor === null) break;
    }
    return out;
  }

  /** One page of the list (`limit` 1 to 1000, default 100) and the cursor
   * of the next (null on the last): pass it as `cursor`. */
  static async listPage(
    options: ConnectOptions & ListFilter & { limit?: number; cursor?: string } = {},
  ): Promise<SandboxPage> {
    const client = resolveClient(options);
    const query: Record<string, string | number | undefined> = {
      status: options.status, template: options.template, limit: options.limit, cursor: options.cursor,
    };
    for (const [k, v] of Object.entries(options.metadata ?? {})) query["metadata." + k] = v;
    const j = await client.json<{ sandboxes: SandboxJSON[]; next_cursor?: string | null }>(
      "GET", "/v1/sandboxes", { query });
    return { sandboxes: j.sandboxes.map((s) => new Sandbox(client, s)), nextCursor: j.next_cursor ?? null };
  }

  // ---- what it is ------------------------------------------------------------------------------

  /** The sandbox as the server last described it (docs/api.md, Sandbox). */
  get info(): SandboxJSON {
    return { ...this.data };
  }
  get status(): SandboxStatus {
    return this.data.status;
  }
  get template(): string {
    return this.data.template;
  }
  get metadata(): Record<string, string> {
    return { ...(this.data.metadata ?? {}) };
  }
  get ttlSeconds(): number {
    return this.data.ttl_seconds;
  }
  /** Hibernated when idle and never deleted by its TTL. */
  get persistent(): boolean {
    return this.data.persistent === true;
  }
  /** Paused after this many idle seconds (0: never). */
  get idlePauseSeconds(): number {
    return this.data.idle_pause_seconds ?? 0;
  }
  get parentId(): string | null {
    return this.data.parent_id;
  }
  /** Its root disk's size in MiB: the template's, or the create's diskMib (null: unknown). */
  get diskMib(): number | null {
    return this.data.disk_mib ?? null;
  }
  get readyMs(): number | null {
    return this.data.ready_ms;
  }

  private get path(): string {
    return `/v1/sandboxes/${this.id}`;
  }

  /** Read the sandbox's state again from the server. */
  async refresh(): Promise<this> {
    this.data = await this.client.json<SandboxJSON>("GET", this.path);
    return this;
  }

  toString(): string {
    return `Sandbox(${this.id} ${this.status} ${this.template})`;
  }

  // ---- commands ----------------------------------------------------------------------------------

  /** Run a command to its end: a string runs with /bin/sh -c, an array is the argv.
   * A non-zero exit is a result, not an error. */
  async exec(cmd: Command, options: ExecOptions = {}): Promise<ExecResult> {
    const j = await this.client.json<ExecResultJSON>("POST", `${this.path}/exec`, {
      json: execBody(cmd, options),
      // The answer comes when the command ends: wait for it (without a
      // bound when the command has none: 0 is no limit).
      timeoutMs: options.timeout ? (Math.ceil(options.timeout) + 60) * 1000 : null,
      signal: options.signal,
    });
    return execResultFrom(j);
  }

  /** Run a command and get its output as it comes: iterate the stream
   * (`for await (const chunk of sb.execStream(...))`), or give callbacks
   * and `await stream.wait()`. */
  execStream(cmd: Command, options: ExecOptions & StreamCallbacks = {}): ExecStream {
    const body = execBody(cmd, options);
    return new ExecStream(async () => {
      const ctl = new AbortController();
      const signal = options.signal ? AbortSignal.any([options.signal, ctl.signal]) : ctl.signal;
      const resp = await this.client.request("POST", `${this.path}/exec/stream`, {
        json: body, timeoutMs: null, ok: [200], signal, headers: { Accept: "text/event-stream" },
      });
      if (!resp.body) throw new TypeError("the stream has no body");
      return { body: resp.body, abort: () => ctl.abort() };
    }, { onStdout: options.onStdout, onStderr: options.onStderr });
  }

  /**
   * Run code, as E2B's runCode: in the sandbox's code interpreter, in `options.context` or the
   * language's default context, which keeps its state between calls: python's variables (`x = 41`,
   * then `x + 1` is 42), bash's and sh's variables, functions, exports and working directory,
   * javascript's globals (node: the code-interpreter template has it; a cell may `await` at top
   * level, its value the awaited one, its `let`/`const` kept for the next cell). `language` is python
   * (default), bash, sh or javascript (js, node); with a context, the context's. An error is
   * `execution.error` (name, value, traceback; bash: a failing last command is NonZeroExit) and the
   * context lives on. `options.envs` are environment variables of this cell only, as E2B's. `env`
   * and `cwd` are refused: envs is the cell's, and a context has its own working directory
   * (`createCodeContext({ cwd })`, `cd` in bash).
   */
  async runCode(code: string, language?: string, options: RunCodeOptions = {}): Promise<Execution> {
    let lang: string | undefined = languageOf(language);
    if (options.env !== undefined || options.cwd !== undefined) {
      throw new TypeError("env and cwd: a cell's variables are envs; a context keeps its own working directory: createCodeContext({ cwd }), or cd in a bash cell (it lasts)");
    }
    const { context, timeout, envs, onStdout, onStderr, onResult, onError } = options;
    if (lang === undefined && context === undefined) lang = "python";
    return this.code.run(code, { language: lang, context, timeout, envs, onStdout, onStderr, onResult, onError });
  }

  // E2B's names for contexts (docs/migrating.md).
  /** A new context of `language` (default python) with its own state. */
  async createCodeContext(options: { cwd?: string; language?: string } = {}): Promise<CodeContext> {
    return this.code.createContext(options);
  }

  async listCodeContexts(): Promise<CodeContext[]> {
    return this.code.listContexts();
  }

  async restartCodeContext(context: CodeContext | string): Promise<void> {
    return this.code.restartContext(context);
  }

  async removeCodeContext(context: CodeContext | string): Promise<void> {
    return this.code.deleteContext(context);
  }

  /** An interactive terminal (a WebSocket): the login shell, or options.cmd. */
  async pty(options: PtyOptions = {}): Promise<Pty> {
    return Pty.open(this.client, `${this.path}/pty`, options);
  }

  // ---- logs ----------------------------------------------------------------------------------------

  /** The last `tail` lines (0 to 10000, default 200) of the sandbox's console,
   * oldest first (docs/api.md, Logs). Reading logs is not activity (TTL). */
  async logs(options: { tail?: number } = {}): Promise<LogLine[]> {
    const j = await this.client.json<{ lines: LogLine[] }>("GET", `${this.path}/logs`, {
      query: { tail: options.tail ?? 200 },
    });
    return j.lines;
  }

  /** The last `tail` lines, then each new one as the guest writes it, until
   * the sandbox ends (deleted or failed). Breaking out of the loop closes
   * the connection. */
  async *followLogs(options: { tail?: number; signal?: AbortSignal } = {}): AsyncGenerator<LogLine> {
    const ctl = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, ctl.signal]) : ctl.signal;
    const resp = await this.client.request("GET", `${this.path}/logs`, {
      query: { tail: options.tail ?? 200, follow: "true" }, timeoutMs: null, ok: [200], signal,
      headers: { Accept: "text/event-stream" },
    });
    if (!resp.body) throw new TypeError("the stream has no body");
    try {
      for await (const ev of sseEvents(resp.body, STREAM_SILENCE_MS, () => ctl.abort())) {
        if (ev.event === "line") yield JSON.parse(ev.data) as LogLine;
        else if (ev.event === "end") return;
      }
    } finally {
      ctl.abort();
    }
  }

  // ---- lifecycle -----------------------------------------------------------------------------------

  /** Snapshot memory, devices and disk; the sandbox runs on. */
  async snapshot(): Promise<Snapshot> {
    return snapshotFrom(await this.client.json<SnapshotJSON>("POST", `${this.path}/snapshot`, { json: {} }));
  }

  /** Save the sandbox to disk and stop its VM; any request that needs it wakes it. */
  async hibernate(): Promise<this> {
    this.data = await this.client.json<SandboxJSON>("POST", `${this.path}/hibernate`, { json: {} });
    return this;
  }

  /** Stop its vCPUs, keeping memory, processes and network (no CPU billed; memory is).
   * Cheaper to come back from than hibernate; any request that needs the guest resumes it. */
  async pause(): Promise<this> {
    this.data = await this.client.json<SandboxJSON>("POST", `${this.path}/pause`, { json: {} });
    return this;
  }

  /** Start a paused sandbox's vCPUs again. */
  async resume(): Promise<this> {
    this.data = await this.client.json<SandboxJSON>("POST", `${this.path}/resume`, { json: {} });
    return this;
  }
  /**
   * Mount the workspace's volume `name` at `path` in this running sandbox
   * (its lowest free volume slot; a hibernated one is woken). A Conflict
   * for the one-writer rule, a path or volume it has already, or no free
   * slot. Resolves to the volume as the API gives it.
   */
  async attachVolume(name: string, path: string, options: { readOnly?: boolean } = {}): Promise<VolumeJSON> {
    return this.client.json<VolumeJSON>("POST", `${this.path}/volumes`, {
      json: { name, path, read_only: options.readOnly ?? false },
    });
  }

  /**
   * Sync, unmount and let go a volume (its name or id): a Conflict, naming what holds it, while the guest uses the
   * mount; with `force`, those processes are killed first.
   */
  async detachVolume(volume: string, options: { force?: boolean } = {}): Promise<void> {
    await this.client.empty("DELETE", `${this.path}/volumes/${encodeURIComponent(volume)}${options.force ? "?force=true" : ""}`);
  }


  async wake(): Promise<this> {
    this.data = await this.client.json<SandboxJSON>("POST", `${this.path}/wake`, { json: {} });
    return this;
  }

  /** count copies of this running sandbox, memory and disk (one pause per child). */
  async fork(count = 1): Promise<Sandbox[]> {
    return this.forkVia("fork", count);
  }

  /** count identical copies made in a single pause. */
  async forkTree(count: number): Promise<Sandbox[]> {
    return this.forkVia("fork_tree", count);
  }

  /** Keep this child of a fork and delete its siblings (and the parent with deleteParent). */
  async promote(options: { deleteParent?: boolean } = {}): Promise<{
    kept: string; parent: string; deleted: string[]; parent_deleted: boolean;
    failed: { id: string; parent: boolean; error: string }[];
  }> {
    return this.client.json("POST", `${this.path}/promote`, { json: { delete_parent: options.deleteParent ?? false } });
  }

  private async forkVia(route: string, count: number): Promise<Sandbox[]> {
    if (!Number.isInteger(count) || count < 1) throw new TypeError("count must be a positive integer");
    const j = await this.client.json<{ sandboxes: SandboxJSON[]; failed?: number; error?: string }>(
      "POST", `${this.path}/${route}`, { json: { count } });
    const kids = j.sandboxes.map((s) => new Sandbox(this.client, s));
    if (j.failed) throw new ForkError(`${j.failed} of ${count} forks failed: ${j.error ?? ""}`, kids, j.failed);
    return kids;
  }

  /** Change the idle timeout (0: never deleted for idleness). */
  /** Make a TCP port of the guest (a server on its 127.0.0.1) reachable
   * through kilnd; resolves to its URL. Requests need this workspace's API
   * key unless `public`. Exposing it again changes only `public`. */
  async exposePort(port: number, options: { public?: boolean } = {}): Promise<string> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new RangeError("port must be an integer from 1 to 65535");
    }
    const j = await this.client.json<PortJSON>("POST", `${this.path}/ports`, {
      json: { port, public: options.public ?? false },
    });
    return j.url;
  }

  /** A signed link to an exposed port (private ones too) that needs no API key for ttlSeconds (60 to 604800). */
  async previewUrl(port: number, options: { ttlSeconds?: number } = {}): Promise<string> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError("port must be an integer from 1 to 65535");
    const ttl = options.ttlSeconds ?? 3600;
    if (!Number.isInteger(ttl) || ttl < 60 || ttl > 604800) throw new RangeError("ttlSeconds must be whole seconds from 60 to 604800");
    const j = await this.client.json<{ url: string }>("POST", `${this.path}/ports/${port}/preview`, { json: { ttl_seconds: ttl } });
    return j.url;
  }

  /** The exposed ports. */
  async ports(): Promise<PortJSON[]> {
    return (await this.client.json<{ ports: PortJSON[] }>("GET", `${this.path}/ports`)).ports;
  }

  /** Stop exposing a port (NotFound if it was not). */
  async unexposePort(port: number): Promise<void> {
    if (!Number.isInteger(port)) throw new RangeError("port must be an integer");
    await this.client.empty("DELETE", `${this.path}/ports/${port}`);
  }

  async setTtl(seconds: number): Promise<this> {
    this.data = await this.client.json<SandboxJSON>("PATCH", `${this.path}/lifecycle`, { json: { ttl_seconds: seconds } });
    return this;
  }

  /** true: its idle timeout hibernates it instead of deleting it; false: the plan's TTL rule again. */
  async setPersistent(persistent = true): Promise<this> {
    if (typeof persistent !== "boolean") throw new TypeError("persistent must be a boolean");
    this.data = await this.client.json<SandboxJSON>("PATCH", `${this.path}/lifecycle`, { json: { persistent } });
    return this;
  }

  /** Pause it after this many seconds without a request, before its TTL acts (0: never); a request resumes it. */
  async setIdlePause(seconds: number): Promise<this> {
    if (!Number.isInteger(seconds) || seconds < 0 || seconds > 604800) throw new RangeError("seconds must be whole seconds from 0 to 604800");
    this.data = await this.client.json<SandboxJSON>("PATCH", `${this.path}/lifecycle`, { json: { idle_pause_seconds: seconds } });
    return this;
  }

  /** Replace the egress policy; in force for new connections when this resolves. */
  async setNetwork(options: NetworkOptions = {}): Promise<this> {
    this.data = await this.client.json<SandboxJSON>("PUT", `${this.path}/network`, { json: networkBody(options, {}) });
    return this;
  }

  /** The egress policy, canonical (CIDRs with their prefix length). */
  get network(): NetworkPolicyJSON | undefined {
    return this.data.network ? { ...this.data.network } : undefined;
  }

  /** Delete the sandbox: its VM, disk and network. */
  async delete(): Promise<void> {
    await this.client.empty("DELETE", this.path);
    this.data = { ...this.data, status: "deleted" };
  }

  // ---- E2B's names (docs/migrating.md): thin wrappers, kiln's meaning kept where it differs ----

  /** E2B's name for `id`. */
  get sandboxId(): string {
    return this.id;
  }

  /** E2B's name for Sandbox.get: the sandbox with this id. A hibernated one
   * stays so until a call needs its guest, which wakes it. */
  static async connect(sandboxId: string, options: ConnectOptions = {}): Promise<Sandbox> {
    return Sandbox.get(sandboxId, options);
  }

  /** E2B's Sandbox.kill(id): delete it; true, or false if it was gone already. */
  static async kill(sandboxId: string, options: ConnectOptions = {}): Promise<boolean> {
    const client = resolveClient(options);
    return new Sandbox(client, { id: checkId(sandboxId) } as SandboxJSON).kill();
  }

  /** E2B's name for delete: true, or false if it was gone already. */
  async kill(): Promise<boolean> {
    try {
      await this.delete();
      return true;
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
      this.data = { ...this.data, status: "deleted" };
      return false;
    }
  }

  /** E2B's setTimeout: setTtl in ms (rounded up to whole seconds). kiln's
   * TTL is an idle timeout, counted again from each activity (docs/api.md),
   * where E2B's is a deadline. */
  async setTimeout(timeoutMs: number): Promise<void> {
    if (!(timeoutMs >= 0)) throw new TypeError("timeoutMs must be a number of ms, 0 or more");
    await this.setTtl(Math.ceil(timeoutMs / 1000));
  }

  /** E2B's getHost, but a promise: where a guest port is reached, without a
   * scheme, for `http://${host}/...` (https when kilnd serves TLS). The port
   * is exposed first if it is not yet (private: requests need the API key;
   * `exposePort(port, { public: true })` before makes it public, and getHost
   * leaves that as it is). With kilnd's --domain it is the port's own host
   * name; without, kilnd's host and the port's path. */
  async getHost(port: number): Promise<string> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new RangeError("port must be an integer from 1 to 65535");
    }
    const entry = (await this.ports()).find((p) => p.port === port)
      ?? await this.client.json<PortJSON>("POST", `${this.path}/ports`, { json: { port, public: false } });
    const u = new URL(entry.host_url ?? entry.url);
    return u.host + u.pathname.replace(/\/+$/, "");
  }

  /** `await using`: delete the sandbox (gone already is fine). */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.delete();
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
    }
  }
}
