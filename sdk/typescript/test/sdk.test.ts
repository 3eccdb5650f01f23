/**
 * @kiln/sdk against a real kilnd with real sandboxes (tests/sdk/run): every
 * method's success and error paths, streaming as an async iterator (chunks
 * before the command ends), the terminal over a WebSocket, `await using`
 * (deletes even when the block throws), retries (idempotent requests
 * only), timeouts, and a bad API key giving AuthError everywhere. Imports
 * the built package (dist/), as a user does.
 *
 * Environment: KILN_API_URL, KILN_API_KEY, KILN_TEST_KEY2 (another
 * workspace), KILN_TEST_RATE_URL, KILN_TEST_RATE_KEY (a kilnd limited to
 * 1 request a second, without templates).
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test as nodeTest } from "node:test";

import {
  AuthError, Client, CommandHandle, Conflict, ConnectionFailed, DockerIgnore, InvalidRequest, KilnError, LimitExceeded,
  NotFound, PermissionDenied, RateLimited, Sandbox, ServerError, Timeout, contextFilter,
} from "@kiln/sdk";

const env = process.env;
let A: Sandbox;   // minimal: commands, files
let B: Sandbox;   // base: runCode (python3)
const made: string[] = [];

async function create(options: Parameters<typeof Sandbox.create>[0] = {}): Promise<Sandbox> {
  const sb = await Sandbox.create({ template: "minimal", ...options });
  made.push(sb.id);
  return sb;
}

const SHARED_A = { ttlSeconds: 3600, metadata: { owner: "ts-test" }, env: { FROM_SANDBOX: "yes" } };

/** The ids of what the two workspaces hold now: sandboxes, snapshots, apps. */
async function existing(): Promise<Set<string>> {
  const ids = new Set<string>();
  for (const key of [env.KILN_API_KEY, env.KILN_TEST_KEY2]) {
    const c = new Client({ apiKey: key });
    for (const a of await c.apps()) ids.add(a.id);
    for (const sb of await Sandbox.list({ client: c })) ids.add(sb.id);
    for (const sn of await c.snapshots()) ids.add(sn.id);
  }
  return ids;
}

/** Delete what a failed try made (not in before): the second try, and the
 * last test's check that nothing is left, start from the same place. */
async function removeNew(before: Set<string>): Promise<string[]> {
  const gone: string[] = [];
  for (const key of [env.KILN_API_KEY, env.KILN_TEST_KEY2]) {
    const c = new Client({ apiKey: key });
    for (const a of await c.apps()) if (!before.has(a.id)) { gone.push(a.id); await c.deleteApp(a.id).catch(() => undefined); }
    for (const sb of await Sandbox.list({ client: c })) if (!before.has(sb.id)) { gone.push(sb.id); await sb.delete().catch(() => undefined); }
    for (const sn of await c.snapshots()) if (!before.has(sn.id)) { gone.push(sn.id); await c.deleteSnapshot(sn.id).catch(() => undefined); }
  }
  return gone;
}

/** A shared sandbox that died (its guest lost under the emulated host's
 * load, issue 21) is made again for a test's second try, as it was made;
 * the dead one is deleted. What kilnd said of how it died comes back for
 * the FLAKY line. */
async function reviveShared(): Promise<string[]> {
  const said: string[] = [];
  const again = async (old: Sandbox | undefined, name: string, options: Parameters<typeof create>[0]) => {
    if (!old) return old;
    let status = "gone", error: string | undefined;
    try {
      const now = await Sandbox.get(old.id);
      status = now.status;
      error = now.info.error;
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
    }
    if (["running", "paused", "hibernated"].includes(status)) return old;
    await old.delete().catch(() => undefined);
    const fresh = await create(options);
    said.push(`${name} ${old.id} was ${status} (${error ?? "no error recorded"}): made again as ${fresh.id}`);
    return fresh;
  };
  A = (await again(A, "A", SHARED_A)) as Sandbox;
  B = (await again(B, "B", { template: "base" })) as Sandbox;
  return said;
}

/**
 * A test that fails is tried once more at once, in this same kilnd, as
 * tests/sdk/test_python.py does (a guest that died under the emulated
 * host's load took the whole group's rerun in a fresh host: about 300 s):
 * what the first try made is deleted, a dead shared sandbox made again,
 * and a pass the second time prints the first failure as a FLAKY line,
 * which tests/run lists at the end. A second failure is the test's.
 * KILN_SDK_RETRY=0: no second try.
 */
function test(name: string, fn: () => unknown): void {
  nodeTest(name, async () => {
    const retry = env.KILN_SDK_RETRY !== "0";
    const before = retry ? await existing() : new Set<string>();
    try {
      await fn();
      return;
    } catch (e) {
      if (!retry) throw e;
      const first = String((e as Error)?.message ?? e).replace(/\s+/g, " ").slice(0, 400);
      let gone: string[];
      try {
        gone = await removeNew(before);
      } catch {
        throw e;   // kilnd itself gone: no second try
      }
      let revived: string[];
      try {
        revived = await reviveShared();
      } catch (e2) {
        revived = [`looking at the shared sandboxes failed: ${String(e2)}`];
      }
      const more = revived.length ? ` [${revived.join("; ")}]` : "";
      console.log(`  ${name} failed; trying it once more (deleted what the try made: ${gone.join(" ") || "nothing"})${more}`);
      await fn();
      console.log(`FLAKY ${env.KILN_TEST_PREFIX ?? ""}${name.replace(/\s+/g, "_")}: the first try failed: ${first}${more}`);
    }
  });
}

/** fn rejects with an instance of cls (and this code). */
async function rejects<T extends KilnError | Error>(fn: () => Promise<unknown>, cls: new (...a: any[]) => T,
  code?: string): Promise<T> {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof cls, `wanted ${cls.name}, got ${(e as Error)?.constructor?.name}: ${String(e)}`);
    if (code !== undefined) assert.equal((e as unknown as KilnError).code, code, String(e));
    return e as T;
  }
  assert.fail(`did not throw ${cls.name}`);
}

/**
 * GET url where its host name (PORT-ID.DOMAIN, app-ID.DOMAIN: kilnd's
 * --domain, which resolves nowhere on this machine) goes as the Host header
 * to kilnd's own address, as a DNS name pointing at kilnd would send it.
 */
function getByHost(url: string, headers: Record<string, string> = {}): Promise<[number, string]> {
  const api = new URL(env.KILN_API_URL!), u = new URL(url);
  const tls = api.protocol === "https:";
  return new Promise((resolve, reject) => {
    const req = (tls ? httpsRequest : httpRequest)({
      host: api.hostname, port: api.port, path: u.pathname + u.search, method: "GET", headers: { ...headers, Host: u.host },
      ...(tls ? { servername: "localhost" } : {}),   // the test CA's certificate names localhost and 127.0.0.1
    }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => { body += d; });
      res.on("end", () => resolve([res.statusCode ?? 0, body]));
    });
    req.on("error", reject);
    req.end();
  });
}

const ghost = () => new Sandbox(A.client, { ...A.info, id: "sbx_doesnotexist" });

test("config from the environment and options", () => {
  const c = new Client();
  assert.equal(c.apiUrl, env.KILN_API_URL);
  assert.equal(c.apiKey, env.KILN_API_KEY);
  const c2 = new Client({ apiUrl: "http://example.invalid:1/", apiKey: "kiln_x" });
  assert.deepEqual([c2.apiUrl, c2.apiKey], ["http://example.invalid:1", "kiln_x"]);
  assert.throws(() => new Client({ apiUrl: "ftp://x" }), TypeError);
  assert.throws(() => new Client({ maxRetries: -1 }), TypeError);
});

