/** Plain result types of the kiln SDK, and the JSON shapes they come from (docs/api.md). */

export type SandboxStatus = "creating" | "running" | "paused" | "hibernated" | "failed" | "deleting" | "deleted";

export interface SandboxJSON {
  id: string;
  status: SandboxStatus;
  template: string;
  vcpus: number;
  memory_mib: number;
  /** Its root disk's size: the template's, or the create's disk_mib (null: made before kilnd kept it). */
  disk_mib: number | null;
  created_at: string;
  ready_ms: number | null;
  ttl_seconds: number;
  last_active_at: string | null;
  expires_at: string | null;
  /** Its plan's TTL rule (docs/billing.md). */
  /** Hibernated when idle and never deleted by its TTL. */
  persistent?: boolean;
  /** Paused after this many seconds without a request (0: never). */
  idle_pause_seconds?: number;
  ttl_rule?: { counts_from: "creation" | "last_activity"; when_idle: "delete" | "hibernate"; hibernated_retention_seconds: number };
  parent_id: string | null;
  from_snapshot: string | null;
  metadata: Record<string, string>;
  usage?: { cpu_seconds: number; memory_bytes: number; memory_mib_seconds: number; running_seconds: number };
  network?: NetworkPolicyJSON;
  error?: string;
}

/** A sandbox's egress policy as the server reports it (docs/network.md). */
export interface NetworkPolicyJSON {
  allow_internet: boolean;
  allow_out: string[];
  deny_out: string[];
}

export interface ExecResultJSON {
  stdout?: string;
  stderr?: string;
  exit_code: number;
  signal: number | null;
  timed_out: boolean;
  duration_ms: number;
  truncated?: boolean;
}

/** How a command ended, and what it printed. */
export interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number;
  signal: number | null;
  timedOut: boolean;
  durationMs: number;
  truncated: boolean;
}

export function execResultFrom(j: ExecResultJSON, stdout?: string, stderr?: string): ExecResult {
  return {
    stdout: stdout ?? j.stdout ?? "",
    stderr: stderr ?? j.stderr ?? "",
    exitCode: j.exit_code,
    signal: j.signal ?? null,
    timedOut: Boolean(j.timed_out),
    durationMs: j.duration_ms ?? 0,
    truncated: Boolean(j.truncated),
  };
}

export type FileType = "file" | "dir" | "symlink" | "fifo" | "socket" | "char" | "block" | "other";

export interface FileInfoJSON {
  name?: string;
  path?: string;
  type: FileType;
  size: number;
  mode: string;
  uid: number;
  gid: number;
  modified_at: string | null;
  link?: string;
}

/** A guest file: from files.stat (path set) or files.list (name relative to the listed directory). */
export interface FileInfo {
  name: string;
  path?: string;
  type: FileType;
  size: number;
  mode: string;
  uid: number;
  gid: number;
  modifiedAt: string | null;
  link?: string;
}

export function fileInfoFrom(j: FileInfoJSON): FileInfo {
  const name = j.name ?? (j.path ?? "").replace(/\/+$/, "").split("/").pop() ?? "";
  const f: FileInfo = {
    name: name || "/", type: j.type, size: j.size, mode: j.mode, uid: j.uid, gid: j.gid,
    modifiedAt: j.modified_at ?? null,
  };
  if (j.path !== undefined) f.path = j.path;
  if (j.link !== undefined) f.link = j.link;
  return f;
}

export interface SnapshotJSON {
  id: string;
  sandbox_id: string;
  template: string;
  vcpus: number;
  memory_mib: number;
  created_at: string | null;
}

/** A snapshot: create sandboxes from it with `Sandbox.create({ fromSnapshot: snap.id })`. */
export interface Snapshot {
  id: string;
  sandboxId: string;
  template: string;
  createdAt: string | null;
}

export function snapshotFrom(j: SnapshotJSON): Snapshot {
  return { id: j.id, sandboxId: j.sandbox_id, template: j.template, createdAt: j.created_at ?? null };
}

/** A named volume (docs/api.md "Volumes"), as the API gives it. */
export interface VolumeJSON {
  id: string;
  name: string;
  size_mib: number;
  created_at: string | null;
  attached_to: { sandbox_id: string; path: string; read_only: boolean; slot: number }[];
}

/** A volume a create mounts: `{ name: "data", path: "/data", readOnly: false }`. */
export interface VolumeMount {
  name: string;
  path: string;
  readOnly?: boolean;
}

/** An app (docs/api.md "Apps"): a long-running service at a stable URL, as the API gives it. */
export interface AppJSON {
  id: string;
  name: string;
  /** `http://app-<id after app_>.<DOMAIN>[:port]/`: its own origin, no key needed. */
  url: string | null;
  port: number;
  template: string | null;
  from_snapshot: string | null;
  command: string | null;
  env: Record<string, string>;
  restart: AppRestart;
  idle_seconds: number;
  /** The sandbox serving it now (null while none). */
  sandbox_id: string | null;
  /** Its sandbox's (running, hibernated, paused, ...), or failed with a reason. */
  status: string;
  version: number;
  vm_restarts: number;
  reason: string | null;
  created_at: string;
  updated_at: string;
}

