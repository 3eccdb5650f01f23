/**
 * The operator's client: kilnd's /v1/admin routes (docs/security.md, "Operators").
 *
 *     import { Admin } from "@kiln/sdk";
 *     const admin = new Admin({ apiUrl: "https://kiln.example.com", adminKey: "kilnop_..." });
 *     await admin.createWorkspace("acme", { plan: "pro" });
 *     const { key } = await admin.createKey("acme", { name: "ci" });   // shown once
 *     console.log((await admin.keys("acme")).map((k) => [k.id, k.prefix, k.revoked]));
 *     await admin.updateWorkspace("acme", { suspended: true });
 *
 * It takes an operator credential (`kilnd admin create` prints one), never a
 * workspace's API key: kilnd answers a workspace's key there 403
 * (PermissionDenied), and an unknown, revoked or missing credential 401
 * (AuthError). Workspaces are named by their name (1 to 16 of a-z, 0-9, -).
 */
import { Client, checkId, env, keyBody, whenOf } from "./client.js";
import type { ClientOptions } from "./client.js";
import { OPERATOR_KEY } from "./errors.js";
import type {
  AdminPlanJSON, AdminUsageJSON, AdminUsageQuery, AdminWorkspaceJSON, ApiKeyJSON, KeyOptions, NewKeyJSON, WorkspaceOptions, WorkspaceUpdate,
} from "./types.js";

export interface AdminOptions extends Omit<ClientOptions, "apiKey" | "credential"> {
  /** An operator credential (kilnop_...). Default: KILN_ADMIN_KEY. */
  adminKey?: string;
}

/** A workspace's path: a name is a-z, 0-9 and -, and nothing else may change the path. */
function workspacePath(name: string): string {
  if (typeof name !== "string" || !/^[a-z0-9-]+$/.test(name)) {
    throw new TypeError(`not a workspace name: ${JSON.stringify(name)} (1 to 16 of a-z, 0-9 and -)`);
  }
  return `/v1/admin/workspaces/${name}`;
}

/** A plan's path: a name is a-z, 0-9, - and _, and nothing else may change the path. */
function planPath(name: string): string {
  if (typeof name !== "string" || !/^[a-z0-9_-]{1,31}$/.test(name)) {
    throw new TypeError(`not a plan name: ${JSON.stringify(name)} (1 to 31 of a-z, 0-9, - and _)`);
  }
  return `/v1/admin/plans/${name}`;
}

/**
 * A kilnd and an operator credential. Options win over the environment
 * (KILN_API_URL, KILN_ADMIN_KEY); the URL defaults to http://127.0.0.1:7070.
 * Each change is written to the workspace's audit log, with the operator
 * credential as the actor.
 */
export class Admin {
  /** The HTTP client underneath, sending the operator credential. */
  readonly client: Client;

  constructor(options: AdminOptions = {}) {
    const { adminKey, ...rest } = options;
    // "" when there is none: never fall back to KILN_API_KEY, a workspace's key.
    this.client = new Client({ ...rest, apiKey: adminKey ?? env("KILN_ADMIN_KEY") ?? "", credential: OPERATOR_KEY });
  }

  get apiUrl(): string {
    return this.client.apiUrl;
  }

  // ---- workspaces -----------------------------------------------------------------------------

  /** Every live workspace, by name (GET /v1/admin/workspaces). */
  async workspaces(): Promise<AdminWorkspaceJSON[]> {
    return (await this.client.json<{ workspaces: AdminWorkspaceJSON[] }>("GET", "/v1/admin/workspaces")).workspaces;
  }

  /**
   * A new workspace (POST /v1/admin/workspaces), or one deleted before made
   * live again (with no keys). InvalidRequest naming an unknown plan or
   * limit or a bad name; Conflict when a live workspace has that name.
   */
  async createWorkspace(name: string, options: WorkspaceOptions = {}): Promise<AdminWorkspaceJSON> {
    return this.client.json<AdminWorkspaceJSON>("POST", "/v1/admin/workspaces", {
      json: { name, plan: options.plan, limits: options.limits },
    });
  }

  /** One workspace (GET /v1/admin/workspaces/{name}); NotFound if no live workspace has that name. */
  async getWorkspace(name: string): Promise<AdminWorkspaceJSON> {
    return this.client.json<AdminWorkspaceJSON>("GET", workspacePath(name));
  }