test("buildTemplate's context: what .dockerignore hides is not sent (tests/unit/context.sh's rules)", async () => {
  const { mkdir } = await import("node:fs/promises");
  const dir = await mkdtemp(join(tmpdir(), "kiln-ctx-"));
  try {
    for (const d of ["node_modules/lib", "docs/old", "src/a/b", "keep", "build"]) await mkdir(join(dir, d), { recursive: true });
    for (const f of ["Dockerfile", "build/Dockerfile.dev", "node_modules/lib/index.js", ".env", "docs/notes.txt",
      "docs/old/a.txt", "src/a/b/c.bak", "src/a/b/c.c", "src/log1.txt", "src/logx.txt", "keep/k.txt", "keep/j.txt", "big.bin"])
      await writeFile(join(dir, f), "x\n");
    await writeFile(join(dir, ".dockerignore"), ["# a comment", "node_modules", "/.env", "docs/old/", "**/*.bak",
      "src/log[0-9].txt", "keep", "!keep/k.txt", "*.bin", "Dockerfile", ".dockerignore", "build"].join("\n"));
    const keep = await contextFilter(dir);
    const sent: string[] = [];
    const walk = async (rel: string): Promise<void> => {
      for (const n of (await readdir(join(dir, rel), { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1))) {
        const r = rel ? `${rel}/${n.name}` : n.name;
        const k = keep(r, n.isDirectory());
        if (k.list) sent.push(r);
        if (n.isDirectory() && k.walk) await walk(r);
      }
    };
    await walk("");
    assert.deepEqual(sent, [".dockerignore", "Dockerfile", "docs", "docs/notes.txt", "keep/k.txt", "src", "src/a",
      "src/a/b", "src/a/b/c.c", "src/logx.txt"]);
    const dev = await contextFilter(dir, "build/Dockerfile.dev");
    assert.deepEqual([dev("build", true), dev("build/Dockerfile.dev", false)],
      [{ list: false, walk: true }, { list: true, walk: false }]);
    // Without an exception an ignored directory is not walked, unless it holds the Dockerfile.
    await writeFile(join(dir, ".dockerignore"), "build\nnode_modules\n");
    const plain = await contextFilter(dir, "build/Dockerfile.dev");
    assert.deepEqual([plain("build", true), plain("node_modules", true)], [{ list: false, walk: true }, { list: false, walk: false }]);
    assert.throws(() => new DockerIgnore("ok\nsrc/[a-\n"), /line 2/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("buildTemplate: diskMib, buildNet, vcpus and memoryMib reach the build (docs/templates.md \"Disk size\", \"Network\")", async () => {
  const dir = await mkdtemp(join(tmpdir(), "kiln-ctx-"));
  const c = new Client();
  const name = `tsdisk${process.pid % 100000}`;
  try {
    await writeFile(join(dir, "Dockerfile"), "FROM kiln/base\nRUN true\n");
    // Checked here, before anything is sent, naming the option.
    await assert.rejects(() => c.buildTemplate(dir, name, { diskMib: 10 }), (e: Error) =>
      e instanceof TypeError && e.message.includes("diskMib 10: want a number of MiB from 64"));
    await assert.rejects(() => c.buildTemplate(dir, name, { buildNet: "10.0.0.0/8," }), (e: Error) =>
      e instanceof TypeError && e.message.includes("buildNet"));
    await assert.rejects(() => c.buildTemplate(dir, name, { vcpus: 9 }), (e: Error) =>
      e instanceof TypeError && e.message.includes("vcpus 9: want a number of vCPUs from 1 to 8"));
    await assert.rejects(() => c.buildTemplate(dir, name, { memoryMib: 64 }), (e: Error) =>
      e instanceof TypeError && e.message.includes("memoryMib 64: want a number of MiB from 128"));
    // A CIDR is kilnd's to check: its 400 names build_net (so it was sent as build_net).
    const bad = await rejects(() => c.buildTemplate(dir, name, { buildNet: "10.0.0.0/33" }), InvalidRequest);
    assert.ok(bad.message.includes("build_net '10.0.0.0/33'"), bad.message);
    // A disk smaller than base's 4 GiB image: the build refuses it before a
    // build VM boots, naming the size it got.
    await c.buildTemplate(dir, name, { diskMib: 1024, vcpus: 2, memoryMib: 512 });
    let end: Record<string, unknown> = {};
    const shape: string[] = [];
    for await (const ev of c.followTemplateLogs(name)) {
      if (ev.kind === "end") end = ev;
      if (ev.kind === "line" && String(ev.text).includes("vCPUs and")) shape.push(String(ev.text));
    }
    // The version's shape is in the log before the disk check ends the build.
    assert.ok(shape.some((l) => l.includes("version 1: 2 vCPUs and 512 MiB")), JSON.stringify(shape));
    assert.equal(end.status, "failed", JSON.stringify(end));
    assert.ok(String(end.error).includes("--disk 1024: smaller than the FROM image's 4096 MiB"), JSON.stringify(end));
  } finally {
    await c.deleteTemplate(name).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
});

test("create, get, list", async () => {
  A = await create(SHARED_A);
  assert.deepEqual([A.status, A.template, A.metadata, A.ttlSeconds], ["running", "minimal", { owner: "ts-test" }, 3600]);
  assert.ok((A.readyMs ?? 0) > 0);
  B = await create({ template: "base" });
  const got = await Sandbox.get(A.id);
  assert.deepEqual([got.id, got.status], [A.id, "running"]);
  const ids = (await Sandbox.list()).map((s) => s.id);
  assert.ok(ids.includes(A.id) && ids.includes(B.id), String(ids));
  assert.deepEqual(await Sandbox.list({ status: "hibernated" }), []);
});

test("list: filters and pages", async () => {
  const tag = `list-ts-${process.pid}`;
  const mine: Sandbox[] = [];
  for (let i = 0; i < 3; i++) mine.push(await create({ metadata: { suite: tag, n: String(i) } }));
  const ids = (l: Sandbox[]) => l.map((s) => s.id);
  assert.deepEqual(ids(await Sandbox.list({ metadata: { suite: tag } })), ids(mine), "metadata, oldest first");
  assert.deepEqual(ids(await Sandbox.list({ metadata: { suite: tag, n: "1" } })), [mine[1].id]);
  assert.deepEqual(ids(await Sandbox.list({ metadata: { suite: tag }, template: "base" })), []);
  assert.deepEqual(ids(await Sandbox.list({ metadata: { suite: tag }, status: "running", template: "minimal" })), ids(mine));
  const p1 = await Sandbox.listPage({ metadata: { suite: tag }, limit: 2 });
  assert.deepEqual(ids(p1.sandboxes), ids(mine.slice(0, 2)));
  assert.equal(typeof p1.nextCursor, "string");
  const p2 = await Sandbox.listPage({ metadata: { suite: tag }, limit: 2, cursor: p1.nextCursor ?? undefined });
  assert.deepEqual([ids(p2.sandboxes), p2.nextCursor], [[mine[2].id], null]);
  assert.deepEqual(ids(await Sandbox.list({ metadata: { suite: tag }, limit: 2 })), ids(mine.slice(0, 2)));
  const e = await rejects(() => Sandbox.listPage({ limit: 0 }), InvalidRequest);
  assert.ok(e.message.includes("limit"), e.message);
  for (const sb of mine) await sb.delete();
});

test("logs: tail and follow", async () => {
  await A.exec("echo ts-log-marker > /dev/console");
  const lines = await A.logs({ tail: 50 });
  assert.ok(lines.some((l) => l.source === "console" && l.text === "ts-log-marker" && l.ts === null), JSON.stringify(lines.slice(-5)));
  assert.deepEqual(await A.logs({ tail: 1 }), [{ source: "console", text: "ts-log-marker", ts: null }]);
  const e = await rejects(() => A.logs({ tail: -1 }), InvalidRequest);
  assert.ok(e.message.includes("tail"), e.message);
  const it = A.followLogs({ tail: 1 });
  assert.equal((await it.next()).value?.text, "ts-log-marker");
  await A.exec("echo ts-log-later > /dev/console");
  assert.equal((await it.next()).value?.text, "ts-log-later");
  await it.return(undefined);
});

test("an ended sandbox: sandbox_ended, why and when", async () => {
  const sb = await create();
  await sb.delete();
  const e = await rejects(() => Sandbox.get(sb.id), NotFound, "sandbox_ended");
  assert.equal(e.details.ended, "deleted");
  assert.ok(String(e.details.ended_at).endsWith("Z"), String(e.details.ended_at));
});

test("create errors", async () => {
  const t = await rejects(() => Sandbox.create({ template: "no_such" }), NotFound, "template_not_found");
  assert.deepEqual(t.details.templates, ["minimal", "base", "code-interpreter", "postgres"]);
  assert.ok(t.message.includes("minimal, base, code-interpreter, postgres"), t.message);
  await rejects(() => Sandbox.create({ template: "minimal", ttlSeconds: -5 }), InvalidRequest);
  await rejects(() => Sandbox.create({ fromSnapshot: "snap_doesnotexist" }), NotFound, "not_found");
  await rejects(() => Sandbox.create({ template: "minimal", fromSnapshot: "snap_x" }), TypeError);
});

/** The size of sb's / in 1K-blocks, as df says inside the guest. */
async function rootKib(sb: Sandbox): Promise<number> {
  const r = await sb.exec("df -k / | tail -1");
  assert.equal(r.exitCode, 0, r.stderr);
  return Number(r.stdout.split(/\s+/)[1]);
}

test("create's diskMib: the root grown, the size in create, get and list, bad sizes named", async () => {
  // docs/templates.md "A sandbox's disk size". One sandbox grown by one
  // ext4 group (minimal's 64 MiB to 72: the cheapest grow); A, a plain
  // create, has its template's size, and its / is the one compared.
  assert.equal(A.diskMib, 64, "a plain create's diskMib: minimal's, not null");
  const plain = await rootKib(A);
  const sb = await create({ diskMib: 72 });
  assert.equal(sb.diskMib, 72, "create's answer");
  assert.equal((await Sandbox.get(sb.id)).diskMib, 72, "get");
  assert.deepEqual((await Sandbox.list()).filter((s) => s.id === sb.id).map((s) => s.diskMib), [72], "list");
  const grown = await rootKib(sb);
  await sb.delete();
  // ext4 keeps about an eighth of minimal's small disk (journal, inode
  // tables): / is a little under 72 MiB, and more than the 64 MiB one.
  assert.ok(grown > 0.8 * 72 * 1024 && grown <= 72 * 1024 && grown > plain, `/ of ${grown} KiB grown, ${plain} KiB plain`);
  // Refused before anything is made, each naming disk_mib.
  const small = await rejects(() => Sandbox.create({ template: "minimal", diskMib: 32 }), InvalidRequest);
  assert.ok(small.message.includes("disk_mib 32 is smaller than template minimal's disk of 64 MiB"), small.message);
  for (const bad of ["lots" as unknown as number, 1048577]) {
    const e = await rejects(() => Sandbox.create({ template: "minimal", diskMib: bad }), InvalidRequest);
    assert.ok(e.message.includes("disk_mib"), e.message);
  }
  const limited = new Client({ apiKey: env.KILN_TEST_LIMITED_KEY });
  const over = await rejects(() => Sandbox.create({ template: "minimal", diskMib: 5000, client: limited }), LimitExceeded, "limit_exceeded");
  assert.deepEqual([over.limit, over.value, over.plan], ["disk_mib", 4096, "free"]);
});

test("volumes: create, list, get, mount at create, detach, attach, delete", async () => {
  const c = A.client;
  const name = `ts-vol-${Date.now() % 100000}`;
  const v = await c.createVolume(name, 8);
  try {
    assert.ok(v.id.startsWith("vol_") && v.size_mib === 8 && v.attached_to.length === 0, JSON.stringify(v));
    await rejects(() => c.createVolume(name, 8), Conflict);
    await rejects(() => c.createVolume("Bad_Name", 8), InvalidRequest);
    assert.ok((await c.volumes()).some((x) => x.id === v.id));
    const sb = await create({ volumes: [{ name, path: "/vol", readOnly: false }] });
    try {
      const r = await sb.exec("echo from-ts > /vol/f && sync && cat /vol/f");
      assert.equal(r.stdout.trim(), "from-ts");
      assert.deepEqual((await c.getVolume(v.id)).attached_to.map((a) => a.sandbox_id), [sb.id]);
      await rejects(() => c.deleteVolume(v.id), Conflict);
      // Let go and taken again while the sandbox runs.
      await sb.detachVolume(name);
      assert.deepEqual((await c.getVolume(v.id)).attached_to, []);
      await rejects(() => sb.detachVolume(name), NotFound);
      const got = await sb.attachVolume(name, "/again", { readOnly: true });
      assert.deepEqual(got.attached_to.map((a) => [a.sandbox_id, a.path, a.read_only]), [[sb.id, "/again", true]]);
      assert.equal((await sb.exec("cat /again/f")).stdout.trim(), "from-ts");
      await rejects(() => sb.attachVolume(name, "/third"), Conflict);
    } finally {
      await sb.delete();
    }
  } finally {
    await c.deleteVolume(v.id);
  }
  await rejects(() => c.getVolume(v.id), NotFound);
});

test("create sends allowOut", async () => {
  // The egress policy of servers that have one (issue 7); a server without
  // it refuses the field by name, which shows that it was sent.
  try {
    const sb = await create({ allowOut: ["10.0.0.0/8"] });
    await sb.delete();
  } catch (e) {
    assert.ok(e instanceof InvalidRequest && e.message.includes("allow_out"), String(e));
  }
});

test("egress policy: create with denyOut, setNetwork, a bad CIDR named", async () => {
  let sb: Sandbox;
  try {
    sb = await create({ denyOut: ["192.0.2.0/24"] });
  } catch (e) {
    // A server without egress policies refuses the field by name.
    assert.ok(e instanceof InvalidRequest && e.message.includes("deny_out"), String(e));
    return;
  }
  assert.deepEqual(sb.network, { allow_internet: true, allow_out: [], deny_out: ["192.0.2.0/24"] });
  assert.equal(await sb.setNetwork({ allowOut: ["10.1.2.3"], allowInternet: true }), sb);
  assert.deepEqual(sb.network, { allow_internet: true, allow_out: ["10.1.2.3/32"], deny_out: [] });
  await sb.setNetwork({ allowInternet: false });
  assert.equal((await Sandbox.get(sb.id)).network?.allow_internet, false, "get sees the new policy");
  const e = await rejects(() => sb.setNetwork({ denyOut: ["not-a-cidr"] }), InvalidRequest);
  assert.ok(e.message.includes("not-a-cidr"), e.message);
  assert.equal((await Sandbox.get(sb.id)).network?.allow_internet, false, "a refused policy changes nothing");
  await sb.delete();
});

test("get errors", async () => {
  const e = await rejects(() => Sandbox.get("sbx_doesnotexist"), NotFound, "not_found");
  assert.equal(e.status, 404);
  await rejects(() => Sandbox.get("../v1/x"), TypeError);
  const other = new Client({ apiKey: env.KILN_TEST_KEY2 });
  await rejects(() => Sandbox.get(A.id, { client: other }), NotFound);
  assert.deepEqual(await Sandbox.list({ client: other }), []);
});

test("exec", async () => {
  let r = await A.exec("echo hello; echo oops >&2; exit 3");
  assert.deepEqual([r.stdout, r.stderr, r.exitCode, r.timedOut], ["hello\n", "oops\n", 3, false]);
  assert.ok(r.durationMs > 0);
  r = await A.exec(["/bin/sh", "-c", 'echo "$FROM_SANDBOX $FOO"; pwd'], { env: { FOO: "bar" }, cwd: "/tmp" });
  assert.equal(r.stdout, "yes bar\n/tmp\n");
  assert.equal((await A.exec(["cat"], { stdin: "typed in" })).stdout, "typed in");
  r = await A.exec("sleep 30", { timeout: 1 });
  assert.deepEqual([r.timedOut, r.exitCode], [true, 137]);
  // Every ExecResult field is on the wire, empty output included.
  const raw = await A.client.json<Record<string, unknown>>("POST", `/v1/sandboxes/${A.id}/exec`, { json: { cmd: "true" } });
  assert.deepEqual(Object.keys(raw).sort(), ["duration_ms", "exit_code", "signal", "stderr", "stdout", "timed_out", "truncated"]);
  assert.deepEqual([raw.stdout, raw.stderr, raw.truncated, raw.signal], ["", "", false, null]);
  r = await A.exec("true");
  assert.deepEqual([r.stdout, r.stderr, r.exitCode, r.signal, r.timedOut, r.truncated], ["", "", 0, null, false, false]);
});

test("exec errors", async () => {
  await rejects(() => A.exec(["/no/such/program"]), InvalidRequest);
  await rejects(() => A.exec("true", { cwd: "relative" }), InvalidRequest);
  await rejects(() => A.exec([]), TypeError);
  await rejects(() => ghost().exec("true"), NotFound);
});

test("exec as a user, and background processes", async () => {
  assert.equal((await A.exec("id -u", { user: "4321" })).stdout.trim(), "4321");
  const p = await A.processes.start("echo up; while :; do sleep 1; echo tick; done", { user: "4321" });
  assert.equal(p.status, "running");
  const listed = (await A.processes.list()).filter((q) => q.id === p.id);
  assert.deepEqual(listed.map((q) => [q.status, q.pid]), [["running", p.pid]]);
  await new Promise((r) => setTimeout(r, 2000));
  const out = await A.processes.output(p);
  assert.equal(out.status, "running");
  assert.ok(out.stdout.startsWith("up\ntick\n"), `output while it runs: ${JSON.stringify(out.stdout)}`);
  await A.processes.kill(p, "TERM");
  const done = await A.processes.output(p.id, { wait: 30 });
  assert.deepEqual([done.status, done.signal], ["exited", 15]);
  await rejects(() => A.processes.kill(p, "NOPE"), InvalidRequest);
  await rejects(() => A.processes.output(p, { wait: -1 }), TypeError);
  await rejects(() => A.processes.output(999999), NotFound);
});

test("process stdin: sendStdin, close, errors", async () => {
  const p = await A.processes.start("while IFS= read -r l; do echo got:$l; done; echo eof", { stdin: true });
  assert.equal(await A.processes.sendStdin(p, "hello\n"), 6);
  await A.processes.sendStdin(p.id, new TextEncoder().encode("world\n"), { close: true });
  const out = await A.processes.output(p, { wait: 30 });
  assert.deepEqual([out.status, out.stdout, out.exitCode], ["exited", "got:hello\ngot:world\neof\n", 0]);
  const q = await A.processes.start("sleep 30");
  await rejects(() => A.processes.sendStdin(q, "x"), Conflict);
  await A.processes.kill(q);
  const r = await A.processes.start("cat", { stdin: true });
  await A.processes.sendStdin(r, "a");
  await A.processes.closeStdin(r);
  const ro = await A.processes.output(r, { wait: 30 });
  assert.deepEqual([ro.stdout, ro.exitCode], ["a", 0]);
  await rejects(() => A.processes.sendStdin(999999, "x"), NotFound);
});

test("processes.follow: a running process's output as it prints it", async () => {
  const p = await A.processes.start("echo first; sleep 3; echo second; echo oops >&2; exit 5");
  const s = A.processes.follow(p);
  const t0 = Date.now();
  const got: Array<[number, string, string]> = [];
  for await (const c of s) got.push([Date.now() - t0, c.stream, c.data]);
  const end = Date.now() - t0;
  assert.deepEqual([got.filter((g) => g[1] === "stdout").map((g) => g[2]).join(""), got.filter((g) => g[1] === "stderr").map((g) => g[2]).join("")],
    ["first\nsecond\n", "oops\n"]);
  const firstAt = got.find((g) => g[2].includes("first"))![0];
  assert.ok(end - firstAt >= 1500, `'first' at ${firstAt} ms, the end at ${end} ms`);
  assert.deepEqual([s.ended, s.exitCode, s.signal], [true, 5, null]);
  await rejects(async () => { for await (const _ of A.processes.follow(p)) { /* forgotten */ } }, NotFound);
  const q = await A.processes.start("while :; do echo tick; sleep 0.3; done");
  for await (const c of A.processes.follow(q)) {
    assert.ok(c.data.startsWith("tick"), c.data);
    break;
  }
  assert.equal((await A.processes.output(q)).status, "running");
  await A.processes.kill(q);
});

test("files.watch and watchDir: changes as they happen", async () => {
  await A.files.makeDir("/tmp/tw");
  const w = await A.files.watch("/tmp/tw", { recursive: true });
  await A.exec("echo x > /tmp/tw/a; mkdir /tmp/tw/d; echo y > /tmp/tw/d/b; rm /tmp/tw/a");
  const seen: string[] = [];
  for await (const ev of w) {
    seen.push(`${ev.type} ${ev.name}`);
    if (ev.type === "remove" && ev.name === "a") break;
  }
  for (const want of ["create a", "write a", "create d", "create d/b", "remove a"]) {
    assert.ok(seen.includes(want), `${want} in ${JSON.stringify(seen)}`);
  }
  const got: string[] = [];
  let saw!: () => void;
  const sawC = new Promise<void>((r) => { saw = r; });
  const h = await A.files.watchDir("/tmp/tw", (ev) => {
    got.push(`${ev.type} ${ev.name}`);
    if (ev.name === "c") saw();
  });
  await A.exec("echo c > /tmp/tw/c");
  await sawC;
  await h.stop();
  assert.ok(got.includes("create c"), JSON.stringify(got));
  await rejects(() => A.files.watch("/tmp/no-such-dir"), NotFound);
});

test("execStream: an async iterator with chunks before the end", async () => {
  const t0 = Date.now();
  const seen: Array<[string, string, number]> = [];
  const stream = A.execStream("echo first; sleep 3; echo second; echo err >&2");
  for await (const chunk of stream) seen.push([chunk.stream, chunk.data, Date.now() - t0]);
  const r = await stream.result;
  const end = Date.now() - t0;
  const first = seen.find(([s, d]) => s === "stdout" && d.includes("first"));
  assert.ok(first && end - first[2] >= 2000, `first chunk at ${first?.[2]} ms, end at ${end} ms`);
  assert.deepEqual([r.stdout, r.stderr, r.exitCode], ["first\nsecond\n", "err\n", 0]);
  assert.ok(seen.some(([s]) => s === "stderr"));
});

test("execStream: callbacks and wait()", async () => {
  const out: string[] = [];
  const r = await A.execStream(String.raw`printf '\303'; sleep 1; printf '\251\n'; printf '\377\n'`,
    { onStdout: (d) => out.push(d) }).wait();
  assert.equal(r.stdout, "\u00e9\n\ufffd\n", "UTF-8 across chunks, invalid bytes replaced");
  assert.equal(out.join(""), r.stdout);
});

test("execStream: errors", async () => {
  await rejects(() => ghost().execStream("true").wait(), NotFound);
  await rejects(() => A.execStream("true", { cwd: "relative" }).wait(), InvalidRequest);
});

test("execStream: leaving the loop kills the command", async () => {
  await A.exec("rm -f /tmp/after");
  for await (const chunk of A.execStream("echo go; sleep 2; touch /tmp/after")) {
    assert.equal(chunk.data, "go\n");
    break;
  }
  await new Promise((r) => setTimeout(r, 4000));
  assert.equal(await A.files.exists("/tmp/after"), false, "the command went on");
});

test("exposePort: a server in the sandbox through kiln's proxy", async () => {
  await B.exec("mkdir -p /srv/ts && echo from the sandbox > /srv/ts/hi.txt && " +
    "(setsid python3 -m http.server 8081 --bind 127.0.0.1 --directory /srv/ts > /dev/null 2>&1 < /dev/null &)");
  const url = await B.exposePort(8081);
  assert.ok(url.endsWith(`/v1/sandboxes/${B.id}/proxy/8081/`), url);
  assert.deepEqual((await B.ports()).map((p) => [p.port, p.public]), [[8081, false]]);
  let status = 0;
  let body = "";
  for (let i = 0; i < 120; i++) { // 502 until the server listens
    const resp = await fetch(url + "hi.txt", { headers: { Authorization: `Bearer ${env.KILN_API_KEY}` } });
    status = resp.status;
    body = await resp.text();
    if (status !== 502) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.deepEqual([status, body], [200, "from the sandbox\n"]);
  const link = await B.previewUrl(8081, { ttlSeconds: 120 });
  const viaLink = await fetch(link.replace("/?", "/hi.txt?"));  // no key
  assert.deepEqual([viaLink.status, await viaLink.text()], [200, "from the sandbox\n"], "a preview link");
  await rejects(() => B.previewUrl(8081, { ttlSeconds: 5 }), RangeError);
  await rejects(() => B.previewUrl(8082), NotFound);
  assert.equal(await B.exposePort(8081, { public: true }), url);
  assert.equal((await fetch(url + "hi.txt")).status, 200, "public: no key needed");
  await B.unexposePort(8081);
  assert.deepEqual(await B.ports(), []);
  await rejects(() => B.unexposePort(8081), NotFound);
  await rejects(() => B.exposePort(0), RangeError);
});

test("runCode: every language keeps state in its default context (E2B's); errors are structured", async () => {
  const r = await B.runCode("import sys; rc_x = 41; print(6*7); print('e', file=sys.stderr)");
  assert.deepEqual([r.stdout, r.stderr, r.error], ["42\n", "e\n", null]);
  assert.equal((await B.runCode("rc_x + 1")).text, "42");
  assert.equal((await B.code.run("rc_x")).text, "41");
  const ctx = await B.code.createContext();
  try {
    assert.equal((await B.runCode("rc_x", "python", { context: ctx })).error?.name, "NameError");
  } finally {
    await B.code.deleteContext(ctx);
  }
  const z = await B.runCode("1/0");
  assert.deepEqual([z.error?.name, z.error?.traceback.includes("ZeroDivisionError")], ["ZeroDivisionError", true]);
  const seen: string[] = [];
  assert.equal((await B.runCode("print('s')", "python", { onStdout: (t) => { seen.push(t); } })).stdout, "s\n");
  assert.equal(seen.join(""), "s\n");
  await rejects(() => B.runCode("1", "python", { cwd: "/tmp" }), TypeError);
  await rejects(() => B.runCode("x", "cobol"), TypeError);
  // bash: exports, cd and functions last from call to call.
  assert.equal((await B.runCode('export TS_FOO=20; cd /tmp; ts_f() { echo "f$1"; }', "bash")).error, null);
  assert.equal((await B.runCode('echo "$((TS_FOO * 2 + 2)) $PWD"; ts_f y', "bash")).stdout, "42 /tmp\nfy\n");
  const e = await B.runCode("ls /ts-missing", "bash");
  assert.deepEqual([e.error?.name, e.error?.value, e.error?.traceback.includes("ts-missing")], ["NonZeroExit", "exit status 2", true]);
  assert.equal((await B.runCode("echo $TS_FOO", "bash")).stdout, "20\n", "the context lives on after its error");
  const ctx2 = await B.createCodeContext({ language: "bash", cwd: "/etc" });
  try {
    assert.equal(ctx2.language, "bash");
    assert.equal((await B.runCode('echo "[$TS_FOO] $PWD"', undefined, { context: ctx2 })).stdout, "[] /etc\n");
    assert.equal((await B.runCode("exit 5", undefined, { context: ctx2 })).error?.name, "InterpreterDied");
    assert.equal((await B.runCode("pwd", undefined, { context: ctx2 })).stdout, "/etc\n", "a dead shell comes back");
    await rejects(() => B.runCode("1", "python", { context: ctx2 }), InvalidRequest);
  } finally {
    await B.removeCodeContext(ctx2);
  }
  await rejects(() => B.runCode("1", "javascript"), InvalidRequest, "unsupported");  // base has no node
  // envs (E2B's): that cell's environment variables, gone in the next; what the cell starts has them.
  assert.equal((await B.runCode("import os, subprocess; (os.environ['TS_E'], subprocess.check_output('echo $TS_E', shell=True))",
    "python", { envs: { TS_E: "ts" } })).text, "('ts', b'ts\\n')");
  assert.equal((await B.runCode("import os; os.environ.get('TS_E', 'unset')")).text, "'unset'");
  assert.equal((await B.runCode('echo "[$TS_E]"', "bash", { envs: { TS_E: "it's $HOME" } })).stdout, "[it's $HOME]\n");
  assert.equal((await B.runCode('echo "[$TS_E] $TS_FOO"', "bash")).stdout, "[] 20\n", "gone; the context's exports kept");
  assert.equal((await B.code.run('echo "[$TS_E]"', { language: "sh", envs: { TS_E: "sh" } })).stdout, "[sh]\n");
  const bad = await rejects(() => B.runCode("1", "python", { envs: { "1BAD": "x" } }), InvalidRequest);
  assert.ok(bad.message.includes("'1BAD' is not a variable name"), bad.message);
});

// The code-interpreter template's outcome: KILN_TEST_CODE_INTERPRETER, or the KILN_SDK_CODE_INTERPRETER
// line tests/sdk/serve prints in the host's log (KILN_TEST_HOST_LOG) when its background build ends,
// waited for (15 minutes at most); "" if neither said anything.
async function codeInterpreterBuilt(): Promise<string> {
  const deadline = Date.now() + 900_000;
  let word = env.KILN_TEST_CODE_INTERPRETER ?? "";
  while (!word && env.KILN_TEST_HOST_LOG && Date.now() < deadline) {
    const line = (await readFile(env.KILN_TEST_HOST_LOG, "utf8")).split("\n")
      .find((l) => l.startsWith("KILN_SDK_CODE_INTERPRETER="));
    word = line ? line.slice(line.indexOf("=") + 1).trim() : "";
    if (!word) await new Promise((ok) => setTimeout(ok, 1000));
  }
  return word;
}

// Real node in a guest, through the SDK: the code-interpreter template (tests/sdk/serve builds it
// in the background; not built is a failure saying why). One context (js, an alias), a few cells.
test("javascript: a context keeps its globals; top-level await gives the awaited value", async () => {
  const built = await codeInterpreterBuilt();
  assert.ok(built.startsWith("built"), `no code-interpreter template to run javascript in: ${built || "tests/sdk/serve said nothing"}`);
  const sb = await create({ template: "code-interpreter" });
  try {
    const ctx = await sb.createCodeContext({ language: "js" });
    assert.equal(ctx.language, "javascript");
    const r = await sb.runCode("var tj = 40; const tk = 2; console.log(`node ${process.versions.node}`)", undefined, { context: ctx });
    assert.deepEqual([r.stdout.startsWith("node "), r.error], [true, null], r.stdout);
    const a = await sb.runCode("let ta = await new Promise((ok) => setTimeout(() => ok(tj), 10)); await (async () => ta + tk)()",
      "javascript", { context: ctx });
    assert.deepEqual([a.text, a.error], ["42", null], "the cell's value is the awaited one");
    assert.equal((await sb.code.run("[ta, tk, typeof tj]", { context: ctx })).text, "[ 40, 2, 'number' ]",
      "the awaited cell's let, the first cell's const and var last");
    const e = await sb.code.run("await Promise.reject(new RangeError('no way'))", { context: ctx, language: "node" });
    assert.deepEqual([e.error?.name, e.error?.value, e.text], ["RangeError", "no way", undefined]);
    await rejects(() => sb.runCode("1", "python", { context: ctx }), InvalidRequest);
    await rejects(() => sb.code.createContext({ language: "cobol" }), TypeError);
    assert.ok((await sb.listCodeContexts()).some((c) => c.id === ctx.id && c.language === "javascript"));
    await sb.removeCodeContext(ctx);
  } finally {
    await sb.delete();
  }
});

test("code interpreter: state in contexts, errors, timeouts, forks", async () => {
  let r = await B.code.run("tx = 20\nprint('set')");
  assert.deepEqual([r.stdout, r.error, r.text], ["set\n", null, undefined]);
  assert.equal((await B.code.run("tx * 2 + 2")).text, "42");
  const ctx = await B.code.createContext();
  r = await B.code.run("tx", { context: ctx });
  assert.equal(r.error?.name, "NameError");
  r = await B.code.run("{'a': [1, 2]}");
  assert.equal(r.results[0].text, "{'a': [1, 2]}");
  r = await B.code.run("while True: pass", { timeout: 2 });
  assert.equal(r.error?.name, "TimeoutError");
  assert.equal((await B.code.run("tx")).text, "20");
  const t0 = Date.now();
  const seen: number[] = [];
  const st = await B.code.run("import time\nfor i in range(3):\n    print(i)\n    time.sleep(1)", {
    onStdout: () => { seen.push(Date.now() - t0); },
  });
  const end = Date.now() - t0;
  assert.equal(st.stdout, "0\n1\n2\n");
  assert.ok(seen.length > 0 && end - seen[0] >= 1500, `first output at ${seen[0]} ms, end at ${end} ms`);
  const [child] = await B.fork();
  try {
    assert.equal((await child.code.run("tx + 1")).text, "21");
  } finally {
    await child.delete();
  }
  await B.code.deleteContext(ctx);
  await rejects(() => B.code.run("1", { context: ctx }), NotFound);
});

test("files: write, read, list, stat, exists, remove", async () => {
  const f = A.files;
  assert.equal(await f.write("/work/dir/hello.txt", "héllo\n"), 7);
  assert.equal(await f.readText("/work/dir/hello.txt"), "héllo\n");
  const blob = new Uint8Array(2560).map((_, i) => i % 256);
  await f.write("/work/dir/blob.bin", blob, { mode: 0o600 });
  assert.deepEqual(await f.read("/work/dir/blob.bin"), blob);
  const st = await f.stat("/work/dir/blob.bin");
  assert.deepEqual([st.type, st.size, st.mode, st.path, st.name], ["file", 2560, "0600", "/work/dir/blob.bin", "blob.bin"]);
  assert.equal((await f.stat("/work/dir")).type, "dir");
  assert.deepEqual((await f.list("/work/dir")).map((e) => e.name).sort(), ["blob.bin", "hello.txt"]);
  assert.deepEqual((await f.list("/work", { depth: 2 })).map((e) => e.name).sort(), ["dir", "dir/blob.bin", "dir/hello.txt"]);
  await f.remove("/work/dir/hello.txt");
  assert.equal(await f.exists("/work/dir/hello.txt"), false);
  await rejects(() => f.remove("/work/dir"), Conflict);
  await f.remove("/work/dir", { recursive: true });
  assert.equal(await f.exists("/work/dir"), false);
});

test("files: makeDir and rename", async () => {
  const f = A.files;
  await f.makeDir("/work/md/a/b");
  await f.makeDir("/work/md/a/b");  // parents: an existing one is no error
  assert.equal((await f.stat("/work/md/a/b")).type, "dir");
  await rejects(() => f.makeDir("/work/md/a/b", { parents: false }), Conflict);
  await f.write("/work/md/x.txt", "x");
  await f.write("/work/md/y.txt", "y");
  await rejects(() => f.rename("/work/md/x.txt", "/work/md/y.txt"), Conflict);
  await f.rename("/work/md/x.txt", "/work/md/y.txt", { replace: true });
  assert.equal(new TextDecoder().decode(await f.read("/work/md/y.txt")), "x");
  assert.equal(await f.exists("/work/md/x.txt"), false);
  await rejects(() => f.rename("relative", "/x"), TypeError);
});

test("files: errors", async () => {
  const f = A.files;
  await rejects(() => f.read("/no/such/file"), NotFound);
  await rejects(() => f.stat("/no/such/file"), NotFound);
  await rejects(() => f.list("/no/such/dir"), NotFound);
  await rejects(() => f.remove("/no/such/file"), NotFound);
  await rejects(() => f.write("/no/such/dir/x", "y", { mkdirs: false }), NotFound);
  await rejects(() => f.read("relative"), TypeError);
  await rejects(() => f.write("/tmp/x", "y", { mode: 0o10000 }), TypeError);
  await rejects(() => ghost().files.read("/etc/hostname"), NotFound);
});

test("files: upload and download", async () => {
  const dir = await mkdtemp(join(tmpdir(), "kiln-ts-"));
  try {
    const data = randomBytes(3 << 20);
    await writeFile(join(dir, "src.bin"), data);
    assert.equal(await A.files.upload(join(dir, "src.bin"), "/tmp/up/big.bin"), data.length);
    const md5 = (await A.exec("md5sum /tmp/up/big.bin | cut -d' ' -f1")).stdout.trim();
    assert.equal(md5, createHash("md5").update(data).digest("hex"));
    assert.equal(await A.files.download("/tmp/up/big.bin", join(dir, "dst.bin")), data.length);
    assert.ok(data.equals(await readFile(join(dir, "dst.bin"))));
    await rejects(() => A.files.download("/no/such/file", join(dir, "none")), NotFound);
    assert.deepEqual((await readdir(dir)).sort(), ["dst.bin", "src.bin"], "a failed download leaves no file");
    await rejects(() => A.files.upload(join(dir, "missing"), "/tmp/x"), Error);
    await A.files.remove("/tmp/up", { recursive: true });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("pty: a shell over a WebSocket", async () => {
  const pty = await A.pty({ cols: 100, rows: 30 });
  pty.resize(120, 40);
  pty.write("stty size; echo $((6*7))x\n");
  const out = await pty.readUntil("42x");
  assert.match(out, /40 120/, "the resize reached the terminal");
  pty.write("exit 5\n");
  assert.equal(await pty.exit, 5);
  const cmd = await A.pty({ cmd: "echo from-cmd; exit 3" });
  const chunks: string[] = [];
  for await (const c of cmd) chunks.push(new TextDecoder().decode(c));
  assert.ok(chunks.join("").includes("from-cmd"));
  assert.equal(await cmd.exit, 3);
  await rejects(() => ghost().pty(), NotFound);
  await rejects(() => A.pty({ cols: 0 }), InvalidRequest);
});

test("snapshot, and a sandbox from it", async () => {
  await A.files.write("/root/state.txt", "before the snapshot");
  const snap = await A.snapshot();
  assert.ok(snap.id.startsWith("snap_") && snap.sandboxId === A.id);
  try {
    assert.equal((await A.client.getSnapshot(snap.id)).id, snap.id);
    assert.ok((await A.client.snapshots()).some((s) => s.id === snap.id));
    await using c = await Sandbox.create({ fromSnapshot: snap.id });
    made.push(c.id);
    assert.equal(await c.files.readText("/root/state.txt"), "before the snapshot");
  } finally {
    await A.client.deleteSnapshot(snap.id);
  }
  await rejects(() => A.client.getSnapshot(snap.id), NotFound);
  await rejects(() => ghost().snapshot(), NotFound);
});

test("hibernate and wake", async () => {
  const sb = await create();
  try {
    await sb.files.write("/root/keep.txt", "kept");
    assert.equal((await sb.hibernate()).status, "hibernated");
    await rejects(() => sb.hibernate(), Conflict, "conflict");
    assert.equal((await sb.wake()).status, "running");
    await sb.hibernate();
    assert.equal(await sb.files.readText("/root/keep.txt"), "kept", "a request wakes it");
    assert.equal((await sb.refresh()).status, "running");
  } finally {
    await sb.delete();
  }
  await rejects(() => sb.wake(), NotFound);
});

test("pause, resume and persistent", async () => {
  const sb = await create();
  try {
    await sb.files.write("/root/keep.txt", "kept");
    assert.equal((await sb.pause()).status, "paused");
    assert.equal((await Sandbox.get(sb.id)).status, "paused", "on the server");
    assert.equal((await sb.pause()).status, "paused", "pausing a paused one");
    assert.equal((await sb.resume()).status, "running");
    assert.equal((await sb.resume()).status, "running", "resuming a running one");
    await sb.pause();
    assert.equal(await sb.files.readText("/root/keep.txt"), "kept", "a request resumes it");
    assert.equal((await sb.refresh()).status, "running");
    assert.equal(sb.persistent, false);
    assert.equal((await sb.setPersistent()).persistent, true);
    assert.equal((await Sandbox.get(sb.id)).persistent, true, "on the server");
    assert.equal((await sb.setPersistent(false)).persistent, false);
    assert.equal(sb.idlePauseSeconds, 0);
    assert.equal((await sb.setIdlePause(90)).idlePauseSeconds, 90);
    assert.equal((await Sandbox.get(sb.id)).idlePauseSeconds, 90, "on the server");
    await rejects(() => sb.setIdlePause(-1), RangeError);
  } finally {
    await sb.delete();
  }
  await rejects(() => sb.pause(), NotFound);
  await rejects(() => sb.resume(), NotFound);
  const p = await create({ persistent: true, idlePauseSeconds: 600 });
  try {
    assert.equal(p.persistent, true, "persistent at create");
    assert.equal(p.idlePauseSeconds, 600, "idle pause at create");
  } finally {
    await p.delete();
  }
});

test("events: a stream, and resuming it from an id", async () => {
  const stream = await A.client.events();
  const timer = setTimeout(() => stream.close(), 120_000);
  const seen: string[] = [];
  const ids: Record<string, string | undefined> = {};
  let id = "";
  try {
    const it = stream[Symbol.asyncIterator]();
    const sb = await create();
    id = sb.id;
    await sb.pause();
    await sb.resume();
    await sb.exec("true");
    await sb.delete();
    for (let r = await it.next(); !r.done; r = await it.next()) {
      const ev = r.value;
      if (ev.sandboxId !== id) continue;
      seen.push(ev.type);
      ids[ev.type] = ev.id;
      if (ev.type === "deleted") break;
    }
    const want = ["created", "ready", "paused", "resumed", "exec_started", "exec_ended", "deleting", "deleted"];
    assert.deepEqual(seen.filter((t) => want.includes(t)), want);
    assert.equal(stream.lastEventId, ids.deleted);
  } finally {
    clearTimeout(timer);
    stream.close();
  }
  const again = await A.client.events({ lastEventId: ids.paused });
  const first: string[] = [];
  const t2 = setTimeout(() => again.close(), 60_000);
  try {
    for await (const ev of again) {
      if (ev.sandboxId === id) first.push(ev.type);
      if (first.length === 2) break;
    }
  } finally {
    clearTimeout(t2);
    again.close();
  }
  assert.deepEqual(first, ["resumed", "exec_started"]);
  // Error paths: one sandbox's stream of a sandbox that is not there is
  // NotFound at once; an id the server does not keep yields a resync first.
  await rejects(() => A.client.events({ sandbox: "sbx_doesnotexist0000000" }), NotFound);
  await rejects(() => A.client.events({ sandbox: "sbx/../x" }), TypeError);
  const stale = await A.client.events({ lastEventId: "bogus-12" });
  const t3 = setTimeout(() => stale.close(), 60_000);
  let got: { kind: string; type: string } | undefined;
  try {
    for await (const ev of stale) {
      got = { kind: ev.kind, type: ev.type };
      break;
    }
  } finally {
    clearTimeout(t3);
    stale.close();
  }
  assert.deepEqual(got, { kind: "resync", type: "resync" }, "an id the server does not keep");
});

test("fork and forkTree", async () => {
  await A.files.write("/root/parent.txt", "from the parent");
  const kids: Sandbox[] = [];
  try {
    kids.push(...await A.fork(2));
    kids.push(...await A.forkTree(2));
    made.push(...kids.map((k) => k.id));
    assert.equal(kids.length, 4);
    for (const k of kids) {
      assert.deepEqual([k.parentId, k.status], [A.id, "running"]);
      assert.equal(await k.files.readText("/root/parent.txt"), "from the parent");
    }
    const report = await kids[3].promote();
    assert.deepEqual([report.kept, report.parent, [...report.deleted].sort(), report.failed],
      [kids[3].id, A.id, kids.slice(0, 3).map((k) => k.id).sort(), []]);
  } finally {
    for (const k of kids) await k.delete().catch((e) => { if (!(e instanceof NotFound)) throw e; });
  }
  await rejects(() => A.promote(), InvalidRequest);
  await rejects(() => A.fork(0), TypeError);
  await rejects(() => A.fork(1000), InvalidRequest);
  await rejects(() => ghost().forkTree(2), NotFound);
});

test("setTtl", async () => {
  assert.equal((await A.setTtl(7200)).ttlSeconds, 7200);
  assert.equal((await Sandbox.get(A.id)).ttlSeconds, 7200);
  await rejects(() => A.setTtl(-1), InvalidRequest);
  await rejects(() => ghost().setTtl(5), NotFound);
});

test("E2B names: commands.run in the foreground", async () => {
  const r = await A.commands.run("echo out; echo err >&2; echo $E2B_X; pwd; id -u; exit 3",
    { envs: { E2B_X: "x1" }, cwd: "/tmp", user: "4321" });
  assert.deepEqual([r.stdout, r.stderr, r.exitCode], ["out\nx1\n/tmp\n4321\n", "err\n", 3]);
  const seen: string[] = [];
  const s = await A.commands.run("echo a; sleep 2; echo b", { onStdout: (d) => { seen.push(d); } });
  assert.deepEqual([seen.join(""), s.stdout], ["a\nb\n", "a\nb\n"]);
  assert.ok(seen.length >= 2, `onStdout got the output in one piece: ${JSON.stringify(seen)}`);
  const t0 = Date.now();
  assert.equal((await A.commands.run("sleep 30", { timeoutMs: 1000 })).timedOut, true);
  assert.ok(Date.now() - t0 < 20_000, "timeoutMs did not kill it");
  await rejects(() => A.commands.run("cat", { stdin: true }), TypeError);
  await rejects(() => A.commands.run("true", { cwd: "relative" }), InvalidRequest);
  await rejects(() => ghost().commands.run("true"), NotFound);
});

test("E2B names: background commands, list, kill, connect, sendStdin", async () => {
  const h = await A.commands.run("echo up; while :; do sleep 1; done", { background: true, timeoutMs: 0 });
  assert.ok(h instanceof CommandHandle && h.pid > 0 && h.id > 0);
  assert.deepEqual((await A.commands.list()).filter((p) => p.pid === h.pid).map((p) => [p.id, p.status]),
    [[h.id, "running"]], "list shows it");
  const c = await A.commands.connect(h.pid);
  assert.deepEqual([c.id, c.pid], [h.id, h.pid], "connect by pid");
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(await A.commands.kill(h.pid), true, "kill by pid");
  const out = await c.wait();
  assert.deepEqual([out.status, out.signal], ["exited", 9]);
  assert.ok(out.stdout.startsWith("up\n"), out.stdout);
  assert.equal(await A.commands.kill(h.pid), false, "kill of an ended command, as E2B");
  assert.equal(await h.kill(), false);
  assert.ok(!(await A.commands.list()).some((p) => p.pid === h.pid), "commands.list: running ones only");
  // The wait above read its exit, so the agent no longer keeps it (docs/protocol.md, ATTACH).
  assert.ok(!(await A.processes.list()).some((p) => p.id === h.id), "an ended command whose exit was read is forgotten");
  await rejects(() => A.commands.connect(h.pid), NotFound);
  assert.equal(await A.commands.kill(999999), false);
  await rejects(() => ghost().commands.kill(12345), NotFound);
  await rejects(() => A.commands.kill(0), TypeError);
  const r = await A.commands.run("read a; echo got:$a", { background: true, stdin: true });
  await A.commands.sendStdin(r.pid, "from-e2b-name\n");
  const done = await r.wait();
  assert.deepEqual([done.stdout, done.exitCode], ["got:from-e2b-name\n", 0]);
  await rejects(() => A.commands.sendStdin(r.pid, "late\n"), NotFound);
  const shut = await A.commands.run("sleep 30", { background: true });
  await rejects(() => A.commands.sendStdin(shut.pid, "x"), Conflict);
  assert.equal(await shut.kill(), true);
  const got: string[] = [];
  const bg = await A.commands.run("echo bg-out", { background: true, onStdout: (d) => { got.push(d); } });
  assert.equal((await bg.wait()).stdout, "bg-out\n");
  assert.deepEqual(got, ["bg-out\n"], "onStdout of a background run, at wait()");
});

test("E2B names: sandboxId, Sandbox.connect, setTimeout, getHost, kill", async () => {
  assert.equal(A.sandboxId, A.id);
  const same = await Sandbox.connect(A.id);
  assert.deepEqual([same.id, same.status], [A.id, "running"]);
  assert.equal((await same.commands.run("echo reattached")).stdout, "reattached\n");
  await rejects(() => Sandbox.connect("sbx_doesnotexist"), NotFound);
  await A.setTimeout(5_400_000);
  assert.equal((await Sandbox.get(A.id)).ttlSeconds, 5400, "ms to seconds, as GET shows");
  await rejects(() => A.setTimeout(-1), TypeError);
  await rejects(() => ghost().setTimeout(60_000), NotFound);
  await B.exec("mkdir -p /srv/e2bts && echo host ok > /srv/e2bts/hi.txt && "
    + "(setsid python3 -m http.server 8083 --bind 127.0.0.1 --directory /srv/e2bts > /dev/null 2>&1 < /dev/null &)");
  const host = await B.getHost(8083);
  const port = (await B.ports()).filter((p) => p.port === 8083);
  assert.deepEqual(port.map((p) => p.public), [false], "exposed, private");
  const u = new URL(port[0].host_url ?? port[0].url);
  assert.equal(host, u.host + u.pathname.replace(/\/+$/, ""), "the host kiln's url gives");
  let status = 0, body = "";
  for (let i = 0; i < 120; i++) {
    const auth = { Authorization: `Bearer ${env.KILN_API_KEY}` };
    if (port[0].host_url) {
      [status, body] = await getByHost(`${u.protocol}//${host}/hi.txt`, auth);   // kilnd --domain: by Host
    } else {
      const resp = await fetch(`${u.protocol}//${host}/hi.txt`, { headers: auth });
      status = resp.status;
      body = await resp.text();
    }
    if (status !== 502) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.deepEqual([status, body], [200, "host ok\n"]);
  await B.exposePort(8083, { public: true });
  assert.equal(await B.getHost(8083), host);
  assert.deepEqual((await B.ports()).filter((p) => p.port === 8083).map((p) => p.public), [true], "left public");
  await B.unexposePort(8083);
  await rejects(() => B.getHost(0), RangeError);
  await rejects(() => ghost().getHost(8083), NotFound);
  const sb = await create();
  assert.equal(await sb.kill(), true);
  assert.equal(await sb.kill(), false);
  assert.equal(await Sandbox.kill(sb.id), false, "static kill of a gone one");
  const sb2 = await create();
  assert.equal(await Sandbox.kill(sb2.id), true, "static kill");
  await rejects(() => Sandbox.get(sb2.id), NotFound);
});

test("E2B names: files", async () => {
  const d = "/tmp/e2b-files-ts";
  await A.files.makeDir(`${d}/sub`);
  await A.files.write(`${d}/a.txt`, "hello e2b");
  assert.equal(await A.files.read(`${d}/a.txt`, { format: "text" }), "hello e2b");
  assert.deepEqual(await A.files.read(`${d}/a.txt`), new TextEncoder().encode("hello e2b"), "kiln's default: bytes");
  assert.equal((await A.files.getInfo(`${d}/a.txt`)).size, 9);
  assert.deepEqual((await A.files.list(d)).map((e) => e.name).sort(), ["a.txt", "sub"]);
  await A.files.rename(`${d}/a.txt`, `${d}/b.txt`);
  assert.deepEqual([await A.files.exists(`${d}/a.txt`), await A.files.exists(`${d}/b.txt`)], [false, true]);
  await A.files.remove(d, { recursive: true });
  assert.equal(await A.files.exists(d), false);
  await rejects(() => A.files.getInfo(d), NotFound);
  await rejects(() => A.files.read("/etc/hostname", { format: "stream" as "text" }), TypeError);
});

test("files: write([...]), copy, uploadDir/downloadDir, user", async () => {
  const d = "/tmp/ts-tree";
  const res = await A.files.write([{ path: `${d}/a.txt`, data: "alpha" }, { path: `${d}/sub/b.bin`, data: new Uint8Array([0, 1]) }]);
  assert.deepEqual(res.map((f) => [f.path, f.size]), [[`${d}/a.txt`, 5], [`${d}/sub/b.bin`, 2]]);
  await A.files.copy(d, `${d}-copy`, { recursive: true });
  assert.deepEqual(await A.files.read(`${d}-copy/sub/b.bin`), new Uint8Array([0, 1]));
  await rejects(() => A.files.copy(d, `${d}-copy`, { recursive: true }), Conflict);
  await rejects(() => A.files.copy("/tmp/no-such", "/tmp/x"), NotFound);
  await rejects(() => A.files.copy(d, `${d}/sub/in`, { recursive: true }), InvalidRequest);
  const local = await mkdtemp(join(tmpdir(), "kiln-ts-"));
  try {
    assert.equal(await A.files.downloadDir(d, join(local, "down")), 3);
    assert.equal(await readFile(join(local, "down", "a.txt"), "utf8"), "alpha");
    await writeFile(join(local, "down", "c.txt"), "gamma");
    await A.files.uploadDir(join(local, "down"), "/tmp/ts-up");
    assert.equal(await A.files.readText("/tmp/ts-up/c.txt"), "gamma");
  } finally {
    await rm(local, { recursive: true, force: true });
  }
  await A.files.write("/tmp/ts-as-user.txt", "mine", { user: "4321" });
  assert.equal((await A.files.stat("/tmp/ts-as-user.txt")).uid, 4321);
  await A.exec("echo s > /tmp/ts-root-only; chmod 600 /tmp/ts-root-only");
  await rejects(() => A.files.read("/tmp/ts-root-only", { user: "4321" }), PermissionDenied);
  await rejects(() => A.files.stat("/tmp", { user: "no-such-user" }), InvalidRequest);
});

test("delete", async () => {
  const sb = await create();
  await sb.delete();
  await rejects(() => Sandbox.get(sb.id), NotFound);
  await rejects(() => sb.delete(), NotFound);
});

test("await using deletes the sandbox even when the block throws", async () => {
  let id = "";
  await assert.rejects(async () => {
    await using sb = await Sandbox.create({ template: "minimal" });
    made.push(sb.id);
    id = sb.id;
    assert.equal((await sb.exec("echo in")).stdout, "in\n");
    throw new Error("the body failed");
  }, /the body failed/);
  await rejects(() => Sandbox.get(id), NotFound);
  {
    await using sb = await Sandbox.create({ template: "minimal" });
    made.push(sb.id);
    await sb.delete();   // gone inside the block: leaving it is still fine
  }
});

test("plan limits: limits(), LimitExceeded with the limit, its value and the plan", async () => {
  const c = new Client({ apiKey: env.KILN_TEST_LIMITED_KEY });
  const lim = await c.limits();
  assert.deepEqual([lim.plan, lim.limits.running, lim.in_use.running], ["free", 1, 0]);
  const one = await Sandbox.create({ template: "minimal", client: c });
  made.push(one.id);
  try {
    const t0 = Date.now();
    const e = await rejects(() => Sandbox.create({ template: "minimal", client: c }), LimitExceeded, "limit_exceeded");
    assert.ok(e instanceof RateLimited && e.status === 429, String(e));
    assert.deepEqual([e.limit, e.value, e.plan], ["running", 1, "free"]);
    assert.ok(Date.now() - t0 < 5000, "a refused create was retried");
  } finally {
    await one.delete();
  }
});

test("retries only idempotent requests", async () => {
  const rated = new Client({ apiUrl: env.KILN_TEST_RATE_URL, apiKey: env.KILN_TEST_RATE_KEY });
  let t0 = Date.now();
  for (let i = 0; i < 4; i++) await Sandbox.list({ client: rated });
  assert.ok(Date.now() - t0 >= 1500, `4 lists at 1/s took ${Date.now() - t0} ms`);
  t0 = Date.now();
  let limited: RateLimited | undefined;
  for (let i = 0; i < 3 && !limited; i++) {
    try {
      await Sandbox.create({ template: "minimal", client: rated });
    } catch (e) {
      if (e instanceof RateLimited) limited = e;
      else assert.ok(e instanceof ServerError, String(e));
    }
  }
  assert.ok(limited, "no POST was rate limited");
  assert.ok(limited.status === 429 && (limited.retryAfter ?? 0) >= 1, String(limited));
  assert.ok(Date.now() - t0 < 1000, "the POST was retried");
  await new Promise((r) => setTimeout(r, 1200));
  await rejects(() => Sandbox.create({ template: "minimal", client: rated }), ServerError, "no_capacity");
  const dead = new Client({ apiUrl: "http://127.0.0.1:9", apiKey: "kiln_x" });
  t0 = Date.now();
  await rejects(() => Sandbox.list({ client: dead }), ConnectionFailed, "connection_error");
  const getMs = Date.now() - t0;
  t0 = Date.now();
  await rejects(() => Sandbox.create({ client: dead }), ConnectionFailed);
  const postMs = Date.now() - t0;
  assert.ok(getMs >= 1700 && postMs < 500, `GET ${getMs} ms, POST ${postMs} ms`);
});

test("client timeout", async () => {
  const held: import("node:net").Socket[] = [];
  const srv = createServer((s) => { held.push(s); });   // accepts, never answers
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  try {
    const port = (srv.address() as import("node:net").AddressInfo).port;
    const c = new Client({ apiUrl: `http://127.0.0.1:${port}`, apiKey: "kiln_x", timeoutMs: 1000, maxRetries: 0 });
    const t0 = Date.now();
    await rejects(() => Sandbox.list({ client: c }), Timeout, "client_timeout");
    assert.ok(Date.now() - t0 < 5000);
  } finally {
    for (const s of held) s.destroy();
    await new Promise((r) => srv.close(r));
  }
});

test("a bad API key is AuthError everywhere", async () => {
  const bad = new Client({ apiKey: "kiln_abcdefghijkmnpqrstuvwxyz23456789" });
  const sb = new Sandbox(bad, A.info);
  const dir = await mkdtemp(join(tmpdir(), "kiln-ts-"));
  await writeFile(join(dir, "f"), "x");
  const calls: Record<string, () => Promise<unknown>> = {
    create: () => Sandbox.create({ client: bad }),
    get: () => Sandbox.get(A.id, { client: bad }),
    list: () => Sandbox.list({ client: bad }),
    refresh: () => sb.refresh(),
    exec: () => sb.exec("true"),
    execStream: () => sb.execStream("true").wait(),
    runCode: () => sb.runCode("print(1)"),
    pty: () => sb.pty(),
    "files.read": () => sb.files.read("/etc/hostname"),
    "files.write": () => sb.files.write("/tmp/x", "y"),
    "files.list": () => sb.files.list("/"),
    "files.stat": () => sb.files.stat("/"),
    "files.exists": () => sb.files.exists("/"),
    "files.remove": () => sb.files.remove("/tmp/x"),
    "files.upload": () => sb.files.upload(join(dir, "f"), "/tmp/x"),
    "files.download": () => sb.files.download("/etc/hostname", join(dir, "never")),
    snapshot: () => sb.snapshot(),
    hibernate: () => sb.hibernate(),
    wake: () => sb.wake(),
    fork: () => sb.fork(),
    forkTree: () => sb.forkTree(2),
    setTtl: () => sb.setTtl(60),
    delete: () => sb.delete(),
    snapshots: () => bad.snapshots(),
    templates: () => bad.templates(),
    usage: () => bad.usage(),
  };
  try {
    for (const [name, call] of Object.entries(calls)) {
      const e = await rejects(call, AuthError, "unauthorized");
      assert.ok(e.status === 401 && e.message.includes("key"), `${name}: ${String(e)}`);
      assert.ok(e.message.includes("KILN_API_KEY"), `${name}: ${String(e)}`);
    }
    const none = await rejects(() => Sandbox.list({ client: new Client({ apiKey: "" }) }), AuthError, "unauthorized");
    assert.ok(none.message.startsWith("no API key: set KILN_API_KEY"), String(none));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  assert.equal((await Sandbox.get(A.id)).status, "running");
});

test("usage by day, billing, statements", async () => {
  const c = A.client;
  const now = new Date();
  const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const u = await c.usage({ granularity: "day", from: monthStart });
  assert.deepEqual([u.granularity, u.from], ["day", monthStart.toISOString()]);
  assert.ok(Array.isArray(u.buckets) && Number.isInteger(u.total.cost_microdollars), JSON.stringify(u));
  const one = await c.usage({ from: Math.floor(monthStart.getTime() / 1000), sandbox: A.id });
  assert.deepEqual([one.granularity, one.sandbox_id], ["hour", A.id]);
  assert.ok("sandboxes" in (await c.usage()), "usage() with no query keeps its totals");
  await rejects(() => c.usage({ granularity: "week" as "day" }), InvalidRequest, "invalid_request");
  const b = await c.billing();
  assert.ok(typeof b.plan === "string" && Number.isInteger(b.cost_microdollars), JSON.stringify(b));
  assert.ok(b.projected_microdollars >= b.cost_microdollars && b.cost_microdollars >= 0, JSON.stringify(b));
  const sts = await c.statements();
  const months = sts.map((s) => s.month);
  assert.deepEqual(months, [...months].sort().reverse(), "newest first");
  const thisMonth = monthStart.toISOString().slice(0, 7);
  for (const s of sts) {
    // The last month stays open for five minutes after its end.
    if (s.month === thisMonth) assert.equal(s.status, "open");
    assert.equal(s.closed_at === null, s.status === "open", JSON.stringify(s));
    assert.equal(s.amount_due_microdollars, s.cost_microdollars - s.credit_applied_microdollars, s.month);
  }
  if (months.includes(thisMonth)) {
    const s = await c.statement(thisMonth);
    assert.deepEqual([s.month, s.status, s.closed_at], [thisMonth, "open", null]);
  }
  await rejects(() => c.statement("2026-13"), InvalidRequest, "invalid_request");
  await rejects(() => c.statement("2099-01"), NotFound, "not_found");
  await rejects(() => c.statement("1999-01"), NotFound, "not_found");
});

test("apps: createApp, getApp, apps, appLogs, followAppLogs, deployApp, deleteApp", async () => {
  const c = A.client;
  const name = `ts-app-${process.pid}`;
  const serve = (text: string) => `mkdir -p /srv/w && echo ${text} > /srv/w/index.html && echo serving ${text} && `
    + "exec httpd -f -p 8000 -h /srv/w";  // minimal's busybox: a smaller VM to create, and again on a deploy
  await rejects(() => c.createApp({ name, port: 8000, command: "true", restart: "sometimes" as "always" }), InvalidRequest);
  await rejects(() => c.createApp({ name, port: 8000, template: "base", fromSnapshot: "snap_x" }), InvalidRequest, "invalid_request");
  await rejects(() => c.getApp("../v1/sandboxes"), TypeError);
  const app = await c.createApp({ name, port: 8000, template: "minimal", command: serve("v1"), env: { WHO: "ts" }, restart: "always" });
  try {
    assert.match(app.id, /^app_/);
    assert.deepEqual([app.name, app.port, app.version, app.status, app.restart, app.env], [name, 8000, 1, "running", "always", { WHO: "ts" }]);
    assert.equal(app.url, `http://app-${app.id.slice(4)}.sdk.test:${new URL(env.KILN_API_URL!).port}/`, "its own origin (kilnd --domain sdk.test)");
    assert.deepEqual(await getByHost(app.url!), [200, "v1\n"], "served at its URL, no key");
    assert.equal((await c.getApp(name)).id, app.id);
    assert.equal((await c.getApp(app.id)).name, name);
    assert.ok((await c.apps()).some((a) => a.id === app.id));
    await rejects(() => c.createApp({ name, port: 8000, command: "true" }), Conflict);
    await rejects(() => c.getApp("no-such-app"), NotFound);
    const logs = await c.appLogs(name, { tail: 10 });
    assert.ok(logs.events.some((e) => /version 1 deployed/.test(e.text) && e.at), JSON.stringify(logs));
    assert.ok(logs.lines.includes("serving v1"), JSON.stringify(logs.lines));
    const seen = [];
    for await (const e of c.followAppLogs(app.id, { tail: 10 })) {
      seen.push(e);
      if (e.kind === "line" && e.text === "serving v1") break;   // leaving the loop closes the stream
    }
    assert.ok(seen[0].kind === "event" && /version 1/.test(seen[0].text), JSON.stringify(seen));
    const d = await c.deployApp(name, { command: serve("v2") });
    assert.deepEqual([d.id, d.version, d.url, d.restart, d.env], [app.id, 2, app.url, "always", { WHO: "ts" }], "the rest kept");
    assert.notEqual(d.sandbox_id, app.sandbox_id);
    assert.deepEqual(await getByHost(app.url!), [200, "v2\n"], "the new version at the same URL");
    await rejects(() => c.deployApp(name, { idleSeconds: -1 }), InvalidRequest);
  } finally {
    await c.deleteApp(app.id);
  }
  await rejects(() => c.getApp(app.id), NotFound);
  await rejects(() => c.deleteApp(name), NotFound);
  assert.equal((await getByHost(app.url!))[0], 404, "its URL, once deleted");
});

test("templates and usage", async () => {
  const listed = await A.client.templates();
  const t = Object.fromEntries(listed.map((x) => [x.name, x.status]));
  assert.deepEqual([t.minimal, t.base], ["ready", "ready"]);
  // Its root disk, as both answers give it: what a create without
  // diskMib gets (A is such a minimal sandbox).
  const disk = listed.find((x) => x.name === "minimal")?.disk_mib;
  assert.deepEqual([disk, (await A.client.template("minimal")).disk_mib], [A.diskMib, A.diskMib]);
  assert.ok((await A.client.usage()).sandboxes >= 2);
});

// The last test, not an after() hook: a hook's failure is reported under
// the file's path and its pass not at all, so tests/run could not settle a
// run of the file again that left nothing (CI of 929ea5d: one failing
// test left its three sandboxes; the rerun passed, the hook's FAIL stood).
// Not tried twice: a first try deletes what it finds, so a second would
// pass whatever the tests left.
nodeTest("the tests leave no sandboxes", async () => {
  // The shared ones, then anything the tests left (they should leave nothing).
  for (const sb of [A, B]) if (sb) await sb.delete().catch(() => undefined);
  const left: string[] = [];
  for (const key of [env.KILN_API_KEY, env.KILN_TEST_KEY2]) {
    const c = new Client({ apiKey: key });
    for (const a of await c.apps()) {   // first: the app watch would remake an app's sandbox
      left.push(a.id);
      await c.deleteApp(a.id).catch(() => undefined);
    }
    for (const sb of await Sandbox.list({ client: c })) {
      left.push(sb.id);
      await sb.delete().catch(() => undefined);
    }
    for (const s of await c.snapshots()) await c.deleteSnapshot(s.id);
  }
  assert.deepEqual(left, [], `the tests left sandboxes behind (deleted now); made: ${made.length}`);
});
