/**
 * @kiln/sdk: sandboxes for AI agents, each a microVM with its own kernel.
 *
 *     import { Sandbox } from "@kiln/sdk";
 *     await using sb = await Sandbox.create({ template: "base" });
 *     console.log((await sb.exec("python3 -c 'print(6*7)'")).stdout);
 *
 * Configuration comes from options or from KILN_API_URL and KILN_API_KEY.
 * An operator manages workspaces with `new Admin(...)` and an operator
 * credential (KILN_ADMIN_KEY).
 */
export { Admin } from "./admin.js";
export type { AdminOptions } from "./admin.js";
export { Client, DEFAULT_URL, getDefaultClient } from "./client.js";
export { Code } from "./code.js";
export type { CodeContext, Execution, ExecutionError, Result, RunOptions } from "./code.js";
export { CommandHandle, Commands } from "./commands.js";
export type { CommandStartOpts } from "./commands.js";
export type { ClientOptions, ConnectOptions, RequestOptions } from "./client.js";
export type { Credential } from "./errors.js";
export {
  AuthError, Conflict, ConnectionFailed, ForkError, InvalidRequest, KilnError, NotFound,
  LimitExceeded, PermissionDenied, RateLimited, ServerError, Timeout,
} from "./errors.js";
export { DockerIgnore, contextFilter } from "./dockerignore.js";
export type { PackFilter } from "./dockerignore.js";
export { Files } from "./files.js";
export type { UserOption, WriteEntry, WriteOptions } from "./files.js";
export { Processes, ProcessStream } from "./processes.js";
export type { Process, ProcessOutput } from "./processes.js";
export { Pty } from "./pty.js";
export type { PtyOptions } from "./pty.js";
export { LANGUAGES, Sandbox } from "./sandbox.js";
export type { Command, CreateOptions, ExecOptions, ListFilter, LogLine, NetworkOptions, RunCodeOptions, SandboxPage } from "./sandbox.js";
export { ExecStream } from "./stream.js";
export { EventStream } from "./events.js";
export type { EventsOptions, KilnEvent } from "./events.js";
export { FileWatch } from "./watch.js";
export type { FsEvent, WatchHandle } from "./watch.js";
export type { OutputChunk, StreamCallbacks } from "./stream.js";
export type {
  ExecResult, FileInfo, FileType, NetworkPolicyJSON, PortJSON, SandboxJSON, SandboxStatus, Snapshot, TemplateJSON, UsageJSON, LimitsJSON,
  VolumeJSON, VolumeMount, AppJSON, AppOptions, AppDeployOptions, AppLogsJSON, AppLogEntry, AppRestart,
  BillingJSON, PricesJSON, StatementJSON, UsageBucketsJSON, UsagePeriodJSON, UsageQuery, When,
  ApiKeyJSON, NewKeyJSON, KeyOptions, KeyScope, AuditEntryJSON, AuditQuery, AuditAllQuery, AuditPage, AdminWorkspaceJSON, WorkspaceOptions,
  WorkspaceUpdate, AdminPlanJSON, AdminUsageJSON, AdminUsageQuery, AdminUsageTotalsJSON,
} from "./types.js";