export type AppRestart = "always" | "on-failure" | "never";

/** What a deploy sets (Client.deployApp); each absent field is kept as the app has it. */
export interface AppDeployOptions {
  /** The port the command listens on in the sandbox. */
  port?: number;
  /** The shell command that serves, run under a supervisor that applies `restart`. */
  command?: string;
  /** Where the sandbox comes from: a template (default "base") or a snapshot. */
  template?: string;
  fromSnapshot?: string;
  env?: Record<string, string>;
  /** Default "on-failure". */
  restart?: AppRestart;
  /** Hibernated after this long without requests (0: never; default 900). */
  idleSeconds?: number;
  /** How long the command has to listen (default 60, at most 600). */
  readyTimeoutSeconds?: number;
}

/** A new app (Client.createApp): a name, a port, and where it comes from. */
export interface AppOptions extends AppDeployOptions {
  /** a-z, 0-9 and '-': unique among the workspace's apps. */
  name: string;
  port: number;
  /** A running sandbox to make the app instead (its snapshot becomes the app's source). */
  sandboxId?: string;
}

/** GET /v1/apps/{app}/logs: what kiln did with the app, and the last lines of its log. */
export interface AppLogsJSON {
  events: { at: string; text: string }[];
  lines: string[];
}

/** One entry of Client.followAppLogs: an event of kiln's, or a line of the app's log. */
export type AppLogEntry = { kind: "event"; at: string; text: string } | { kind: "line"; text: string };

export interface TemplateJSON {
  name: string;
  description: string;
  vcpus: number;
  memory_mib: number;
  /** Its root disk, MiB: a sandbox's size unless its create asks for more (null: not built). */
  disk_mib: number | null;
  status: "ready" | "not_built";
  version: number | null;
  built_at: string | null;
  snapshot: boolean;
}

/** An exposed port (POST/GET /v1/sandboxes/{id}/ports). */
export interface PortJSON {
  port: number;
  public: boolean;
  /** The proxy URL on the kiln server. */
  url: string;
  /** By host name, when the server has a domain. */
  host_url?: string;
  created_at: string;
}

/** GET /v1/limits: the workspace's plan, its limits (0 is none) and what is in use. */
export interface LimitsJSON {
  plan: string;
  limits: {
    running: number; creates_per_hour: number; vcpus: number; memory_mib: number; max_ttl_seconds: number;
    hibernated?: number; snapshots?: number;
  };
  window_seconds: number;
  in_use: { running: number; creates_in_window: number; hibernated?: number; snapshots?: number };
}

export interface UsageJSON {
  workspace_id: string;
  cpu_seconds: number;
  active_vcpu_seconds?: number;
  overhead_cpu_seconds?: number;
  memory_mib_seconds: number;
  memory_gib_hours: number;
  working_set_gib_hours?: number;
  running_seconds: number;
  sandboxes: number;
  live_sandboxes: number;
}

/** A time in a usage query: a Date, Unix seconds, or a string kilnd reads ("2026-12-01", "2026-12-01T05:00:00Z"). */
export type When = Date | number | string;

/** client.usage({...}): the metered hours by hour (default) or UTC day (docs/billing.md). */
export interface UsageQuery {
  granularity?: "hour" | "day";
  from?: When;
  to?: When;
  sandbox?: string;
}

/** Money is integer micro-dollars (1 USD = 1,000,000). */
export interface PricesJSON {
  vcpu_hour_microdollars: number;
  gib_hour_microdollars: number;
}

/** One period's usage, priced once. */
export interface UsagePeriodJSON {
  active_vcpu_seconds: number;
  memory_gib_hours: number;
  running_seconds: number;
  cpu_microdollars: number;
  memory_microdollars: number;
  cost_microdollars: number;
}

export interface UsageBucketsJSON {
  workspace_id: string;
  sandbox_id: string | null;
  granularity: "hour" | "day";
  from: string;
  to: string;
  prices: PricesJSON;
  buckets: (UsagePeriodJSON & { start: string })[];
  total: UsagePeriodJSON;
}

export interface BillingJSON {
  workspace_id: string;
  plan: string;
  prices: PricesJSON;
  period: { from: string; to: string };
  usage: UsagePeriodJSON;
  cost_microdollars: number;
  projected_microdollars: number;
  credit_microdollars: number;
  credit_left_microdollars: number | null;
  credit_exhausted: boolean;
  limits: Record<string, number>;
}

/** A month's statement: "open" while the month runs (so far), "closed" after: then it never changes. */
export interface StatementJSON {
  workspace_id: string;
  month: string;
  status: "open" | "closed";
  period: { from: string; to: string };
  plan: string;
  prices: PricesJSON;
  usage: { active_vcpu_seconds: number; memory_gib_hours: number; running_seconds: number };
  cpu_microdollars: number;
  memory_microdollars: number;
  cost_microdollars: number;
  credit_microdollars: number;
  credit_applied_microdollars: number;
  amount_due_microdollars: number;
  closed_at: string | null;
}

