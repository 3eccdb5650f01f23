/**
 * The connection to a kilnd: where it is, the API key, and HTTP over the
 * runtime's fetch (which keeps connections alive and reuses them).
 *
 * Retries: only idempotent requests (GET, PUT, DELETE) are retried, after a
 * network failure, 429 (after Retry-After), 502, 503 or 504, a few times
 * with backoff. POST and PATCH are sent once: a create or an exec that may
 * have happened is never repeated behind the caller's back.
 */
import {
  API_KEY, ConnectionFailed, KilnError, RateLimited, Timeout, errorFor,
} from "./errors.js";
import { EventStream, type EventsOptions } from "./events.js";
import { STREAM_SILENCE_MS, sseEvents } from "./stream.js";
import type { Credential } from "./errors.js";
import type {
  ApiKeyJSON, AppDeployOptions, AppJSON, AppLogEntry, AppLogsJSON, AppOptions, AuditAllQuery, AuditEntryJSON, AuditPage, AuditQuery, BillingJSON, KeyOptions, LimitsJSON, NewKeyJSON,
  Snapshot, SnapshotJSON, StatementJSON, VolumeJSON, TemplateJSON, UsageBucketsJSON, UsageJSON, UsageQuery, When,
} from "./types.js";
import { snapshotFrom } from "./types.js";

export const DEFAULT_URL = "http://127.0.0.1:7070";
const IDEMPOTENT = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);
const RETRY_STATUSES = new Set([429, 502, 503, 504]);
const USER_AGENT = "kiln-typescript/0.1.0";

export interface ClientOptions {
  /** Default: KILN_API_URL, else http://127.0.0.1:7070. */
  apiUrl?: string;
  /** Default: KILN_API_KEY. */
  apiKey?: string;
  /** Bound on each request in ms (null: none); exec waits for its command. Default 300000. */
  timeoutMs?: number | null;
  /** Retries of idempotent requests. Default 3. */
  maxRetries?: number;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
  /** What apiKey is, for AuthError's message (default: an API key; the Admin client's: an operator credential). */
  credential?: Credential;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined | null>;
  json?: unknown;
  body?: BodyInit;
  headers?: Record<string, string>;
  /** undefined: the client's; null: no bound. */
  timeoutMs?: number | null;
  /** Statuses that are not errors. Default 200, 201, 204. */
  ok?: number[];
  signal?: AbortSignal;
}

/** A variable of the environment, where the runtime has one (undefined when empty). */
/** A workspace's template name (1 to 19 of a-z, 0-9, '-', '_'): it goes into a URL path. */
function templateName(name: string): string {
  if (!/^[a-z0-9][a-z0-9_-]{0,18}$/.test(name)) {
    throw new TypeError(`${JSON.stringify(name)} is not a template name (1 to 19 of a-z, 0-9, '-', '_')`);
  }
  return name;
}

/** A build's disk_mib: kilnd's bounds (docs/templates.md "Disk size"). */
function templateDiskMib(v: number): number {
  if (!Number.isInteger(v) || v < 64 || v > 1048576) {
    throw new TypeError(`diskMib ${JSON.stringify(v)}: want a number of MiB from 64 to 1048576`);
  }
  return v;
}

/** A template's vcpus (1 to 8) or memory_mib (128 to 65536): kilnd's bounds. */
function templateShape(what: string, v: number, lo: number, hi: number, unit: string): number {
  if (!Number.isInteger(v) || v < lo || v > hi) {
    throw new TypeError(`${what} ${JSON.stringify(v)}: want a number of ${unit} from ${lo} to ${hi}`);
  }
  return v;
}

/** A build's network: none, internet or CIDR[,CIDR...]; kilnd checks each CIDR (its 400 names the bad one). */
function templateBuildNet(v: string): string {
  if (typeof v !== "string" || v === "" || v.split(",").includes("")) {
    throw new TypeError(`buildNet ${JSON.stringify(v)}: want "none", "internet" or "CIDR[,CIDR...]"`);
  }
  return v;
}

export function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env?.[name] || undefined;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const backoff = (attempt: number) => Math.min(250 * 2 ** (attempt - 1), 4000);

/** An id for a URL path: ids are [a-z0-9_], and nothing else may change the path. */
export function checkId(id: string): string {
  if (typeof id !== "string" || !/^[A-Za-z0-9_]+$/.test(id)) {
    throw new TypeError(`not a kiln id: ${JSON.stringify(id)}`);
  }
  return id;
}

