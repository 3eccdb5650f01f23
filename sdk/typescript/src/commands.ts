/**
 * `sandbox.commands`: running commands under the names of E2B's SDK
 * (docs/migrating.md), as thin wrappers over kiln's exec and processes.
 *
 * E2B names a command by its guest pid; kiln's API names a process by the
 * guest agent's id (a pid may be reused once its process ended). These
 * methods take the pid, as E2B's do, and look up the running process that
 * has it (one GET); they also take a CommandHandle or a Process, whose id
 * needs no lookup. kiln's own `sandbox.processes` methods take the id.
 *
 * Where E2B's behaviour differs, kiln's is kept and said (docs/migrating.md):
 * a non-zero exit is a result, not a thrown error; a background command's
 * output is read when it is waited for, not streamed; commands run with
 * /bin/sh -c, as root unless `user` says otherwise.
 */
import { NotFound } from "./errors.js";
import type { Process, ProcessOutput } from "./processes.js";
import type { Sandbox } from "./sandbox.js";
import type { StreamCallbacks } from "./stream.js";
import type { ExecResult } from "./types.js";

/** E2B's CommandStartOpts, as far as kiln has them. */
export interface CommandStartOpts extends StreamCallbacks {
  /** Start it and resolve at once with a CommandHandle. */
  background?: boolean;
  cwd?: string;
  /** A guest user name, uid or "uid:gid" (kiln's default: root). */
  user?: string;
  envs?: Record<string, string>;
  /** Keep a background command's stdin open for sendStdin, as in E2B; a
   * foreground command cannot be sent any (true throws). */
  stdin?: boolean;
  /** Kill the command after this many ms (default 60 000, as E2B; 0: no limit). */
  timeoutMs?: number;
}

// E2B's default bound, kept so that a ported program behaves as it did.
const DEFAULT_TIMEOUT_MS = 60_000;
// wait(): how long each GET .../output waits for the end before asking again.
const WAIT_STEP_S = 60;

type Target = number | CommandHandle | Process;

/** A command running in the background (E2B's CommandHandle). `pid` is the
 * guest pid, as in E2B; `id` is kiln's process id (what `sandbox.processes` takes). */
export class CommandHandle {
  readonly id: number;
  readonly pid: number;

  constructor(
    private readonly sandbox: Sandbox,
    readonly process: Process,
    private readonly callbacks: StreamCallbacks = {},
  ) {
    this.id = process.id;
    this.pid = process.pid;
  }

  /** Wait for the command to end: its output and exit status. The
   * callbacks given to run get all of its output once, when it ended: kiln
   * keeps a background process's output for reading, it does not stream it.
   * A non-zero exit is returned, not thrown. */
  async wait(): Promise<ProcessOutput> {
    let out: ProcessOutput;
    do {
      out = await this.sandbox.processes.output(this.id, { wait: WAIT_STEP_S });
    } while (out.status === "running");
    if (out.stdout) this.callbacks.onStdout?.(out.stdout);
    if (out.stderr) this.callbacks.onStderr?.(out.stderr);
    return out;
  }

  /** SIGKILL it: true, or false if it had ended already. */
  async kill(): Promise<boolean> {
    return this.sandbox.commands.kill(this);
  }

  async sendStdin(data: string | Uint8Array): Promise<void> {
    return this.sandbox.commands.sendStdin(this, data);
  }

  /** Nothing to do: a handle holds no connection (the command runs on
   * either way, as after E2B's disconnect). */
  async disconnect(): Promise<void> {}
}

function checkPid(pid: unknown): number {
  if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0) {
    throw new TypeError("a command is its pid (a positive integer), a CommandHandle or a Process");
  }
  return pid;
}

function noSuch(pid: Target): NotFound {
  const p = typeof pid === "number" ? pid : pid.pid;
  return new NotFound(`no running command with pid ${p} in this sandbox (kiln knows the processes it started: sandbox.processes.list())`, "not_found", 404);
}

/** `sandbox.commands`: run, list, kill, sendStdin, connect. */
export class Commands {
  constructor(private readonly sandbox: Sandbox) {}

  /** Run `cmd` to its end (an ExecResult; onStdout/onStderr get its output
   * as it comes), or with `background: true` start it and resolve with a
   * CommandHandle at once. */
  run(cmd: string, opts: CommandStartOpts & { background: true }): Promise<CommandHandle>;
  run(cmd: string, opts?: CommandStartOpts & { background?: false }): Promise<ExecResult>;
  run(cmd: string, opts?: CommandStartOpts): Promise<CommandHandle | ExecResult>;
  async run(cmd: string, opts: CommandStartOpts = {}): Promise<CommandHandle | ExecResult> {
    const ms = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(ms >= 0)) throw new TypeError("timeoutMs must be a number of ms, 0 or more");
    const timeout = ms ? Math.ceil(ms / 1000) : undefined;  // 0 is no limit, as an absent one
    const common = { env: opts.envs, cwd: opts.cwd, user: opts.user, timeout };
    if (opts.background) {
      const p = await this.sandbox.processes.start(cmd, { ...common, stdin: opts.stdin ?? false });
      return new CommandHandle(this.sandbox, p, { onStdout: opts.onStdout, onStderr: opts.onStderr });
    }
    if (opts.stdin) {
      throw new TypeError("kiln cannot send stdin to a command run in the foreground: start it with "
        + "background: true and use sendStdin, or give the input to sandbox.exec(cmd, { stdin })");
    }
    if (opts.onStdout || opts.onStderr) {
      return this.sandbox.execStream(cmd, { ...common, onStdout: opts.onStdout, onStderr: opts.onStderr }).wait();
    }
    return this.sandbox.exec(cmd, common);
  }

  /** The running processes kiln started (sandbox.processes.list() also has
   * the ended ones it remembers). */
  async list(): Promise<Process[]> {
    return (await this.sandbox.processes.list()).filter((p) => p.status === "running");
  }

  /** SIGKILL the command: true, or false if no running command has that
   * pid (as E2B). An unknown sandbox is still NotFound. */
  async kill(pid: Target): Promise<boolean> {
    const id = await this.find(pid);
    if (id === undefined) return false;
    try {
      await this.sandbox.processes.kill(id, "KILL");
      return true;
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
      await this.sandbox.refresh();  // the sandbox gone is an error; the process gone is false
      return false;
    }
  }

  /** Write to the stdin of a command started with `stdin: true` (NotFound
   * if no running command has that pid; Conflict if its stdin is not open). */
  async sendStdin(pid: Target, data: string | Uint8Array): Promise<void> {
    const id = await this.find(pid);
    if (id === undefined) throw noSuch(pid);
    await this.sandbox.processes.sendStdin(id, data);
  }

  /** A handle on a running command, to wait for it (NotFound if no running
   * command has that pid). */
  async connect(pid: Target): Promise<CommandHandle> {
    if (pid instanceof CommandHandle) return new CommandHandle(this.sandbox, pid.process);
    if (typeof pid === "object" && pid !== null) return new CommandHandle(this.sandbox, pid);
    checkPid(pid);
    const p = (await this.sandbox.processes.list()).find((q) => q.status === "running" && q.pid === pid);
    if (!p) throw noSuch(pid);
    return new CommandHandle(this.sandbox, p);
  }

  /** kiln's id for a handle, a Process, or the running process with this
   * guest pid (undefined if there is none). */
  private async find(pid: Target): Promise<number | undefined> {
    if (typeof pid === "object" && pid !== null) return pid.id;
    checkPid(pid);
    return (await this.sandbox.processes.list()).find((q) => q.status === "running" && q.pid === pid)?.id;
  }
}
