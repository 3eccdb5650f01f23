// The TypeScript SDK's API keys, audit log and operator client against a
// real kilnd (tests/e2e/58-kilnd-sdk-admin.sh runs it on @kiln/sdk as tsc
// built it).
//
//     node sdk_admin.mjs SDK_INDEX_JS URL WORKSPACE_KEY OPERATOR_CREDENTIAL PREFIX
//
// WORKSPACE_KEY is a full key of a workspace of its own; PREFIX names the
// workspaces this makes (it deletes them at its end). Prints "PASS name:
// detail" / "FAIL name: why", and "PASS sdk_ts_ran" once it reached its end.
import { pathToFileURL } from "node:url";

const [sdkPath, URL_, KEY, OP, PREFIX] = process.argv.slice(2);
const sdk = await import(pathToFileURL(sdkPath).href);
const { Admin, AuthError, Client, Conflict, InvalidRequest, NotFound, PermissionDenied } = sdk;
const NAME = "sdk_ts";
let failed = 0;

class CheckFailed extends Error {}
function assert(cond, why) {
  if (!cond) throw new CheckFailed(typeof why === "string" ? why : JSON.stringify(why));
}

async function check(name, fn) {
  let detail;
  try {
    detail = await fn();
  } catch (e) {
    failed++;
    const why = e instanceof CheckFailed ? e.message : `${e?.name}: ${e?.message}`;
    console.log(`FAIL ${NAME}_${name}: ${why}`);
    return;
  }
  console.log(`PASS ${NAME}_${name}: ${detail}`);
}

/** The error of class cls that fn() threw (CheckFailed if none, or another). */
async function rejects(cls, fn) {
  let got;
  try {
    got = await fn();
  } catch (e) {
    if (e instanceof cls) return e;
    throw new CheckFailed(`wanted ${cls.name}, got ${e?.name}: ${e?.message}`);
  }
  throw new CheckFailed(`wanted ${cls.name}, got no error but ${JSON.stringify(got)}`);
}