  /**
   * Change a workspace (PATCH /v1/admin/workspaces/{name}) and return it as
   * it is now. `plan` alone keeps its own limits, `limits` alone its plan;
   * `limits` replaces its own ({}: none). `suspended: true`: its keys and
   * dashboard sessions are answered 403 workspace_suspended
   * (PermissionDenied) on every route, its running sandboxes hibernated, its
   * exposed ports refused; `suspended: false` lifts that.
   */
  async updateWorkspace(name: string, update: WorkspaceUpdate): Promise<AdminWorkspaceJSON> {
    return this.client.json<AdminWorkspaceJSON>("PATCH", workspacePath(name), {
      json: { plan: update.plan, limits: update.limits, suspended: update.suspended },
    });
  }

  /**
   * Delete a workspace (DELETE /v1/admin/workspaces/{name}): its keys are
   * revoked; its usage and audit log are kept. Conflict while any of its
   * sandboxes is not deleted.
   */
  async deleteWorkspace(name: string): Promise<void> {
    await this.client.empty("DELETE", workspacePath(name));
  }

  /**
   * A new API key of `workspace` (POST /v1/admin/workspaces/{name}/keys), as
   * Client.createKey: `key` is the secret, shown in this answer only.
   */
  async createKey(workspace: string, options: KeyOptions = {}): Promise<NewKeyJSON> {
    return this.client.json<NewKeyJSON>("POST", `${workspacePath(workspace)}/keys`, { json: keyBody(options) });
  }

  /**
   * `workspace`'s API keys, oldest first (GET /v1/admin/workspaces/{name}/keys),
   * revoked ones too, as Client.keys: never a secret. NotFound if no live
   * workspace has that name.
   */
  async keys(workspace: string): Promise<ApiKeyJSON[]> {
    return (await this.client.json<{ keys: ApiKeyJSON[] }>("GET", `${workspacePath(workspace)}/keys`)).keys;
  }

  /**
   * Revoke one of `workspace`'s keys (DELETE /v1/admin/workspaces/{name}/keys/{id}),
   * as Client.revokeKey: it is refused (AuthError) from its next request on,
   * and its dashboard sessions end; the workspace's audit log names it
   * ("NAME/KEY_ID"). Revoking a revoked key is no error; NotFound for a key
   * that is not that workspace's, or no such live workspace.
   */
  async revokeKey(workspace: string, id: string): Promise<void> {
    await this.client.empty("DELETE", `${workspacePath(workspace)}/keys/${checkId(id)}`);
  }

  // ---- plans ----------------------------------------------------------------------------------

  /**
   * Every plan (GET /v1/admin/plans): the server's (shipped, plans file)
   * first, then the operator's own, each with the limits in force and what
   * the operator set over it (`operator_limits`, null when nothing).
   */
  async plans(): Promise<AdminPlanJSON[]> {
    return (await this.client.json<{ plans: AdminPlanJSON[] }>("GET", "/v1/admin/plans")).plans;
  }

  /** One plan (GET /v1/admin/plans/{name}); NotFound if there is none of that name. */
  async getPlan(name: string): Promise<AdminPlanJSON> {
    return this.client.json<AdminPlanJSON>("GET", planPath(name));
  }

  /**
   * Set the operator's limits of plan `name` (PUT /v1/admin/plans/{name})
   * and return the plan as it is now. Over a server plan each named limit
   * replaces the plan's and the rest stay ({}: the plan as shipped); another
   * name makes a plan, its unnamed limits 0 (none). The limits replace what
   * the operator set before, as a whole. Every workspace on the plan is held
   * to them from its next request, on every API replica; the change is in
   * the operator's audit log. InvalidRequest naming a bad limit.
   */
  async setPlan(name: string, limits: Record<string, number>): Promise<AdminPlanJSON> {
    return this.client.json<AdminPlanJSON>("PUT", planPath(name), { json: { limits } });
  }

  /**
   * Delete a plan the operator made (DELETE /v1/admin/plans/{name}).
   * Conflict while live workspaces are on it (the message says how many)
   * and for the server's plans (shipped, plans file, the default); NotFound
   * if there is no plan of that name. The delete is in the operator's audit
   * log.
   */
  async deletePlan(name: string): Promise<void> {
    await this.client.empty("DELETE", planPath(name));
  }

  // ---- usage ----------------------------------------------------------------------------------

  /**
   * Metered usage of every live workspace over a range, priced (GET
   * /v1/admin/usage): each workspace's totals and all of them. `from`, `to`:
   * a Date, Unix seconds or a string kilnd reads; default this month through
   * the hour under way.
   */
  async usage(query: AdminUsageQuery = {}): Promise<AdminUsageJSON> {
    return this.client.json<AdminUsageJSON>("GET", "/v1/admin/usage", {
      query: { from: whenOf(query.from), to: whenOf(query.to) },
    });
  }
}
