// The dashboard's only way to kilnd: the public REST API with the session
// cookie (sent by the browser; the page never sees it) and the CSRF token
// (kept in memory only) on every request that changes something.

export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string) {
    super(message);
  }
}

let csrf: string | null = null;
let onSignedOut: (why: string) => void = () => {};

export function setCsrf(token: string | null): void {
  csrf = token;
}

export function whenSignedOut(fn: (why: string) => void): void {
  onSignedOut = fn;
}

export async function api<T = any>(method: string, path: string, body?: unknown, raw?: Blob): Promise<T> {
  const headers: Record<string, string> = {};
  if (method !== "GET" && method !== "HEAD" && csrf) headers["X-CSRF-Token"] = csrf;
  let payload: BodyInit | undefined;
  if (raw) {
    payload = raw;
    headers["Content-Type"] = "application/octet-stream";
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers["Content-Type"] = "application/json";
  }
  let resp: Response;
  try {
    resp = await fetch(path, { method, headers, body: payload, credentials: "same-origin" });
  } catch (e) {
    throw new ApiError(0, "network", `kilnd did not answer (${(e as Error).message})`);
  }
  if (resp.status === 204) return undefined as T;
  const text = await resp.text();
  let json: any = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON: the message below says so */
  }
  if (!resp.ok) {
    const err = json?.error;
    const e = new ApiError(resp.status, err?.code ?? "http", err?.message ?? `${resp.status} ${resp.statusText}`);
    if (resp.status === 401 && path !== "/v1/session") onSignedOut(e.message);
    throw e;
  }
  return json as T;
}

export interface Sandbox {
  id: string;
  status: string;
  template: string;
  vcpus: number;
  memory_mib: number;
  /** Its root disk, MiB: the template's or the create's disk_mib (null: made before kilnd kept it). */
  disk_mib?: number | null;
  created_at: string;
  ttl_seconds: number;
  ready_ms?: number | null;
  last_active_at?: string;
  expires_at?: string | null;
  parent_id?: string | null;
  from_snapshot?: string | null;
  metadata?: Record<string, string>;
  usage?: { cpu_seconds: number; memory_bytes: number; memory_mib_seconds: number; running_seconds: number };
  network?: { allow_internet: boolean; allow_out?: string[]; deny_out?: string[] };
  error?: string;
}

/** GET /v1/templates: one entry (docs/api.md "Template"). */
export interface Template {
  name: string;
  description: string;
  vcpus: number;
  memory_mib: number;
  /** Its root disk, MiB: a create's default and least disk_mib (null: not built). */
  disk_mib?: number | null;
  status: string;
  version: number | null;
  built_at: string | null;
  snapshot: boolean;
}

export interface FileEntry {
  name: string;
  type: string;
  size: number;
  mode: string;
  modified_at: string;
  link?: string;
}

export interface Volume {
  id: string;
  name: string;
  size_mib: number;
  created_at: string;
  attached_to: { sandbox_id: string; path: string; read_only: boolean; slot?: number }[];
}

// docs/api.md "Apps".
export interface App {
  id: string;
  name: string;
  url: string | null;
  port: number;
  template?: string | null;
  from_snapshot?: string | null;
  command?: string | null;
  restart: string;
  idle_seconds: number;
  sandbox_id?: string | null;
  status: string;
  version: number;
  vm_restarts: number;
  reason?: string | null;
  created_at: string;
  updated_at?: string;
}

export interface AppLogs {
  events: { at: string; text: string }[];
  lines: string[];
}

// docs/api.md "Databases": password only in the answers of create and
// reset-password.
export interface Database {
  id: string;
  name: string;
  status: string;
  sandbox_id?: string;
  host: string;
  port: number;
  user: string;
  password?: string;
  database: string;
  url: string;
  from_backup?: string | null;
  created_at: string;
  backup_interval_seconds?: number;
  backups_kept?: number;
  next_backup_ms?: number | null;
  vm_restarts?: number;
  events?: { ts_ms: number; kind: string; text: string }[];
}

export interface DatabaseBackup {
  id: string;
  database_id: string;
  created_ms: number;
  kind?: string;
}