export class Client {
  readonly apiUrl: string;
  readonly apiKey: string | undefined;
  readonly timeoutMs: number | null;
  readonly maxRetries: number;
  private readonly fetchFn: typeof fetch;
  private readonly credential: Credential;

  constructor(options: ClientOptions = {}) {
    this.apiUrl = (options.apiUrl ?? env("KILN_API_URL") ?? DEFAULT_URL).replace(/\/+$/, "");
    let u: URL;
    try {
      u = new URL(this.apiUrl);
    } catch {
      throw new TypeError(`apiUrl must be http(s)://HOST[:PORT], not ${JSON.stringify(this.apiUrl)}`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new TypeError(`apiUrl must be http(s)://HOST[:PORT], not ${JSON.stringify(this.apiUrl)}`);
    }
    this.apiKey = options.apiKey ?? env("KILN_API_KEY");
    this.timeoutMs = options.timeoutMs === undefined ? 300_000 : options.timeoutMs;
    this.maxRetries = options.maxRetries ?? 3;
    if (!(this.maxRetries >= 0)) throw new TypeError("maxRetries must be 0 or more");
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("this runtime has no fetch: pass options.fetch");
    this.fetchFn = f;
    this.credential = options.credential ?? API_KEY;
  }

  url(path: string, query?: RequestOptions["query"]): string {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v !== undefined && v !== null) q.set(k, String(v));
    }
    const s = q.toString();
    return this.apiUrl + path + (s ? `?${s}` : "");
  }

  headers(extra?: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = { "User-Agent": USER_AGENT, Accept: "application/json" };
    if (this.apiKey) h.Authorization = `Bearer ${this.apiKey}`;
    return { ...h, ...extra };
  }

  /** Send a request; resolves with the Response (body unread) when its
   * status is in `ok`, else throws the KilnError for it. */
  async request(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    const url = this.url(path, opts.query);
    const headers = this.headers(opts.headers);
    let body = opts.body;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      headers["Content-Type"] = "application/json";
    }
    const streamed = typeof ReadableStream !== "undefined" && body instanceof ReadableStream;
    const retries = IDEMPOTENT.has(method) && !streamed ? this.maxRetries : 0;
    const timeoutMs = opts.timeoutMs === undefined ? this.timeoutMs : opts.timeoutMs;
    const ok = opts.ok ?? [200, 201, 204];
    for (let attempt = 0; ; attempt++) {
      const signals = [opts.signal, timeoutMs !== null ? AbortSignal.timeout(timeoutMs) : undefined]
        .filter((s): s is AbortSignal => s !== undefined);
      const init: RequestInit & { duplex?: string } = { method, headers, body };
      if (signals.length) init.signal = signals.length === 1 ? signals[0] : AbortSignal.any(signals);
      if (streamed) init.duplex = "half";
      let resp: Response;
      try {
        resp = await this.fetchFn(url, init);
      } catch (e) {
        const name = (e as { name?: string }).name;
        if (name === "TimeoutError") {
          throw new Timeout(`${method} ${path}: no answer from kilnd within ${timeoutMs} ms`, "client_timeout");
        }
        if (name === "AbortError") throw e;
        if (attempt < retries) {
          await sleep(backoff(attempt + 1));
          continue;
        }
        const cause = (e as { cause?: { code?: string; message?: string } }).cause;
        throw new ConnectionFailed(
          `${method} ${path}: cannot reach kilnd at ${this.apiUrl}: ${cause?.code ?? cause?.message ?? String(e)}`,
          "connection_error", undefined, { cause: e });
      }
      if (ok.includes(resp.status)) return resp;
      const err = await errorOf(resp, this.credential);
      if (RETRY_STATUSES.has(resp.status) && attempt < retries) {
        let wait = backoff(attempt + 1);
        if (err instanceof RateLimited && err.retryAfter !== undefined) wait = Math.min(err.retryAfter * 1000, 30_000);
        await sleep(wait);
        continue;
      }
      throw err;
    }
  }

  /** A request whose answer is JSON. */
  async json<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const resp = await this.request(method, path, opts);
    const text = await resp.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** A request whose answer has no body (204). */
  async empty(method: string, path: string, opts: RequestOptions = {}): Promise<void> {
    const resp = await this.request(method, path, { ok: [204, 200], ...opts });
    await resp.body?.cancel();
  }

  // ---- snapshots, templates, usage ------------------------------------------------------------

  async snapshots(): Promise<Snapshot[]> {
    const j = await this.json<{ snapshots: SnapshotJSON[] }>("GET", "/v1/snapshots");
    return j.snapshots.map(snapshotFrom);
  }

  async getSnapshot(id: string): Promise<Snapshot> {
    return snapshotFrom(await this.json<SnapshotJSON>("GET", `/v1/snapshots/${checkId(id)}`));
  }

  async deleteSnapshot(id: string): Promise<void> {
    await this.empty("DELETE", `/v1/snapshots/${checkId(id)}`);
  }

  // ---- named volumes (docs/api.md "Volumes") ----------------------------------------------------

  /** Make a volume (ext4, sizeMib 1 to 65536): a Conflict if the name is taken. */
  async createVolume(name: string, sizeMib: number): Promise<VolumeJSON> {
    return this.json<VolumeJSON>("POST", "/v1/volumes", { json: { name, size_mib: sizeMib } });
  }

  async volumes(): Promise<VolumeJSON[]> {
    return (await this.json<{ volumes: VolumeJSON[] }>("GET", "/v1/volumes")).volumes;
  }

  async getVolume(id: string): Promise<VolumeJSON> {
    return this.json<VolumeJSON>("GET", `/v1/volumes/${checkId(id)}`);
  }

  /** Delete a volume and its data: a Conflict (naming the sandbox) while attached. */
  async deleteVolume(id: string): Promise<void> {
    await this.empty("DELETE", `/v1/volumes/${checkId(id)}`);
  }

  // ---- apps (docs/api.md "Apps") ----------------------------------------------------------------

  /**
   * Deploy an app: `command` listening on `port` in a sandbox kiln keeps for
   * it, at a stable URL (`url`; the server needs --domain). Resolves once
   * the command listens: a Timeout (with the end of its log) if it did not
   * within readyTimeoutSeconds, and nothing is left; a Conflict for a name
   * the workspace has.
   */
  async createApp(options: AppOptions): Promise<AppJSON> {
    const body = appBody(options);
    body.name = options.name;
    if (options.sandboxId !== undefined) body.sandbox_id = options.sandboxId;
    return this.json<AppJSON>("POST", "/v1/apps", { json: body, timeoutMs: this.appWait(options) });
  }

  /** The workspace's apps, oldest first. */
  async apps(): Promise<AppJSON[]> {
    return (await this.json<{ apps: AppJSON[] }>("GET", "/v1/apps")).apps;
  }

  /** An app by name or id (app_...). */
  async getApp(app: string): Promise<AppJSON> {
    return this.json<AppJSON>("GET", `/v1/apps/${appKey(app)}`);
  }

  /**
   * A new version: the fields given replace the app's, the rest are kept.
   * The URL switches to it once it listens (version + 1); until then, and
   * on if it never does (Timeout), the old version serves.
   */
  async deployApp(app: string, options: AppDeployOptions = {}): Promise<AppJSON> {
    return this.json<AppJSON>("POST", `/v1/apps/${appKey(app)}/deploy`, { json: appBody(options), timeoutMs: this.appWait(options) });
  }

  /** Delete an app, its sandboxes and its URL. */
  async deleteApp(app: string): Promise<void> {
    await this.empty("DELETE", `/v1/apps/${appKey(app)}`);
  }

  /** What kiln did with the app (events) and the last `tail` lines (default 100) of its log; a hibernated app is woken. */
  async appLogs(app: string, options: { tail?: number } = {}): Promise<AppLogsJSON> {
    return this.json<AppLogsJSON>("GET", `/v1/apps/${appKey(app)}/logs`, { query: { tail: options.tail ?? 100 } });
  }

  /**
   * The app's events, then the last `tail` lines of its log and each new
   * one as it is written, until its sandbox stops sending (deleted,
   * replaced by a deploy). Breaking out of the loop closes the connection.
   */
  async *followAppLogs(app: string, options: { tail?: number; signal?: AbortSignal } = {}): AsyncGenerator<AppLogEntry> {
    const ctl = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, ctl.signal]) : ctl.signal;
    const resp = await this.request("GET", `/v1/apps/${appKey(app)}/logs`, {
      query: { tail: options.tail ?? 100, follow: "true" }, timeoutMs: null, ok: [200], signal,
      headers: { Accept: "text/event-stream" },
    });
    if (!resp.body) throw new TypeError("the stream has no body");
    try {
      for await (const ev of sseEvents(resp.body, STREAM_SILENCE_MS, () => ctl.abort())) {
        if (ev.event === "event" || ev.event === "line") yield { kind: ev.event, ...JSON.parse(ev.data) } as AppLogEntry;
        else if (ev.event === "end") return;
      }
    } finally {
      ctl.abort();
    }
  }

  /** A create or deploy waits for the command to listen after the sandbox boots: the client's bound, or longer. */
  private appWait(o: AppDeployOptions): number | null {
    if (this.timeoutMs === null) return null;
    return Math.max(this.timeoutMs, ((o.readyTimeoutSeconds ?? 60) + 120) * 1000);
  }

  async templates(): Promise<TemplateJSON[]> {
    return (await this.json<{ templates: TemplateJSON[] }>("GET", "/v1/templates")).templates;
  }

  /**
   * Build the workspace's own template `name` from the Dockerfile in
   * `contextDir` (Node; docs/templates.md "Building through the API"): what
   * its .dockerignore keeps (and the Dockerfile and .dockerignore) is sent
   * as a tar; answers once kilnd runs the build
   * ({name, build_id, status: "building", context_bytes}).
   */
  async buildTemplate(contextDir: string, name: string,
                      options: { dockerfile?: string; buildArgs?: Record<string, string>; diskMib?: number;
                                 buildNet?: string; vcpus?: number; memoryMib?: number } = {}):
                      Promise<Record<string, unknown>> {
    // Checked before the context is packed: a bad value is named at once.
    if (options.diskMib !== undefined) templateDiskMib(options.diskMib);
    if (options.buildNet !== undefined) templateBuildNet(options.buildNet);
    if (options.vcpus !== undefined) templateShape("vcpus", options.vcpus, 1, 8, "vCPUs");
    if (options.memoryMib !== undefined) templateShape("memoryMib", options.memoryMib, 128, 65536, "MiB");
    const { packDir } = await import("./tar.js");
    const { contextFilter } = await import("./dockerignore.js");
    // What .dockerignore hides is never sent (a node_modules, a .git, an .env).
    const blob = await packDir(contextDir, await contextFilter(contextDir, options.dockerfile));
    const q = new URLSearchParams({ name: templateName(name) });
    if (options.dockerfile !== undefined) q.append("dockerfile", options.dockerfile);
    for (const [k, v] of Object.entries(options.buildArgs ?? {})) q.append("build_arg", `${k}=${v}`);
    if (options.diskMib !== undefined) q.append("disk_mib", String(options.diskMib));
    if (options.buildNet !== undefined) q.append("build_net", options.buildNet);
    if (options.vcpus !== undefined) q.append("vcpus", String(options.vcpus));
    if (options.memoryMib !== undefined) q.append("memory_mib", String(options.memoryMib));
    return this.json("POST", `/v1/templates?${q.toString()}`, {
      body: blob, headers: { "Content-Type": "application/x-tar" }, ok: [202],
    });
  }

  /** One template: status (building, ready, failed), error, version, versions, size_bytes. */
  async template(name: string): Promise<Record<string, unknown>> {
    return this.json("GET", `/v1/templates/${templateName(name)}`);
  }

  /** The template's build log, as text. */
  async templateLogs(name: string): Promise<string> {
    return (await this.request("GET", `/v1/templates/${templateName(name)}/logs`)).text();
  }

  /** Each line of the build's log ({kind: "line", text}), then {kind: "end", status, error} when it ends. */
  async *followTemplateLogs(name: string, options: { signal?: AbortSignal } = {}): AsyncGenerator<Record<string, unknown>> {
    const ctl = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, ctl.signal]) : ctl.signal;
    const resp = await this.request("GET", `/v1/templates/${templateName(name)}/logs`, {
      query: { follow: "1" }, timeoutMs: null, ok: [200], signal, headers: { Accept: "text/event-stream" },
    });
    if (!resp.body) throw new TypeError("the stream has no body");
    try {
      for await (const ev of sseEvents(resp.body, STREAM_SILENCE_MS, () => ctl.abort())) {
        if (ev.event === "line" || ev.event === "end") yield { kind: ev.event, ...JSON.parse(ev.data) };
        if (ev.event === "end") return;
      }
    } finally {
      ctl.abort();
    }
  }

  /** Remove the workspace's own template (409 while it builds or a sandbox of it exists). */
  async deleteTemplate(name: string): Promise<void> {
    await this.request("DELETE", `/v1/templates/${templateName(name)}`, { ok: [204] });
  }

  /**
   * The workspace's usage (GET /v1/usage, docs/billing.md). With no query:
   * totals over its sandboxes. With one: the metered hours by `granularity`
   * "hour" (default) or "day", each priced, and their total; `from` and `to`
   * bound them (default this month), `sandbox` keeps one sandbox's hours.
   */
  async usage(): Promise<UsageJSON>;
  async usage(query: UsageQuery): Promise<UsageBucketsJSON>;
  async usage(query?: UsageQuery): Promise<UsageJSON | UsageBucketsJSON> {
    if (!query) return this.json<UsageJSON>("GET", "/v1/usage");
    return this.json<UsageBucketsJSON>("GET", "/v1/usage", {
      query: { granularity: query.granularity ?? "hour", from: whenOf(query.from), to: whenOf(query.to), sandbox: query.sandbox },
    });
  }

  /** This UTC month so far (GET /v1/billing): plan, prices, usage, cost, projected, credit left. */
  async billing(): Promise<BillingJSON> {
    return this.json<BillingJSON>("GET", "/v1/billing");
  }

  /** The monthly statements, newest first (GET /v1/statements): the month under way "open", closed ones never change. */
  async statements(): Promise<StatementJSON[]> {
    return (await this.json<{ statements: StatementJSON[] }>("GET", "/v1/statements")).statements;
  }

  /** One month's statement, `month` as "2026-11": NotFound for a month not begun or without usage, InvalidRequest for a malformed one. */
  async statement(month: string): Promise<StatementJSON> {
    if (typeof month !== "string" || !month) throw new TypeError(`not a month: ${String(month)} (want "YYYY-MM")`);
    return this.json<StatementJSON>("GET", `/v1/statements/${encodeURIComponent(month)}`);
  }

  /**
   * The workspace's events as they happen (GET /v1/events; one sandbox's with `sandbox`):
   * resolves once connected; iterate the result, close() it to stop. With `lastEventId` the
   * events after it come first; a broken connection is opened again from the last event seen.
   */
  async events(options: EventsOptions = {}): Promise<EventStream> {
    if (options.sandbox !== undefined) checkId(options.sandbox);
    return EventStream.open(this, options);
  }

  /** The workspace's plan, its limits and what is in use (GET /v1/limits). */
  async limits(): Promise<LimitsJSON> {
    return this.json<LimitsJSON>("GET", "/v1/limits");
  }

  // ---- API keys, audit log --------------------------------------------------------------------

  /**
   * The workspace's API keys, oldest first (GET /v1/keys), revoked ones too:
   * their prefixes (the first 13 characters; kilnd keeps only a key's hash),
   * names, scopes, expiry and last use.
   */
  async keys(): Promise<ApiKeyJSON[]> {
    return (await this.json<{ keys: ApiKeyJSON[] }>("GET", "/v1/keys")).keys;
  }

  /**
   * A new API key of the workspace (POST /v1/keys): `key` is the secret,
   * shown in this answer only. `scope` "full" (default) or "read" (GET
   * routes only, not the PTY); `expiresInSeconds` absent: it never expires.
   * A read key cannot make keys (PermissionDenied).
   */
  async createKey(options: KeyOptions = {}): Promise<NewKeyJSON> {
    return this.json<NewKeyJSON>("POST", "/v1/keys", { json: keyBody(options) });
  }

  /**
   * Revoke one of the workspace's keys (DELETE /v1/keys/{id}): it is refused
   * (AuthError) from its next request on, and its dashboard sessions end.
   * Revoking a revoked key is no error; NotFound for one not the workspace's.
   */
  async revokeKey(id: string): Promise<void> {
    await this.empty("DELETE", `/v1/keys/${checkId(id)}`);
  }

  /**
   * The workspace's audit log, newest first (GET /v1/audit): every call by
   * one of its keys (or an operator, on the workspace) of a route that is
   * not a GET, refused ones too. `limit`: the newest 1 to 1000 (default
   * 100); `cursor`: a page's nextCursor, for the entries after it (older);
   * `key`: only that key's entries (its id or shown prefix). The answer is
   * the array of entries, as it always was, with `nextCursor` (null on the
   * last page); auditAll follows them. An entry is written once its request
   * is answered, so it may show a few milliseconds after.
   */
  async audit(query: AuditQuery = {}): Promise<AuditPage> {
    const j = await this.json<{ entries: AuditEntryJSON[]; next_cursor?: string | null }>("GET", "/v1/audit", {
      query: { limit: query.limit, cursor: query.cursor, key: query.key },
    });
    return Object.assign(j.entries, { nextCursor: j.next_cursor ?? null });
  }

  /**
   * Every entry of the audit log, newest first, as audit's: the pages
   * (`pageSize`, 1 to 1000, default 1000) fetched as the iteration needs
   * them, following nextCursor to the last. Entries written while it runs
   * are newer than its first page: they are not among them.
   *
   *     for await (const e of client.auditAll({ key: "key_..." })) console.log(e.route);
   */
  async *auditAll(query: AuditAllQuery = {}): AsyncGenerator<AuditEntryJSON, void, undefined> {
    let cursor = query.cursor;
    for (;;) {
      const page = await this.audit({ limit: query.pageSize ?? 1000, cursor, key: query.key });
      yield* page;
      if (page.nextCursor === null) return;
      cursor = page.nextCursor;
    }
  }
}

