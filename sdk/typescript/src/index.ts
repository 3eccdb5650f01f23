/**
 * @kiln/sdk: sandboxes for AI agents, each a microVM with its own kernel.
 *
 *     import { Sandbox } from "@kiln/sdk";
 *     await using sb = await Sandbox.create({ template: "base" });
 *     console.log((await sb.exec("python3 -c 'print(6*7)'")).stdout);
 *
 * Configuration comes from options or from KILN_API_URL and KILN_API_KEY.
 */
export { Client, DEFAULT_URL, getDefaultClient } from "./client.js";
export type { ClientOptions, ConnectOptions, RequestOptions } from "./client.js";
export {
  AuthError, Conflict, ConnectionFailed, ForkError, InvalidRequest, KilnError, NotFound,
  LimitExceeded, PermissionDenied, RateLimited, ServerError, Timeout,
} from "./errors.js";
export { Files } from "./files.js";
export type { WriteOptions } from "./files.js";
export { Processes } from "./processes.js";
export type { Process, ProcessOutput } from "./processes.js";
export { Pty } from "./pty.js";
export type { PtyOptions } from "./pty.js";
export { LANGUAGES, Sandbox } from "./sandbox.js";
export type { Command, CreateOptions, ExecOptions, ListFilter, LogLine, NetworkOptions, SandboxPage } from "./sandbox.js";
export { ExecStream } from "./stream.js";
export type { OutputChunk, StreamCallbacks } from "./stream.js";
export type {
  ExecResult, FileInfo, FileType, NetworkPolicyJSON, PortJSON, SandboxJSON, SandboxStatus, Snapshot, TemplateJSON, UsageJSON, LimitsJSON,
} from "./types.js";
