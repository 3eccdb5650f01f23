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
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import {
  AuthError, Client, Conflict, ConnectionFailed, InvalidRequest, KilnError, LimitExceeded, NotFound,
  RateLimited, Sandbox, ServerError, Timeout,
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

test("create, get, list", async () => {
  A = await create({ ttlSeconds: 3600, metadata: { owner: "ts-test" }, env: { FROM_SANDBOX: "yes" } });
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
  assert.deepEqual(t.details.templates, ["minimal", "base"]);
  assert.ok(t.message.includes("minimal, base"), t.message);
  await rejects(() => Sandbox.create({ template: "minimal", ttlSeconds: -5 }), InvalidRequest);
  await rejects(() => Sandbox.create({ fromSnapshot: "snap_doesnotexist" }), NotFound, "not_found");
  await rejects(() => Sandbox.create({ template: "minimal", fromSnapshot: "snap_x" }), TypeError);
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

test("runCode", async () => {
  let r = await B.runCode("import sys; print(6*7); print('e', file=sys.stderr)");
  assert.deepEqual([r.stdout, r.stderr, r.exitCode], ["42\n", "e\n", 0]);
  r = await B.runCode("1/0");
  assert.ok(r.exitCode === 1 && r.stderr.includes("ZeroDivisionError"), r.stderr);
  assert.equal((await B.runCode('echo "$((6*7))"', "bash")).stdout, "42\n");
  assert.equal((await A.runCode("echo sh", "sh")).stdout, "sh\n");
  await rejects(() => B.runCode("x", "cobol"), TypeError);
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

test("templates and usage", async () => {
  const t = Object.fromEntries((await A.client.templates()).map((x) => [x.name, x.status]));
  assert.deepEqual([t.minimal, t.base], ["ready", "ready"]);
  assert.ok((await A.client.usage()).sandboxes >= 2);
});

after(async () => {
  // The shared ones, then anything the tests left (they should leave nothing).
  for (const sb of [A, B]) if (sb) await sb.delete().catch(() => undefined);
  const left: string[] = [];
  for (const key of [env.KILN_API_KEY, env.KILN_TEST_KEY2]) {
    const c = new Client({ apiKey: key });
    for (const sb of await Sandbox.list({ client: c })) {
      left.push(sb.id);
      await sb.delete().catch(() => undefined);
    }
    for (const s of await c.snapshots()) await c.deleteSnapshot(s.id);
  }
  assert.deepEqual(left, [], `the tests left sandboxes behind (deleted now); made: ${made.length}`);
});