/** An app's name or id for a URL path: [A-Za-z0-9_-], nothing that could change the path. */
function appKey(app: string): string {
  if (typeof app !== "string" || !/^[A-Za-z0-9_-]+$/.test(app)) {
    throw new TypeError(`not an app's name or id: ${JSON.stringify(app)}`);
  }
  return app;
}

/** The body of a create or deploy, in the API's names. */
function appBody(o: AppDeployOptions): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const set = (k: string, v: unknown) => { if (v !== undefined) body[k] = v; };
  set("port", o.port);
  set("command", o.command);
  set("template", o.template);
  set("from_snapshot", o.fromSnapshot);
  set("env", o.env);
  set("restart", o.restart);
  set("idle_seconds", o.idleSeconds);
  set("ready_timeout_seconds", o.readyTimeoutSeconds);
  return body;
}

/** The body of POST /v1/keys (and of an operator's key for a workspace). */
export function keyBody(o: KeyOptions): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (o.name !== undefined) body.name = o.name;
  if (o.scope !== undefined) body.scope = o.scope;
  if (o.expiresInSeconds !== undefined) body.expires_in_seconds = o.expiresInSeconds;
  return body;
}

/** A usage query's time as kilnd reads it: a Date as RFC 3339 in UTC, Unix seconds, a string as given. */
export function whenOf(t: When | undefined): string | undefined {
  if (t === undefined || typeof t === "string") return t;
  if (t instanceof Date) return t.toISOString().replace(/\.\d{3}Z$/, "Z");
  return String(Math.floor(t));
}

