/**
 * The errors of the kiln SDK. Every error kilnd answers is
 * `{"error": {"code", "message"}}` with an HTTP status (docs/api.md); the
 * SDK throws the class for it, carrying the server's `code`, `message` and
 * `status`. Failures on this side (no connection, no answer in time) throw
 * the same classes with codes of their own: `connection_error`,
 * `client_timeout`.
 */

export class KilnError extends Error {
  readonly code: string;
  readonly status: number | undefined;
  /** The server's whole error object: fields beyond code and message, e.g.
   * `ended` and `ended_at` (sandbox_ended), `templates` (template_not_found).
   * Empty for failures on this side. */
  details: Record<string, unknown> = {};

  constructor(message: string, code = "error", status?: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }

  override toString(): string {
    return `${this.name}: ${this.code}${this.status ? ` (HTTP ${this.status})` : ""}: ${this.message}`;
  }
}

/** 400, 405, 413: the request is malformed, a field is wrong, or it is too large. */
export class InvalidRequest extends KilnError {}
/** 401: no API key, or a malformed, unknown or revoked one. */
export class AuthError extends KilnError {}
/** 403: the guest refused a file operation (or an Origin was refused). */
export class PermissionDenied extends KilnError {}
/** 404: no such sandbox, snapshot or guest file. */
export class NotFound extends KilnError {}
/** 409: the sandbox is in the wrong state for this. */
export class Conflict extends KilnError {}
/** 429: too many requests for the workspace; `retryAfter` (seconds) says when to come back. */
export class RateLimited extends KilnError {
  retryAfter: number | undefined;
  constructor(message: string, code = "rate_limited", status = 429, retryAfter?: number) {
    super(message, code, status);
    this.retryAfter = retryAfter;
  }
}
/**
 * 429 limit_exceeded: a create or fork over a limit of the workspace's plan
 * (docs/billing.md): `limit` names it (running, creates_per_hour, vcpus,
 * memory_mib), `value` is its value, `plan` the plan; `retryAfter` is set
 * for the creates window.
 */
export class LimitExceeded extends RateLimited {
  constructor(message: string, code = "limit_exceeded", status = 429, retryAfter?: number) {
    super(message, code, status, retryAfter);
  }
  get limit(): string | undefined {
    return this.details?.limit as string | undefined;
  }
  get value(): number | undefined {
    return this.details?.value as number | undefined;
  }
  get plan(): string | undefined {
    return this.details?.plan as string | undefined;
  }
}
/** 5xx: kilnd, a VMM or a guest failed, or there is no capacity (503). */
export class ServerError extends KilnError {}
/** 504 from the server (the guest did not answer in time), or no answer in time here. */
export class Timeout extends KilnError {}
/** kilnd could not be reached (refused, reset, name not found). */
export class ConnectionFailed extends KilnError {}
/** Some children of a fork were made, some not: those made are in `sandboxes`. */
export class ForkError<T = unknown> extends ServerError {
  readonly sandboxes: T[];
  readonly failed: number;
  constructor(message: string, sandboxes: T[], failed: number) {
    super(message, "fork_incomplete", 201);
    this.sandboxes = sandboxes;
    this.failed = failed;
  }
}

type ErrorClass = new (message: string, code: string, status?: number) => KilnError;

const byStatus: Record<number, ErrorClass> = {
  400: InvalidRequest, 401: AuthError, 403: PermissionDenied, 404: NotFound, 405: InvalidRequest,
  409: Conflict, 413: InvalidRequest, 429: RateLimited, 504: Timeout,
};

const byCode: Record<string, ErrorClass> = {
  invalid_json: InvalidRequest, invalid_request: InvalidRequest, method_not_allowed: InvalidRequest,
  payload_too_large: InvalidRequest, unauthorized: AuthError, forbidden: PermissionDenied,
  not_found: NotFound, conflict: Conflict, rate_limited: RateLimited, limit_exceeded: LimitExceeded,
  timeout: Timeout,
};

/** What a client sends as its bearer credential, for AuthError's message:
 * what it is, and the option and the variable it comes from. */
export interface Credential {
  what: string;
  option: string;
  env: string;
}

export const API_KEY: Credential = { what: "API key", option: "apiKey", env: "KILN_API_KEY" };
export const OPERATOR_KEY: Credential = { what: "operator credential", option: "adminKey", env: "KILN_ADMIN_KEY" };

/** The error for an answer (status undefined: an error event in a stream);
 * an AuthError's message says where `credential` comes from. */
export function errorFor(status: number | undefined, code: string, message: string,
  credential: Credential = API_KEY): KilnError {
  const cls = (code === "limit_exceeded" ? LimitExceeded : undefined) ??
    (status !== undefined ? byStatus[status] : undefined) ?? byCode[code] ??
    (status === undefined || status >= 500 ? ServerError : KilnError);
  if (cls === AuthError) message = authHint(message, credential);
  return new cls(message, code, status);
}

/** Say where the key comes from: kilnd only knows it got none or a bad one. */
function authHint(message: string, c: Credential): string {
  if (message.startsWith(`missing ${c.what}`)) {
    return `no ${c.what}: set ${c.env} or pass ${c.option} (kilnd said: ${message})`;
  }
  return `${message} (the ${c.what} comes from ${c.option} or ${c.env})`;
}