/** fn() until it is truthy: an audit entry is written once its request is answered. */
async function eventually(fn, timeoutMs = 3000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const client = new Client({ apiUrl: URL_, apiKey: KEY, maxRetries: 0 });
const admin = new Admin({ apiUrl: URL_, adminKey: OP, maxRetries: 0 });
const keyClient = (key) => new Client({ apiUrl: URL_, apiKey: key, maxRetries: 0 });
const made = {};

// ---- API keys -----------------------------------------------------------------------------

await check("key_create", async () => {
  const k = await client.createKey({ name: "ts-ci", scope: "full", expiresInSeconds: 3600 });
  assert(k.key.startsWith("kiln_") && k.prefix === k.key.slice(0, 13), k);
  assert(k.name === "ts-ci" && k.scope === "full" && k.expires_at, k);
  made.full = k;
  return `${k.id} ${k.prefix}... expires ${k.expires_at}`;
});

await check("key_works", async () => {
  const ids = (await keyClient(made.full.key).keys()).map((k) => k.id);
  assert(ids.includes(made.full.id), ids);
  return `the new key lists its workspace's ${ids.length} keys, itself among them`;
});

await check("key_listed", async () => {
  const k = (await client.keys()).find((k) => k.id === made.full.id);
  assert(k, "not in keys()");
  assert(k.prefix === made.full.prefix && k.name === "ts-ci" && k.scope === "full", k);
  assert(k.revoked === false && k.expires_at === made.full.expires_at, k);
  assert(!("key" in k), "keys() shows a key's secret");
  return `${k.id} ${k.name} ${k.scope} created ${k.created_at}, no secret`;
});

await check("read_key_refused", async () => {
  const r = await client.createKey({ name: "ts-read", scope: "read" });
  assert(r.scope === "read" && r.expires_at === null, r);
  made.read = r;
  const c = keyClient(r.key);
  const n = (await c.keys()).length;
  const e = await rejects(PermissionDenied, () => c.createKey({ name: "by-read" }));
  assert(e.status === 403 && e.code === "forbidden" && e.message, [e.status, e.code, e.message]);
  return `GET /v1/keys (${n} keys) allowed; createKey refused: ${e}`;
});

await check("revoke_401", async () => {
  const c = keyClient(made.full.key);
  await c.limits();
  await client.revokeKey(made.full.id);
  const e = await rejects(AuthError, () => c.keys());
  assert(e.status === 401 && e.code === "unauthorized", e.toString());
  assert(e.message.includes("revoked") && e.message.includes("KILN_API_KEY"), e.message);
  const k = (await client.keys()).find((k) => k.id === made.full.id);
  assert(k.revoked === true && k.revoked_at, k);
  await client.revokeKey(made.full.id);
  return `the next request: ${e}; listed revoked at ${k.revoked_at}; revoking again is no error`;
});

await check("revoke_unknown", async () => {
  const e = await rejects(NotFound, () => client.revokeKey("key_doesnotexist"));
  await rejects(TypeError, () => client.revokeKey("../audit"));
  return `${e}; a path-changing id is refused here (TypeError)`;
});

await check("key_bad_fields", async () => {
  const e = await rejects(InvalidRequest, () => client.createKey({ name: "x", scope: "admin" }));
  assert(e.message.includes("scope"), e.message);
  const e2 = await rejects(InvalidRequest, () => client.createKey({ name: "x", expiresInSeconds: 0 }));
  assert(e2.message.includes("expires_in_seconds"), e2.message);
  return `${e}; ${e2}`;
});

const tuple = (e) => `${e.method} ${e.route} ${e.status} ${e.target}`;
await check("audit", async () => {
  const want = [`POST /v1/keys 201 ${made.full.id}`, "POST /v1/keys 403 null", `DELETE /v1/keys/{id} 204 ${made.full.id}`];
  const es = await eventually(async () => {
    const es = await client.audit();
    const have = es.map(tuple);
    return want.every((w) => have.includes(w)) && es;
  });
  assert(es, `missing entries: ${(await client.audit()).map(tuple)}`);
  const refused = es.find((e) => e.status === 403);
  assert(refused.key_prefix === made.read.prefix && refused.key_id === made.read.id, refused);
  const times = es.map((e) => e.time);
  assert(JSON.stringify(times) === JSON.stringify([...times].sort().reverse()), "not newest first");
  assert(es.every((e) => e.method !== "GET"), "a GET in the audit log");
  return `${es.length} entries, newest first: the key's creation, the read key's refused create, the revocation`;
});

await check("audit_limit", async () => {
  const es = await client.audit({ limit: 2 });
  const all = await client.audit();
  assert(Array.isArray(es), "audit() is no array");
  assert(es.length === 2 && JSON.stringify(es) === JSON.stringify(all.slice(0, 2)), es);
  assert(typeof es.nextCursor === "string" && es.nextCursor, `nextCursor ${es.nextCursor}`);
  const e = await rejects(InvalidRequest, () => client.audit({ limit: 0 }));
  assert(e.message.includes("limit"), e.message);
  return `limit 2: ${es.length} entries, the newest, an array as before, nextCursor ${es.nextCursor}; limit 0: ${e}`;
});

/** Every entry auditAll(query) yields. */
async function collect(gen) {
  const out = [];
  for await (const e of gen) out.push(e);
  return out;
}
const ids = (es) => es.map((e) => e.id);
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

await check("audit_paging", async () => {
  const every = await client.audit({ limit: 1000 });
  assert(every.nextCursor === null && every.length >= 4, `${every.length} entries, nextCursor ${every.nextCursor}`);
  // By hand: pages of 2, each page's nextCursor passed as cursor.
  const pages = [];
  let cursor;
  for (;;) {
    const page = await client.audit({ limit: 2, cursor });
    assert(page.length <= 2, page);
    pages.push(page);
    if (page.nextCursor === null) break;
    assert(page.length === 2, `a page of ${page.length} with a nextCursor`);
    cursor = page.nextCursor;
    assert(pages.length <= every.length + 1, "the cursors never end");
  }
  const paged = pages.flat();
  assert(new Set(ids(paged)).size === paged.length, `an entry twice: ${ids(paged)}`);
  assert(same(paged, every), `paged ${ids(paged)} != unpaged ${ids(every)}`);
  // The async iterator: the same, a page of 2 at a time.
  const gen = await collect(client.auditAll({ pageSize: 2 }));
  assert(same(gen, every), `auditAll ${ids(gen)} != ${ids(every)}`);
  assert(same(await collect(client.auditAll()), every), "auditAll with its default page size");
  const e = await rejects(InvalidRequest, () => client.audit({ cursor: "nonsense" }));
  assert(e.message.includes("cursor"), e.message);
  return `${every.length} entries: ${pages.length} pages of limit 2 and auditAll({ pageSize: 2 }) each yield them once, ` +
    `as the unpaged list; a made-up cursor: ${e}`;
});

await check("audit_key", async () => {
  const every = await collect(client.auditAll());
  const byId = await client.audit({ key: made.read.id, limit: 1000 });
  assert(byId.length && byId.every((e) => e.key_id === made.read.id), byId);
  assert(same(byId, every.filter((e) => e.key_id === made.read.id)), "not every entry of the read key");
  assert(same(await client.audit({ key: made.read.prefix, limit: 1000 }), byId), "by prefix != by id");
  const mine = every.filter((e) => e.key_prefix === KEY.slice(0, 13));
  assert(mine.length && same(await collect(client.auditAll({ key: KEY.slice(0, 13), pageSize: 2 })), mine),
    "the test key's entries, paged");
  const none = await client.audit({ key: made.full.id }); // it only made GETs
  assert(none.length === 0 && none.nextCursor === null, none);
  return `the read key's ${byId.length} entries by id and by prefix; the test key's ${mine.length}, paged by 2; ` +
    "a key that made only GETs: none";
});

// ---- the operator's client ----------------------------------------------------------------------

const WS = `${PREFIX}-ts`;
try {
  await check("admin_ws_create", async () => {
    const w = await admin.createWorkspace(WS, { plan: "free", limits: { running: 2 } });
    assert(w.name === WS && w.plan === "free" && JSON.stringify(w.limits) === '{"running":2}', w);
    assert(w.suspended === false && w.live_sandboxes === 0 && w.id.startsWith("ws_"), w);
    made.ws = w;
    const e = await rejects(Conflict, () => admin.createWorkspace(WS));
    const e2 = await rejects(InvalidRequest, () => admin.createWorkspace(`${WS}x`, { plan: "gold" }));
    assert(e2.message.includes("gold"), e2.message);
    const e3 = await rejects(InvalidRequest, () => admin.createWorkspace("Bad_Name"));
    return `${w.id} ${w.name} plan ${w.plan} limits ${JSON.stringify(w.limits)}; again: ${e}; ${e2}; ${e3}`;
  });

  await check("admin_ws_list_get", async () => {
    const ws = await admin.workspaces();
    const mine = ws.filter((w) => w.name === WS);
    assert(mine.length === 1 && mine[0].id === made.ws.id, ws);
    const got = await admin.getWorkspace(WS);
    assert(got.id === made.ws.id && got.plan === "free", got);
    const e = await rejects(NotFound, () => admin.getWorkspace(`${WS}-none`));
    await rejects(TypeError, () => admin.getWorkspace("../keys"));
    return `${ws.length} workspaces, ${WS} among them; getWorkspace agrees; unknown: ${e}`;
  });

  await check("admin_ws_key", async () => {
    const k = await admin.createKey(WS, { name: "ops-made", scope: "full" });
    assert(k.key.startsWith("kiln_") && k.name === "ops-made", k);
    made.wsKey = k;
    const lim = await keyClient(k.key).limits();
    assert(lim.plan === "free" && lim.limits.running === 2, lim);
    return `${k.id} works: its workspace's plan ${lim.plan}, running limit ${lim.limits.running}`;
  });

  await check("admin_ws_keys", async () => {
    const ks = await admin.keys(WS);
    assert(same(ks.map((k) => k.id), [made.wsKey.id]), ks);
    const k = ks[0];
    assert(k.prefix === made.wsKey.prefix && k.name === "ops-made" && k.revoked === false, k);
    assert(!("key" in k), "keys() shows a key's secret");
    const e = await rejects(NotFound, () => admin.keys(`${WS}-none`));
    await rejects(TypeError, () => admin.keys("../audit"));
    return `${WS}: ${k.id} ${k.prefix}... ${k.scope}, no secret; an unknown workspace: ${e}`;
  });

  await check("admin_ws_revoke_key", async () => {
    const k = await admin.createKey(WS, { name: "ops-revoked" });
    made.wsRevoked = k;
    const c = keyClient(k.key);
    await c.limits();
    await admin.revokeKey(WS, k.id);
    const e = await rejects(AuthError, () => c.limits());
    assert(e.status === 401 && e.code === "unauthorized" && e.message.includes("revoked"), e.toString());
    const listed = Object.fromEntries((await admin.keys(WS)).map((x) => [x.id, x]));
    assert(listed[k.id].revoked === true && listed[k.id].revoked_at, listed);
    assert(listed[made.wsKey.id].revoked === false, "the other key was revoked too");
    await admin.revokeKey(WS, k.id); // again: no error
    // Another workspace's key (this script's own read key): not this one's.
    const e2 = await rejects(NotFound, () => admin.revokeKey(WS, made.read.id));
    assert((await keyClient(made.read.key).keys()).length, "the other workspace's key stopped working");
    await rejects(TypeError, () => admin.revokeKey(WS, "../../x"));
    await rejects(TypeError, () => admin.revokeKey("Bad/Name", k.id));
    return `${k.id} revoked, its next request: ${e}; again: no error; another workspace's key: ${e2} ` +
      "(and it still works); path-changing names refused here (TypeError)";
  });

  await check("admin_ws_plan_limits", async () => {
    let w = await admin.updateWorkspace(WS, { plan: "pro" });
    assert(w.plan === "pro" && JSON.stringify(w.limits) === '{"running":2}', w);
    const lim = await keyClient(made.wsKey.key).limits();
    assert(lim.plan === "pro", lim);
    w = await admin.updateWorkspace(WS, { limits: {} });
    assert(w.plan === "pro" && JSON.stringify(w.limits) === "{}", w);
    const e = await rejects(InvalidRequest, () => admin.updateWorkspace(WS, { limits: { runing: 1 } }));
    assert(e.message.includes("runing"), e.message);
    return `plan pro (own limits kept), then limits {} (plan kept); the key sees plan ${lim.plan}; ${e}`;
  });

  await check("admin_ws_suspend", async () => {
    const c = keyClient(made.wsKey.key);
    let w = await admin.updateWorkspace(WS, { suspended: true });
    assert(w.suspended === true, w);
    const e = await rejects(PermissionDenied, () => c.keys());
    assert(e.status === 403 && e.code === "workspace_suspended" && e.message.includes(WS), e.toString());
    w = await admin.updateWorkspace(WS, { suspended: false });
    assert(w.suspended === false, w);
    const n = (await c.keys()).length;
    return `suspended: ${e}; lifted: the key lists ${n} keys again`;
  });

  await check("admin_ws_audit", async () => {
    const c = keyClient(made.wsKey.key);
    // Four changes: the plan, the limits, suspended, lifted (the refused
    // limits were answered 400 before any change: no entry).
    const patches = async () => (await c.audit()).filter((e) => e.method === "PATCH");
    const es = await eventually(async () => { const p = await patches(); return p.length === 4 && p; });
    assert(es && es.every((e) => e.route === "/v1/admin/workspaces/{name}" && e.status === 200),
      `PATCH entries: ${JSON.stringify(await patches())}`);
    assert(es.every((e) => e.key_prefix === OP.slice(0, 15) && e.key_id.startsWith("op_")), es);
    return `the workspace's audit log has the operator's 4 PATCHes, by ${es[0].key_prefix}...`;
  });

  await check("admin_ws_audit_targets", async () => {
    const c = keyClient(made.wsKey.key);
    const op = OP.slice(0, 15);
    const want = [`POST /v1/admin/workspaces 201 ${made.ws.id}`,
      `POST /v1/admin/workspaces/{name}/keys 201 ${made.wsKey.id}`,
      `POST /v1/admin/workspaces/{name}/keys 201 ${made.wsRevoked.id}`,
      `DELETE /v1/admin/workspaces/{name}/keys/{id} 204 ${WS}/${made.wsRevoked.id}`];
    const have = async () => (await collect(c.auditAll({ key: op, pageSize: 2 }))).map(tuple);
    const got = await eventually(async () => { const h = await have(); return want.every((w) => h.includes(w)) && h; });
    assert(got, `want ${want} among the operator's entries: ${await have()}`);
    const ops = await collect(c.auditAll({ key: op }));
    assert(ops.every((e) => e.key_id.startsWith("op_")), ops);
    assert(same(ops, (await collect(c.auditAll())).filter((e) => e.key_prefix === op)), "key=the operator's prefix");
    return `the workspace's creation names ${made.ws.id}, the keys made ${made.wsKey.id} and ${made.wsRevoked.id}, ` +
      `the revocation ${WS}/${made.wsRevoked.id}; ${ops.length} entries of the operator (key=${op})`;
  });

  await check("admin_usage", async () => {
    const u = await admin.usage();
    assert(u.from && u.to && Array.isArray(u.workspaces) && u.total, u);
    const mine = u.workspaces.filter((w) => w.name === WS);
    assert(mine.length === 1 && mine[0].cost_microdollars === 0, u.workspaces);
    const u2 = await admin.usage({ from: new Date(Date.UTC(2026, 0, 1)), to: 1767312000 });
    // kilnd read the Date and the Unix seconds: 2026-01-01T00:00:00.000Z
    assert(Date.parse(u2.from) === Date.UTC(2026, 0, 1) && Date.parse(u2.to) === Date.UTC(2026, 0, 2), u2);
    const e = await rejects(InvalidRequest, () => admin.usage({ from: "2026-02-01", to: "2026-01-01" }));
    return `${u.workspaces.length} workspaces from ${u.from} to ${u.to}, total ${JSON.stringify(u.total)}; ${e}`;
  });

  await check("admin_plans", async () => {
    const name = `${PREFIX.replace(/_/g, "-").slice(0, 20)}-ts-plan`;
    const names = (await admin.plans()).map((p) => p.name);
    assert(same(names.slice(0, 4), ["free", "pro", "team", "enterprise"]), names);
    const p = await admin.setPlan(name, { running: 2, vcpus: 1 });
    assert(p.name === name && p.limits.running === 2 && p.limits.vcpus === 1 && p.limits.creates_per_hour === 0, p);
    assert(!p.server_plan && same(p.operator_limits, { running: 2, vcpus: 1 }), p);
    await admin.updateWorkspace(WS, { plan: name });
    const before = (await keyClient(made.wsKey.key).limits()).limits.running;
    await admin.setPlan(name, { running: 1 });
    const after = (await keyClient(made.wsKey.key).limits()).limits.running;
    assert(before === 2 && after === 1, [before, after]);
    assert(same((await admin.getPlan(name)).operator_limits, { running: 1 }));
    const e = await rejects(InvalidRequest, () => admin.setPlan(name, { runing: 1 }));
    assert(e.message.includes("runing"), e);
    const e2 = await rejects(NotFound, () => admin.getPlan("no-such-plan"));
    const e3 = await rejects(TypeError, () => admin.getPlan("../workspaces"));
    const e4 = await rejects(Conflict, () => admin.deletePlan(name));
    assert(e4.status === 409 && e4.message.includes("in use by 1 workspace:"), e4.toString());
    return `${name}: running 2 then 1, seen by the workspace at once (${before}, ${after}); ${e}; ${e2}; ${e3}; on it: ${e4}`;
  });

  await check("admin_ws_delete", async () => {
    await admin.deleteWorkspace(WS);
    const e = await rejects(NotFound, () => admin.getWorkspace(WS));
    assert(!(await admin.workspaces()).some((w) => w.name === WS), "still listed");
    const e2 = await rejects(AuthError, () => keyClient(made.wsKey.key).keys());
    const e3 = await rejects(NotFound, () => admin.deleteWorkspace(WS));
    // Its plan, no workspace on it now, goes; the server's plans do not.
    const plan = `${PREFIX.replace(/_/g, "-").slice(0, 20)}-ts-plan`;
    await admin.deletePlan(plan);
    const e4 = await rejects(NotFound, () => admin.getPlan(plan));
    const e5 = await rejects(NotFound, () => admin.deletePlan(plan));
    const e6 = await rejects(Conflict, () => admin.deletePlan("free"));
    const e7 = await rejects(Conflict, () => admin.deletePlan("enterprise"));
    assert(e6.message.includes("server's plans") && e7.message.includes("default plan"), [e6.toString(), e7.toString()]);
    return `gone: ${e}; its key: ${e2}; deleting again: ${e3}; its plan deleted: ${e4}; again: ${e5}; free: ${e6}; enterprise: ${e7}`;
  });

  await check("admin_bad_credential", async () => {
    const opt = { apiUrl: URL_, maxRetries: 0 };
    const e = await rejects(AuthError, () => new Admin({ ...opt, adminKey: "kilnop_abcdefghijkmnpqrstuvwxyz23456789" }).workspaces());
    assert(e.status === 401 && e.message.includes("operator credential") && e.message.includes("KILN_ADMIN_KEY"), e.toString());
    const e2 = await rejects(AuthError, () => new Admin({ ...opt, adminKey: "" }).workspaces());
    assert(e2.message.startsWith("no operator credential: set KILN_ADMIN_KEY"), e2.toString());
    const e3 = await rejects(AuthError, () => new Admin({ ...opt, adminKey: "kilnop_short" }).workspaces());
    assert(e3.message.includes("malformed operator credential"), e3.toString());
    const e4 = await rejects(PermissionDenied, () => new Admin({ ...opt, adminKey: KEY }).workspaces());
    assert(e4.message.includes("API key of a workspace cannot call /v1/admin"), e4.toString());
    const e5 = await rejects(AuthError, () => keyClient(OP).keys());
    return `unknown: ${e}; none: ${e2}; malformed: ${e3}; a workspace's key: ${e4}; the credential as an API key: ${e5}`;
  });
} finally {
  // What this made: the workspace (if a check left it), the read key.
  await admin.deleteWorkspace(WS).catch((e) => { if (!(e instanceof NotFound)) throw e; });
  if (made.read) await client.revokeKey(made.read.id);
}

console.log(`PASS ${NAME}_ran: the script ran to its end (${failed} checks failed)`);
process.exitCode = failed ? 1 : 0;