/** A key's scope: "full" (every route) or "read" (GET routes only, not the PTY). */
export type KeyScope = "full" | "read";

/** An API key as GET /v1/keys lists it (kilnd keeps only its hash: never the key itself). */
export interface ApiKeyJSON {
  id: string;
  /** The key's first 13 characters, to tell keys apart. */
  prefix: string;
  name: string;
  scope: KeyScope;
  created_at: string;
  revoked: boolean;
  revoked_at?: string;
  expires_at: string | null;
  /** To the minute: recorded at most once a minute. */
  last_used_at: string | null;
}

/** A key just made (POST /v1/keys): `key` is the secret, shown in this answer only. */
export interface NewKeyJSON {
  id: string;
  key: string;
  prefix: string;
  name: string;
  scope: KeyScope;
  expires_at: string | null;
}

/** A new key's options: `scope` "full" by default, `expiresInSeconds` 1 to about ten years (absent: never). */
export interface KeyOptions {
  name?: string;
  scope?: KeyScope;
  expiresInSeconds?: number;
}

/** One entry of a workspace's audit log (GET /v1/audit). */
export interface AuditEntryJSON {
  id: string;
  time: string;
  /** The key (or operator credential) that called. */
  key_id: string;
  key_prefix: string;
  method: string;
  /** The route's pattern, as /v1/sandboxes/{id}/exec. */
  route: string;
  /**
   * The ids the path names (sbx_..., sbx_.../8080), else the id a 201 answer
   * made; an operator's: the workspace's id for its creation, the key's id
   * for a key made, "NAME/KEY_ID" for a key revoked. Null when none.
   */
  target: string | null;
  status: number;
}

/**
 * client.audit({...}): the newest `limit` entries, 1 to 1000 (default 100);
 * `cursor` (a page's nextCursor): the entries after it (older); `key`: only
 * this key's (or operator credential's) entries, by its id or shown prefix.
 */
export interface AuditQuery {
  limit?: number;
  cursor?: string;
  key?: string;
}

/**
 * client.auditAll({...}): every entry, fetched `pageSize` (1 to 1000,
 * default 1000) at a time; `key` as audit's; `cursor`: start after that page.
 */
export interface AuditAllQuery {
  key?: string;
  cursor?: string;
  pageSize?: number;
}

/**
 * A page of the audit log (client.audit): an array of its entries, newest
 * first, as before, with `nextCursor`, the next page's cursor (null when
 * this page was the last). JSON.stringify shows the entries only.
 */
export type AuditPage = AuditEntryJSON[] & { nextCursor: string | null };

/** A workspace as its operator sees it (/v1/admin/workspaces). */
export interface AdminWorkspaceJSON {
  id: string;
  name: string;
  /** Its plan, or the server's default when it has none of its own. */
  plan: string;
  /** Its own limits over its plan's ({} when none). */
  limits: Record<string, number>;
  suspended: boolean;
  created_at: string;
  /** Sandboxes not deleted. */
  live_sandboxes: number;
  /** This UTC month's metered usage, priced. */
  month_cost_microdollars: number;
}

/** admin.createWorkspace(name, {...}): a plan of the server (absent: its default), its own limits over the plan's. */
export interface WorkspaceOptions {
  plan?: string;
  limits?: Record<string, number>;
}

/** admin.updateWorkspace(name, {...}): what is absent is kept; `limits` replaces its own ({}: none). */
export interface WorkspaceUpdate extends WorkspaceOptions {
  suspended?: boolean;
}

/** A plan as its operator sees it (/v1/admin/plans). */
export interface AdminPlanJSON {
  name: string;
  /** The limits in force (0: none), by name (docs/billing.md). */
  limits: Record<string, number>;
  /** What the operator set over the server's plan, or the plan itself; null when nothing. */
  operator_limits: Record<string, number> | null;
  /** A plan the server has (shipped or its plans file). */
  server_plan: boolean;
  /** The server's default plan (a workspace with none of its own is on it). */
  default: boolean;
  /** When the operator last set it; null when never. */
  updated_at: string | null;
}

/** Usage totals over a range, priced. */
export interface AdminUsageTotalsJSON {
  active_vcpu_seconds: number;
  memory_gib_hours: number;
  running_seconds: number;
  cost_microdollars: number;
}

/** GET /v1/admin/usage: each live workspace's totals, and all of them. */
export interface AdminUsageJSON {
  from: string;
  to: string;
  workspaces: (AdminUsageTotalsJSON & { id: string; name: string })[];
  total: AdminUsageTotalsJSON;
}

/** admin.usage({...}): the range, default this month through the hour under way. */
export interface AdminUsageQuery {
  from?: When;
  to?: When;
}