async function errorOf(resp: Response, credential: Credential): Promise<KilnError> {
  const text = await resp.text().catch(() => "");
  let code = `http_${resp.status}`;
  let message = text.trim() || resp.statusText || "no message";
  let details: Record<string, unknown> = {};
  try {
    const e = JSON.parse(text).error;
    if (e && typeof e.code === "string") {
      code = e.code;
      message = String(e.message);
      details = { ...e };
    }
  } catch {
    /* not our JSON: keep the text */
  }
  const err = errorFor(resp.status, code, message, credential);
  err.details = details;
  if (err instanceof RateLimited) {
    const ra = Number(resp.headers.get("Retry-After"));
    err.retryAfter = Number.isFinite(ra) && resp.headers.get("Retry-After") !== null ? ra : undefined;
  }
  return err;
}

let defaultClient: Client | undefined;

/** The client made from the environment, shared (made on first use). */
export function getDefaultClient(): Client {
  defaultClient ??= new Client();
  return defaultClient;
}

export interface ConnectOptions {
  apiUrl?: string;
  apiKey?: string;
  client?: Client;
}

export function resolveClient(o: ConnectOptions | undefined): Client {
  if (o?.client) {
    if (o.apiUrl !== undefined || o.apiKey !== undefined) {
      throw new TypeError("give either client or apiUrl/apiKey, not both");
    }
    return o.client;
  }
  if (o?.apiUrl !== undefined || o?.apiKey !== undefined) {
    return new Client({ apiUrl: o?.apiUrl, apiKey: o?.apiKey });
  }
  return getDefaultClient();
}
