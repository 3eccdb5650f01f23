// tests/browser/dashboard.mjs: kiln's web dashboard in a real browser
// (Debian's Chromium, headless, driven by playwright-core; nothing is
// downloaded), against a real kilnd: KILN_API_URL and KILN_API_KEY (a
// workspace key), and KILN_TEST_TEMPLATE (default minimal). Screenshots go
// to KILN_SCREENSHOTS (default build/dashboard-screenshots). Lines:
// "PASS name: detail" / "FAIL name: why". Everything it creates (sandboxes,
// keys, snapshots, volumes, apps, databases and their backups) is removed at the end, also after a failure.
import { chromium } from "playwright-core";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const URL_ = process.env.KILN_API_URL ?? "http://127.0.0.1:7070";
const KEY = process.env.KILN_API_KEY;
const TEMPLATE = process.env.KILN_TEST_TEMPLATE ?? "minimal";
const SHOTS = process.env.KILN_SCREENSHOTS ?? join(here, "../../build/dashboard-screenshots");
const BROWSER = process.env.KILN_CHROMIUM ?? "/usr/bin/chromium";
const P = process.env.KILN_TEST_PREFIX ?? "dash_";
const ONLY_STATIC = process.env.KILN_DASH_NO_SANDBOXES === "1";	// no KVM: the parts that need none
let failed = 0;
const pass = (n, d) => console.log(`PASS ${P}${n}: ${d}`);
const fail = (n, d) => (failed++, console.log(`FAIL ${P}${n}: ${String(d).replace(/\s+/g, " ").slice(0, 600)}`));
const check = (n, ok, d, why) => (ok ? pass(n, d) : fail(n, why ?? d));
if (!KEY) {
  fail("setup", "KILN_API_KEY is not set");
  process.exit(1);
}
mkdirSync(SHOTS, { recursive: true });

// ---- REST with the key (setup, cleanup, cross-checks) ----------------------------------------
async function rest(method, path, body, headers = {}) {
  const r = await fetch(URL_ + path, {
    method, headers: { Authorization: `Bearer ${KEY}`, ...(body ? { "Content-Type": "application/json" } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text, headers: r.headers };
}
const made = new Set();	// sandboxes to delete at the end
const keysMade = new Set();
const snapsMade = new Set();
const volsMade = new Set();
const appsMade = new Set();
const dbsMade = new Set();

// A step: runs fn, FAIL with the error if it throws (the rest goes on).
async function step(name, fn) {
  try {
    await fn();
  } catch (e) {
    fail(name, e?.stack?.split("\n").slice(0, 3).join(" ") ?? e);
  }
}

// ---- security of the HTTP side ---------------------------------------------------------------
async function session(key, extra = {}) {
  const r = await fetch(URL_ + "/v1/session", { method: "POST", headers: { "Content-Type": "application/json", ...extra }, body: JSON.stringify({ api_key: key }) });
  const setCookie = r.headers.get("set-cookie") ?? "";
  const json = await r.json().catch(() => null);
  const cookie = setCookie.split(";")[0];
  return { status: r.status, setCookie, cookie, json };
}

await step("csp", async () => {
  const r = await fetch(URL_ + "/dashboard/");
  const csp = r.headers.get("content-security-policy") ?? "";
  const html = await r.text();
  const js = html.match(/src="\/dashboard\/(app-[^"]+\.js)"/)?.[1];
  const a = js ? await fetch(URL_ + "/dashboard/" + js) : null;
  const ok = r.status === 200 && /script-src 'self'(;|$)/.test(csp) && /default-src 'none'/.test(csp) &&
    /frame-ancestors 'none'/.test(csp) && !/unsafe-eval/.test(csp) && !/script-src[^;]*unsafe-inline/.test(csp) &&
    r.headers.get("cache-control") === "no-cache" && r.headers.get("x-content-type-options") === "nosniff" &&
    a?.status === 200 && /immutable/.test(a.headers.get("cache-control") ?? "") && (a.headers.get("content-security-policy") ?? "") === csp;
  check("csp", ok, `/dashboard/ and ${js}: ${csp}; index no-cache, bundle immutable`,
    `status ${r.status} csp "${csp}" cache "${r.headers.get("cache-control")}" bundle ${a?.status} "${a?.headers.get("cache-control")}"`);
  const root = await fetch(URL_ + "/", { redirect: "manual" });
  const trav = await fetch(URL_ + "/dashboard/..%2fkilnd.db");
  check("dashboard_paths", root.status === 302 && root.headers.get("location") === "/dashboard/" && trav.status === 404,
    "/ redirects to /dashboard/; an escaping name is 404", `/ ${root.status} ${root.headers.get("location")}, ..%2f ${trav.status}`);
});

let S = null;	// a session made by fetch
await step("cookie_flags", async () => {
  S = await session(KEY);
  const c = S.setCookie;
  check("cookie_flags", S.status === 201 && /^kiln_session=[0-9a-f]{64}$/.test(S.cookie) && /HttpOnly/i.test(c) && /SameSite=Strict/i.test(c) &&
    /Path=\//.test(c) && /Max-Age=\d+/.test(c) && !/Secure/i.test(c) && /^[0-9a-f]{64}$/.test(S.json?.csrf_token ?? ""),
    `Set-Cookie: ${c.replace(/=[0-9a-f]{64}/, "=…")}`, `${S.status} ${c} ${JSON.stringify(S.json)}`);
  const tls = await session(KEY, { "X-Forwarded-Proto": "https" });
  check("cookie_secure_tls", /;\s*Secure/i.test(tls.setCookie), "Secure behind a TLS proxy (X-Forwarded-Proto: https)", tls.setCookie);
  await fetch(URL_ + "/v1/session", { method: "DELETE", headers: { Cookie: tls.cookie, "X-CSRF-Token": tls.json.csrf_token } });
  const bad = await session("kiln_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  check("session_bad_key", bad.status === 401 && !bad.setCookie && /unknown or revoked/.test(bad.json?.error?.message ?? ""),
    `401 ${bad.json?.error?.message}`, `${bad.status} ${JSON.stringify(bad.json)} ${bad.setCookie}`);
});

await step("csrf", async () => {
  // Every mutating route, with the cookie but without (or with a wrong)
  // token, is refused before it does anything. The routes come from kilnd.
  const routes = readFileSync(process.env.KILN_ROUTES ?? "/dev/null", "utf8").trim().split("\n").filter(Boolean)
    .map((l) => l.split(" ")).filter(([m, p]) => !["GET", "HEAD"].includes(m) && !p.includes("/proxy/") && p !== "/v1/session" || (m === "DELETE" && p === "/v1/session"));
  if (routes.length < 10) throw new Error(`only ${routes.length} mutating routes read from KILN_ROUTES`);
  const before = (await rest("GET", "/v1/keys")).json.keys.length;
  let bad = [];
  for (const [m, p] of routes) {
    const path = p.replace("{id}", "sbx_doesnotexist00000000").replace("{port}", "8080");
    for (const tok of [undefined, "0".repeat(64)]) {
      const r = await fetch(URL_ + path, { method: m, headers: { Cookie: S.cookie, "Content-Type": "application/json", ...(tok ? { "X-CSRF-Token": tok } : {}) }, body: m === "DELETE" ? undefined : "{}" });
      const j = await r.json().catch(() => null);
      // The cluster's routes (docs/cluster.md) take neither a session nor
      // an API key: a join token or a host's credential is their only
      // credential, so a cookie carries nothing there and CSRF does not
      // apply; they must refuse the request all the same.
      if (p.startsWith("/v1/cluster/")) {
        if (r.status !== 400 && r.status !== 401) bad.push(`${m} ${p} with only a cookie -> ${r.status}`);
        continue;
      }
      // The operator's routes (docs/security.md "Operators") take only an
      // operator credential, never a session: a cookie is no credential
      // there (401), so there is nothing for CSRF to borrow.
      // The host routes (docs/cluster.md "Agent protocol") take only the
      // key a joined agent's API was given: on a kilnd that is not a joined
      // agent they do not exist (404), on an agent a cookie is refused (401).
      if (p.startsWith("/v1/host/")) {
        if (r.status !== 401 && r.status !== 404) bad.push(`${m} ${p} with only a cookie -> ${r.status}`);
        continue;
      }
      if (p.startsWith("/v1/admin/")) {
        if (r.status !== 401) bad.push(`${m} ${p} with only a cookie -> ${r.status}`);
        continue;
      }
      if (r.status !== 403 || !/CSRF/.test(j?.error?.message ?? "")) bad.push(`${m} ${p} ${tok ? "wrong" : "no"} token -> ${r.status}`);
    }
  }
  const after = (await rest("GET", "/v1/keys")).json.keys.length;
  check("csrf_required", bad.length === 0 && before === after, `${routes.length} mutating routes refuse a cookie without the right X-CSRF-Token (403)`, bad.join("; "));
  const ok = await fetch(URL_ + "/v1/keys", { method: "POST", headers: { Cookie: S.cookie, "X-CSRF-Token": S.json.csrf_token, "Content-Type": "application/json" }, body: '{"name":"csrf-ok"}' });
  const k = await ok.json();
  if (k.id) keysMade.add(k.id);
  check("csrf_accepted", ok.status === 201 && k.key?.startsWith("kiln_"), "with the token the same request works (201)", `${ok.status} ${JSON.stringify(k)}`);
  const evil = await fetch(URL_ + "/v1/keys", { headers: { Cookie: S.cookie, Origin: "http://evil.example" } });
  const proxied = await fetch(URL_ + "/v1/sandboxes/sbx_doesnotexist00000000/proxy/8080/", { headers: { Cookie: S.cookie } });
  check("cookie_origin", evil.status === 403 && proxied.status === 401,
    "a cookie request from another Origin is 403; the cookie opens no exposed port (401)", `origin ${evil.status}, proxy ${proxied.status}`);
});

// ---- the browser -----------------------------------------------------------------------------
// tests/sdk/serve runs kilnd with --domain sdk.test (apps need it): its
// names lead to kilnd's own address, as a wildcard DNS record would.
const browser = await chromium.launch({ executablePath: BROWSER, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
  `--host-resolver-rules=MAP *.sdk.test ${new URL(URL_).hostname}`] });
const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 }, acceptDownloads: true, colorScheme: "light" });
const page = await ctx.newPage();
const consoleErrors = [];
page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
page.on("pageerror", (e) => consoleErrors.push(String(e)));
page.on("dialog", (d) => d.accept());	// the confirmations: yes
const shot = (name) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
const T = 180_000;	// sandbox operations in an emulated host are slow

async function signIn(key) {
  await page.goto(URL_ + "/dashboard/");
  await page.getByLabel("Workspace API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
}

await step("bad_key", async () => {
  await signIn("kiln_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
  const msg = page.locator("#signin-msg");
  await msg.filter({ hasText: "Sign-in refused" }).waitFor({ timeout: 15000 });
  const text = await msg.textContent();
  await shot("signin-refused");
  check("bad_key_refused", /unknown or revoked API key/.test(text) && (await page.getByLabel("Workspace API key").inputValue()) === "",
    `the page says "${text}" and the field is emptied`, text);
});

await step("sign_in", async () => {
  await signIn(KEY);
  await page.locator("#sandboxes").waitFor({ timeout: 15000 });
  await page.locator("#live", { hasText: "live" }).waitFor({ timeout: 15000 });
  const jar = await ctx.cookies();
  const c = jar.find((x) => x.name === "kiln_session");
  const seen = await page.evaluate(() => document.cookie + JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
  check("sign_in", c && c.httpOnly && c.sameSite === "Strict" && !seen.includes("kiln_session") && !seen.includes(KEY.slice(5)),
    "signed in; the cookie is HttpOnly and SameSite=Strict; neither the key nor the cookie is readable by the page's script or in storage",
    `cookie ${JSON.stringify(c)}, script sees ${seen}`);
  await shot("sandboxes-empty");
});

// diskShown(id, want, go): sandbox id's page (opened first if go) shows its vCPUs, memory and
// root disk as the API's record says, the disk being want MiB (null: the
// template's, whatever the record says it is, not null).
const DISK_MIB = 72;
let otherMs = 0;	// the REST create of the sandbox with DISK_MIB, ms
async function diskShown(id, want, go = true) {
  const t0 = Date.now();
  if (go) await page.goto(`${URL_}/dashboard/#/sandboxes/${id}`);
  await page.locator("#d-disk", { hasText: "MiB" }).waitFor({ timeout: 30000 });
  const j = (await rest("GET", `/v1/sandboxes/${id}`)).json;
  const disk = (await page.locator("#d-disk").textContent()).trim();
  const size = (await page.locator("#d-size").textContent()).trim();
  check(want === null ? "disk_size_template" : "disk_size", disk === `${j?.disk_mib} MiB` && (want === null ? j?.disk_mib > 0 : j?.disk_mib === want) &&
    size === `${j?.vcpus} vCPU, ${j?.memory_mib} MiB memory`,
    `${id}'s page: "${size}", disk "${disk}", as the API's vcpus ${j?.vcpus}, memory_mib ${j?.memory_mib}, disk_mib ${j?.disk_mib}` +
      `; ready in ${j?.ready_ms?.toFixed(0)} ms${want === null ? "" : ` (the create took ${otherMs} ms)`}; the page checked in ${Date.now() - t0} ms`,
    `page "${size}", "${disk}"; API ${JSON.stringify({ vcpus: j?.vcpus, memory_mib: j?.memory_mib, disk_mib: j?.disk_mib })}; wanted disk ${want ?? "the template's"}`);
}

// What the page should say of a shape the API gives (web/src/dom.ts fmtShape).
const shapeOf = (j) => `${j?.vcpus ? `${j.vcpus} vCPU` : "—"} · ${j?.memory_mib ? `${j.memory_mib} MiB` : "—"} · ${j?.disk_mib ? `${j.disk_mib} MiB` : "—"} disk`;

let sbx = null, child = null;
if (!ONLY_STATIC) {
  await step("create", async () => {
    await page.evaluate(() => (window.__noReload = 1));
    await page.getByLabel("Template").selectOption(TEMPLATE);
    await page.getByLabel("Idle timeout (s, 0: none)").fill("900");
    await page.getByLabel("Environment").fill("GREETING=hello from the dashboard");
    // First refused: a disk smaller than the template's. The form says what
    // kilnd says (the same create by REST answers the same), keeps all
    // that was typed, and the create below sends it unchanged but the disk.
    await step("create_refused", async () => {
      const t0 = Date.now();
      const tj = (await rest("GET", `/v1/templates/${TEMPLATE}`)).json;
      const shape = `${TEMPLATE}: ${shapeOf(tj)}`;
      await page.locator("#c-shape", { hasText: shape }).waitFor({ timeout: 15000 }).catch(() => {});
      const shown = (await page.locator("#c-shape").textContent()).trim();
      const diskBox = page.getByLabel("Disk MiB (empty: default)");
      await diskBox.fill("8");
      await page.getByRole("button", { name: "Create sandbox" }).click();
      const msg = page.locator("#create-msg");
      await msg.filter({ hasText: "Create failed" }).waitFor({ timeout: 30000 });
      const said = (await msg.textContent()).trim();
      const r = await rest("POST", "/v1/sandboxes", { template: TEMPLATE, ttl_seconds: 900, disk_mib: 8 });
      if (r.json?.id) made.add(r.json.id);
      const kept = [await page.getByLabel("Template").inputValue(), await page.getByLabel("Idle timeout (s, 0: none)").inputValue(),
        await page.getByLabel("Environment").inputValue(), await diskBox.inputValue()];
      const want = [TEMPLATE, "900", "GREETING=hello from the dashboard", "8"];
      await shot("create-refused");
      check("create_refused", r.status === 400 && said === `Create failed: ${r.json?.error?.message}` &&
        said.includes(`smaller than template ${TEMPLATE}'s disk of ${tj?.disk_mib} MiB`) && JSON.stringify(kept) === JSON.stringify(want) &&
        shown === shape && tj?.disk_mib > 0,
        `disk 8 MiB refused in the form with kilnd's words ("${said}"), all typed kept; the form shows "${shown}" as GET /v1/templates/${TEMPLATE} (${Date.now() - t0} ms)`,
        `form "${said}" / REST ${r.status} ${r.text.slice(0, 200)}; kept ${JSON.stringify(kept)}; shape "${shown}", want "${shape}"`);
      await diskBox.fill("");
    });
    await page.getByRole("button", { name: "Create sandbox" }).click();
    const row = page.locator("#sandboxes tbody tr").first();
    await row.waitFor({ timeout: T });
    sbx = await row.getAttribute("data-id");
    made.add(sbx);
    await page.locator(`#sandboxes tr[data-id="${sbx}"] .badge`, { hasText: "running" }).waitFor({ timeout: T });
    const env = await rest("POST", `/v1/sandboxes/${sbx}/exec`, { cmd: "echo $GREETING" });
    check("create", env.json?.stdout === "hello from the dashboard\n", `${sbx} created from the form, running, with its env`, JSON.stringify(env.json));
    // One made behind the page's back shows up by the event stream alone.
    // It asks for a larger root disk (one ext4 group past minimal's 64
    // MiB, the cheapest grow): its page shows the API's disk_mib.
    const tOther = Date.now();
    const other = await rest("POST", "/v1/sandboxes", { template: TEMPLATE, ttl_seconds: 900, disk_mib: DISK_MIB });
    otherMs = Date.now() - tOther;
    if (other.json?.id) made.add(other.json.id);
    await page.locator(`#sandboxes tr[data-id="${other.json?.id}"]`).waitFor({ timeout: 30000 });
    const same = await page.evaluate(() => window.__noReload === 1);
    check("live_list", same, `${other.json?.id}, created by the REST API, appeared without a reload (SSE)`, "the page reloaded");
    // Each row's shape as the API's record gives it: the form's (the
    // template's disk) and the REST one's (DISK_MIB).
    const shapes = [], tShape = Date.now();
    for (const id of [sbx, other.json?.id]) {
      const j = (await rest("GET", `/v1/sandboxes/${id}`)).json;
      const cell = page.locator(`#sandboxes tr[data-id="${id}"] td.shape`);
      await cell.filter({ hasText: shapeOf(j) }).waitFor({ timeout: 15000 }).catch(() => {});
      shapes.push({ id, want: shapeOf(j), got: (await cell.textContent()).trim(), disk: j?.disk_mib });
    }
    check("list_shape", shapes.every((x) => x.got === x.want && x.disk > 0) && shapes[1].disk === DISK_MIB,
      `the list shows each sandbox's shape as the API gives it: ${shapes.map((x) => `"${x.got}"`).join(", ")} (${Date.now() - tShape} ms)`, JSON.stringify(shapes));
    await page.getByLabel("Status").selectOption("hibernated");
    const none = await page.locator("#sandboxes tbody tr").count();
    await page.getByLabel("Status").selectOption("all");
    await page.getByLabel("Filter").fill(other.json.id.slice(4, 14));
    const one = await page.locator("#sandboxes tbody tr").count();
    await page.getByLabel("Filter").fill("");
    check("filters", none === 0 && one === 1, "status hibernated shows none; an id filter shows one", `${none} hibernated, ${one} by id`);
    await shot("sandboxes");
    await step("disk_size", () => diskShown(other.json.id, DISK_MIB));
    await page.goto(`${URL_}/dashboard/#/sandboxes`);
    await page.locator(`#sandboxes tr[data-id="${other.json.id}"]`).waitFor({ timeout: 30000 });
    await rest("DELETE", `/v1/sandboxes/${other.json.id}`);
    await page.locator(`#sandboxes tr[data-id="${other.json.id}"]`).waitFor({ state: "detached", timeout: 60000 });
    made.delete(other.json.id);
    pass("live_delete", `${other.json.id}, deleted by the REST API, left the list by itself`);
  });

  if (sbx) {
    await step("terminal", async () => {
      await page.locator(`#sandboxes a[href="#/sandboxes/${sbx}"]`).click();
      await step("disk_size_template", () => diskShown(sbx, null, false));
      await page.locator("#terminal .xterm-rows").waitFor({ timeout: 30000 });
      await page.locator("#term-status", { hasText: "connected" }).waitFor({ timeout: 60000 });
      const rows = page.locator("#terminal .xterm-rows");
      const screen = () => rows.evaluate((el) => [...el.children].map((r) => r.textContent.replace(/\u00a0/g, " ").trimEnd()));
      // Type once the shell shows its prompt: a shell starting up may
      // drop what was typed before it reads.
      let lines = [];
      for (let i = 0; i < 120 && !lines.some((l) => /[#$]$/.test(l)); i++) {
        await page.waitForTimeout(500);
        lines = await screen();
      }
      await page.locator("#terminal").click();
      await page.keyboard.type("echo hello\n", { delay: 30 });
      const answered = (ls) => ls.some((l, i) => /[#$] echo hello$/.test(l) && ls[i + 1] === "hello");
      for (let i = 0; i < 100 && !answered(lines); i++) {
        await page.waitForTimeout(300);
        lines = await screen();
      }
      await shot("terminal");
      check("terminal_echo", answered(lines),
        "typed `echo hello` into xterm.js over the PTY WebSocket (cookie session) and read `hello` back from the screen", JSON.stringify(lines.filter(Boolean)));
    });

    await step("files", async () => {
      await page.getByRole("tab", { name: "Files" }).click();
      await page.getByLabel("Directory", { exact: true }).fill("/tmp");
      await page.getByRole("button", { name: "List" }).click();
      const data = randomBytes(200_000);
      const sum = createHash("sha256").update(data).digest("hex");
      await page.getByLabel("Upload a file to this directory").setInputFiles({ name: "dash-upload.bin", mimeType: "application/octet-stream", buffer: data });
      await page.getByRole("button", { name: "Upload", exact: true }).click();
      const link = page.locator('#files tr[data-name="dash-upload.bin"] a');
      await link.waitFor({ timeout: 60000 });
      const inGuest = await rest("POST", `/v1/sandboxes/${sbx}/exec`, { cmd: "sha256sum /tmp/dash-upload.bin" });
      const [dl] = await Promise.all([page.waitForEvent("download", { timeout: 60000 }), link.click()]);
      const back = readFileSync(await dl.path());
      const sumBack = createHash("sha256").update(back).digest("hex");
      await shot("files");
      check("files_upload_download", inGuest.json?.stdout?.startsWith(sum) && sumBack === sum,
        `200000 random bytes uploaded, listed, in the guest and downloaded with the same SHA-256 ${sum.slice(0, 16)}…`,
        `guest ${inGuest.json?.stdout}, download ${sumBack}, sent ${sum}`);
      await rest("POST", `/v1/sandboxes/${sbx}/exec`, { cmd: "echo 'old text' > /tmp/dash-note.txt" });
      await page.getByRole("button", { name: "List" }).click();
      await page.getByRole("button", { name: "Edit dash-note.txt" }).click();
      const area = page.getByLabel("Contents of /tmp/dash-note.txt");
      const before = await area.inputValue();
      await area.fill("new text\nsecond line\n");
      await shot("file-edit");
      await page.getByRole("button", { name: "Save" }).click();
      await page.locator("#editor form").waitFor({ state: "detached", timeout: 30000 });
      const after = await rest("POST", `/v1/sandboxes/${sbx}/exec`, { cmd: "cat /tmp/dash-note.txt" });
      check("file_edit", before === "old text\n" && after.json?.stdout === "new text\nsecond line\n",
        "a small text file opened in the editor and saved back", `before ${JSON.stringify(before)}, after ${JSON.stringify(after.json?.stdout)}`);
    });

    await step("fork", async () => {
      await page.getByRole("button", { name: "Fork" }).click();
      const msg = page.locator("#action-msg");
      await msg.filter({ hasText: /forked: sbx_/ }).waitFor({ timeout: T });
      child = (await msg.textContent()).match(/sbx_[a-z0-9]+/)[0];
      made.add(child);
      await page.getByRole("tab", { name: "Fork tree" }).click();
      const nested = page.locator(`#tree li[data-id="${sbx}"] > ul > li[data-id="${child}"]`);
      await nested.waitFor({ timeout: 30000 });
      await shot("fork-tree");
      pass("fork_tree", `forked ${child}; the tree draws it under ${sbx}`);
    });

    await step("hibernate_wake", async () => {
      await page.getByRole("button", { name: "Hibernate" }).click();
      await page.locator("#d-status .badge", { hasText: "hibernated" }).waitFor({ timeout: T });
      const s1 = (await rest("GET", `/v1/sandboxes/${sbx}`)).json?.status;
      await shot("hibernated");
      await page.getByRole("button", { name: "Wake" }).click();
      await page.locator("#d-status .badge", { hasText: "running" }).waitFor({ timeout: T });
      const s2 = (await rest("GET", `/v1/sandboxes/${sbx}`)).json?.status;
      check("hibernate_wake", s1 === "hibernated" && s2 === "running", "hibernated, then woken, from the buttons; the page followed each state", `${s1} then ${s2}`);
    });

    await step("processes_ports", async () => {
      await page.getByRole("tab", { name: "Processes" }).click();
      await page.locator("#ps", { hasText: "PID" }).waitFor({ timeout: 60000 });
      await page.getByRole("tab", { name: "Ports" }).click();
      await page.getByLabel("Guest port").fill("8080");
      await page.getByRole("button", { name: "Expose" }).click();
      await page.locator("#ports a", { hasText: "/proxy/8080" }).waitFor({ timeout: 30000 });
      await shot("ports");
      pass("processes_ports", "the process list shows ps output; port 8080 exposed with its URL");
      // The charts fill from `event: usage` (kilnd's accounting samples).
      let pts = 0;
      for (let i = 0; i < 60 && pts < 3; i++) {
        pts = Number(await page.locator("#chart-mem").getAttribute("data-points"));
        if (pts < 3) await page.waitForTimeout(1000);
      }
      const caption = await page.locator("#chart-mem figcaption").textContent();
      const lines = await page.locator("#chart-cpu polyline, #chart-mem polyline").count();
      await shot("charts");
      const mib = Number(caption.match(/([\d.]+) MiB/)?.[1] ?? 0);
      check("live_charts", pts >= 3 && lines === 2 && mib > 1, `memory and CPU charts drawn from ${pts} pushed samples (${caption})`, `${pts} samples, ${lines} lines, "${caption}"`);
    });

    await step("network_policy", async () => {
      await page.getByRole("tab", { name: "Network" }).click();
      await page.getByLabel("Allow the internet").uncheck();
      await page.getByLabel("Also allowed (CIDRs, when the internet is not)").fill("10.0.0.0/8");
      await page.getByRole("button", { name: "Save policy" }).click();
      const saved = page.locator('form[aria-label="Egress policy"] .notice');
      await saved.filter({ hasText: /policy saved|failed/ }).waitFor({ timeout: 60000 });
      const closed = (await rest("GET", `/v1/sandboxes/${sbx}`)).json?.network;
      await shot("network");
      await page.getByLabel("Allow the internet").check();
      await page.getByLabel("Also allowed (CIDRs, when the internet is not)").fill("");
      await page.getByRole("button", { name: "Save policy" }).click();
      let open = null;
      for (let i = 0; i < 60 && !open?.allow_internet; i++) {
        await page.waitForTimeout(500);
        open = (await rest("GET", `/v1/sandboxes/${sbx}`)).json?.network;
      }
      check("network_policy", closed?.allow_internet === false && (closed?.allow_out ?? []).includes("10.0.0.0/8") && open?.allow_internet === true,
        "the egress policy closed (only 10.0.0.0/8) and opened again from the Network tab", `${await saved.textContent()} closed ${JSON.stringify(closed)}, open ${JSON.stringify(open)}`);
    });

    await step("snapshot_page", async () => {
      await page.getByRole("button", { name: "Snapshot" }).click();
      const msg = page.locator("#action-msg");
      await msg.filter({ hasText: /snapshot snap_\w+ taken/ }).waitFor({ timeout: T });
      const snap = (await msg.textContent()).match(/snap_[a-z0-9]+/)[0];
      snapsMade.add(snap);
      await page.getByRole("link", { name: "Templates" }).click();
      await page.locator(`#snapshots tr[data-id="${snap}"]`).waitFor({ timeout: 30000 });
      const tpl = await page.locator(`#templates tr[data-name="${TEMPLATE}"]`).textContent();
      // Its disk, as both template answers give it, and as the form's
      // sandbox (made without disk_mib) got it.
      const cellDisk = (await page.locator(`#templates tr[data-name="${TEMPLATE}"] td.disk`).textContent()).trim();
      const listed = (await rest("GET", "/v1/templates")).json?.templates?.find((x) => x.name === TEMPLATE)?.disk_mib;
      const got = (await rest("GET", `/v1/templates/${TEMPLATE}`)).json?.disk_mib;
      const sbxDisk = (await rest("GET", `/v1/sandboxes/${sbx}`)).json?.disk_mib;
      check("templates_disk", cellDisk === `${listed} MiB` && listed > 0 && got === listed && sbxDisk === listed,
        `the templates page shows ${TEMPLATE}'s disk "${cellDisk}": GET /v1/templates and /v1/templates/${TEMPLATE} say ${listed}, and its sandbox has ${sbxDisk}`,
        `page "${cellDisk}", listed ${listed}, got ${got}, sandbox ${sbxDisk}`);
      await shot("templates");
      await page.getByRole("button", { name: `Delete snapshot ${snap}` }).click();
      await page.locator(`#snapshots tr[data-id="${snap}"]`).waitFor({ state: "detached", timeout: 60000 });
      const gone = await rest("GET", `/v1/snapshots/${snap}`);
      if (gone.status === 404) snapsMade.delete(snap);
      check("snapshot_page", /v\d+/.test(tpl) && gone.status === 404,
        `snapshot ${snap} taken from the sandbox page, listed with the templates (${tpl.trim().slice(0, 60)}), deleted after the confirmation`, `template row "${tpl}", GET after delete ${gone.status}`);
      await page.goto(`${URL_}/dashboard/#/sandboxes/${sbx}`);
      await page.locator("#d-status .badge").waitFor({ timeout: 30000 });
    });

    await step("proxied_app_isolated", async () => {
      // A page of the guest, served by path on kilnd's own origin, tries
      // to read the session and call the API with it.
      const page1 = `<!doctype html><body>app<script>
let out = [];
try { out.push("cookie=" + document.cookie); } catch (e) { out.push("cookie:blocked"); }
fetch("/v1/session", { credentials: "include" }).then((r) => r.text()).then(
  (t) => { document.body.dataset.r = out.concat("session=" + t).join("|"); },
  () => { document.body.dataset.r = out.concat("session:blocked").join("|"); });
</script>`;
      const cgi = '#!/bin/sh\necho "Content-Type: text/plain"\necho\necho "cookie=[$HTTP_COOKIE]"\n';
      const setup = await rest("POST", `/v1/sandboxes/${sbx}/exec`, {
        cmd: "mkdir -p /tmp/www/cgi-bin && cat > /tmp/www/index.html && printf '%s' \"$CGI\" > /tmp/www/cgi-bin/c && chmod +x /tmp/www/cgi-bin/c && " +
          "busybox httpd -p 127.0.0.1:8081 -h /tmp/www </dev/null >/dev/null 2>&1",
        env: { CGI: cgi }, stdin: page1,
      });
      const exp = await rest("POST", `/v1/sandboxes/${sbx}/ports`, { port: 8081, public: true });
      if (setup.json?.exit_code !== 0 || !exp.json?.url) throw new Error(`guest web server: ${setup.text} ${exp.text}`);
      // With --domain, a browser opening a public port's page by path is
      // sent to the port's own origin (docs/api.md): the app's cookie is
      // there too; isolated by that origin rather than by the path's CSP.
      await ctx.addCookies([{ name: "app", value: "1", url: URL_ }, { name: "app", value: "1", domain: ".sdk.test", path: "/" }]);
      const p2 = await ctx.newPage();
      const base = new URL(exp.json.url, URL_).href.replace(/\/?$/, "/");
      const seen = await (await p2.goto(base + "cgi-bin/c")).text();
      const resp = await p2.goto(base);
      const csp = (await resp.allHeaders())["content-security-policy"] ?? "";
      await p2.locator("body[data-r]").waitFor({ timeout: 30000 });
      const r = await p2.evaluate(() => document.body.dataset.r);
      await p2.close();
      const ownOrigin = new URL(resp.url()).host !== new URL(URL_).host;
      check("proxied_app_isolated", /cookie=\[app=1\]/.test(seen) && !/kiln_session/.test(seen) && (/^sandbox /.test(csp) || ownOrigin) &&
        !/csrf_token/.test(r) && !/kiln_session/.test(r),
        `the guest got "${seen.trim()}"; its page (${ownOrigin ? "its own origin " + new URL(resp.url()).host : `CSP "${csp}"`}) saw ${r.slice(0, 140)}`, `guest saw ${seen}; csp ${csp}; page saw ${r}`);
    });

    await step("delete", async () => {
      await page.getByRole("tab", { name: "Terminal" }).click();
      await page.getByRole("button", { name: "Delete" }).click();
      await page.locator("#sandboxes").waitFor({ timeout: T });
      await page.locator(`#sandboxes tr[data-id="${sbx}"]`).waitFor({ state: "detached", timeout: 60000 });
      const gone = await rest("GET", `/v1/sandboxes/${sbx}`);
      check("delete", gone.status === 404, `${sbx} deleted after the confirmation`, `GET says ${gone.status}`);
      if (gone.status === 404) made.delete(sbx);
    });
  }

  await step("volumes", async () => {
    // Made on the Volumes page, listed there; a name taken and a delete of
    // an attached volume are refused in kilnd's words; deleted once free.
    const name = `dash-vol-${process.pid}`;
    await page.goto(URL_ + "/dashboard/#/volumes");
    await page.locator("#volumes").waitFor({ timeout: 15000 });
    // A name kilnd would refuse is caught by the field's pattern first.
    await page.getByLabel("Name", { exact: true }).fill("Bad_Name");
    const mismatch = await page.locator("#v-name").evaluate((e) => e.validity.patternMismatch);
    check("volume_name_pattern", mismatch === true, "the name field flags Bad_Name (pattern [a-z0-9][a-z0-9-]*)", `patternMismatch ${mismatch}`);
    await page.getByLabel("Name", { exact: true }).fill(name);
    await page.getByLabel("Size (MiB)").fill("16");
    await page.getByRole("button", { name: "Create volume" }).click();
    const row = page.locator(`#volumes tr[data-name="${name}"]`);
    await row.waitFor({ timeout: 30000 });
    const id = await row.getAttribute("data-id");
    volsMade.add(id);
    const got = await rest("GET", `/v1/volumes/${id}`);
    const text = (await row.textContent()).replace(/\s+/g, " ");
    check("volume_create", got.status === 200 && got.json?.size_mib === 16 && text.includes(id) && text.includes("16 MiB"),
      `${name} (${id}) created from the form and listed: "${text.slice(0, 120)}"`, `GET ${got.status} ${got.text}; row "${text}"`);
    const msg = page.locator("#volume-msg");
    await page.getByLabel("Name", { exact: true }).fill(name);
    await page.getByRole("button", { name: "Create volume" }).click();
    await msg.filter({ hasText: "Create refused" }).waitFor({ timeout: 15000 });
    const taken = await msg.textContent();
    check("volume_name_taken", new RegExp(`named '${name}' exists`).test(taken), `a second ${name}: "${taken}"`, taken);

    // Attached (by the REST API): the row says where, and the delete is refused naming the sandbox.
    const sb = await rest("POST", "/v1/sandboxes", { template: TEMPLATE, ttl_seconds: 900, volumes: [{ name, path: "/data", read_only: true }] });
    if (sb.json?.id) made.add(sb.json.id);
    if (sb.status !== 201) throw new Error(`a sandbox with the volume: ${sb.status} ${sb.text}`);
    await row.filter({ hasText: `${sb.json.id} at /data (ro)` }).waitFor({ timeout: 60000 });
    await shot("volumes");
    await page.getByRole("button", { name: `Delete volume ${name}` }).click();
    await msg.filter({ hasText: "Delete refused" }).waitFor({ timeout: 15000 });
    const refused = await msg.textContent();
    const still = await rest("GET", `/v1/volumes/${id}`);
    check("volume_delete_attached", refused.includes(sb.json.id) && still.status === 200,
      `shown attached to ${sb.json.id} at /data (ro); its delete refused: "${refused}"`, `"${refused}", GET ${still.status}`);

    await rest("DELETE", `/v1/sandboxes/${sb.json.id}`);
    made.delete(sb.json.id);
    await row.filter({ hasText: "—" }).waitFor({ timeout: 60000 });
    await page.getByRole("button", { name: `Delete volume ${name}` }).click();
    await row.waitFor({ state: "detached", timeout: 30000 });
    const gone = await rest("GET", `/v1/volumes/${id}`);
    if (gone.status === 404) volsMade.delete(id);
    check("volume_delete", gone.status === 404, `${name} deleted from the page once its sandbox was gone`, `GET after delete ${gone.status}`);
  });

  await step("apps", async () => {
    // An app made by REST (minimal's busybox httpd: a small VM), whose log
    // and command carry markup: the page shows them as text, and no script
    // of theirs runs. Listed with its URL (its own origin, which serves it),
    // its log and events on its page, redeployed and deleted from there.
    const t0 = Date.now();
    const xss = `<script>window.__kilnXss=1</script><img src=x onerror="window.__kilnXss=2">`;
    const name = `dash-app-${process.pid}`;
    const cmd = `echo '${xss}'; mkdir -p /srv/w && echo dash-app-page > /srv/w/index.html && exec httpd -f -p 8000 -h /srv/w`;
    const made_ = await rest("POST", "/v1/apps", { name, port: 8000, template: "minimal", command: cmd, restart: "always" });
    if (made_.status !== 201) throw new Error(`POST /v1/apps: ${made_.status} ${made_.text}`);
    const a = made_.json;
    appsMade.add(a.id);
    await page.goto(URL_ + "/dashboard/#/apps");
    const row = page.locator(`#apps tr[data-id="${a.id}"]`);
    await row.waitFor({ timeout: 30000 });
    const text = (await row.textContent()).replace(/\s+/g, " ");
    const href = await row.locator("a[target=_blank]").getAttribute("href");
    const rel = await row.locator("a[target=_blank]").getAttribute("rel");
    await shot("apps");
    // The link opens the app itself (*.sdk.test leads to kilnd here).
    const [tab] = await Promise.all([ctx.waitForEvent("page"), row.locator("a[target=_blank]").click()]);
    await tab.waitForLoadState("domcontentloaded", { timeout: 30000 });
    const served = await tab.content();
    await tab.close();
    check("apps_list", href === a.url && /^http:\/\/app-[a-z0-9]+\.sdk\.test:\d+\/$/.test(href) && /noopener/.test(rel ?? "") &&
      text.includes(name) && text.includes("running") && served.includes("dash-app-page"),
      `${name} (${a.id}) listed: "${text.slice(0, 140)}"; its link ${href} opens the app's page`, `row "${text}" href ${href} rel ${rel}; page "${served.slice(0, 200)}"`);

    await row.getByRole("link", { name }).click();
    const log = page.locator("#app-log");
    await log.filter({ hasText: "window.__kilnXss" }).waitFor({ timeout: 60000 });
    const ev = await page.locator("#app-events li").count();
    const cmdShown = await page.locator("#app-facts").textContent();
    const markup = await page.evaluate(() => document.querySelectorAll("#app-log *, #app-facts script, #app-facts img, #app-events *:not(li):not(time)").length);
    const ran = await page.evaluate(() => (window).__kilnXss ?? null);
    await shot("app");
    check("app_log_xss_as_text", (await log.textContent()).includes(xss) && cmdShown.includes(xss) && markup === 0 && ran === null && ev >= 1,
      `the log line and the command ${xss.slice(0, 30)}… shown as text (no element made, no script ran); ${ev} events`,
      `log "${(await log.textContent()).slice(0, 200)}", elements ${markup}, __kilnXss ${ran}, events ${ev}`);

    // Follow: the tail again over SSE (cookie session, no key in the page).
    await page.locator("#app-follow").check();
    await page.locator("#app-log-msg", { hasText: "following" }).waitFor({ timeout: 30000 });
    await log.filter({ hasText: "window.__kilnXss" }).waitFor({ timeout: 30000 });
    pass("app_log_follow", "Follow streamed the log (GET .../logs?follow=true) into the page");

    // Reload log: with Follow off (its stream closed) a line appended in the
    // guest is not on the page until "Reload log" fetches the tail again.
    await page.locator("#app-follow").uncheck();
    await page.locator("#app-log-msg", { hasText: "not following" }).waitFor({ timeout: 10000 });
    const marker = `dash-reload-${process.pid}`;
    const ex = await rest("POST", `/v1/sandboxes/${a.sandbox_id}/exec`, { cmd: `echo ${marker} >> /var/log/kiln-app.log` });
    await page.waitForTimeout(1500);
    const early = (await log.textContent()).includes(marker);
    await page.getByRole("button", { name: "Reload log" }).click();
    await log.filter({ hasText: marker }).waitFor({ timeout: 30000 });
    const counted = await page.locator("#app-log-msg").textContent();
    check("app_reload_log", ex.status === 200 && !early && /^\d+ lines?$/.test(counted.trim()) && !(await page.locator("#app-follow").isChecked()),
      `"Reload log" fetched the tail again: the line appended meanwhile shown (${counted.trim()}), not before`,
      `exec ${ex.status} ${ex.text.slice(0, 120)}; shown before the reload ${early}; message "${counted}"`);

    await page.getByRole("button", { name: "Redeploy" }).click();
    await page.locator("#app-msg", { hasText: /serves|failed/ }).waitFor({ timeout: T });
    const v2 = await rest("GET", `/v1/apps/${a.id}`);
    const vShown = await page.locator("#app-version").textContent();
    check("app_redeploy", v2.json?.version === 2 && vShown === "2" && v2.json?.sandbox_id !== a.sandbox_id,
      `redeployed after the confirmation: version 2, sandbox ${v2.json?.sandbox_id} (was ${a.sandbox_id})`, `page "${await page.locator("#app-msg").textContent()}" version shown ${vShown}; ${v2.status} ${v2.text}`);

    await page.getByRole("button", { name: "Delete" }).click();
    await page.locator("#apps").waitFor({ timeout: T });
    await page.locator(`#apps tr[data-id="${a.id}"]`).waitFor({ state: "detached", timeout: 30000 });
    const gone = await rest("GET", `/v1/apps/${a.id}`);
    if (gone.status === 404) appsMade.delete(a.id);
    check("app_delete", gone.status === 404, `${a.id} deleted after the confirmation, gone from the list (apps steps: ${((Date.now() - t0) / 1000).toFixed(0)} s)`, `GET after delete ${gone.status}`);
  });

  await step("databases", async () => {
    // A real PostgreSQL database (template postgres, built by tests/sdk/serve
    // for this group): listed, backed up and its password reset from its
    // page (the new password shown once, then off the page), deleted.
    const built = process.env.KILN_DASH_POSTGRES ?? "";
    if (!built.startsWith("built")) throw new Error(`no postgres template on the test's kilnd (KILN_DASH_POSTGRES="${built}"): the database views were not tested`);
    const t0 = Date.now();
    const name = `dash-db-${process.pid}`;
    // Made with the page's form: its password shown once, then taken off.
    await page.goto(URL_ + "/dashboard/#/databases");
    await page.locator("#db-name").fill(name);
    await page.getByRole("button", { name: "Create database" }).click();
    await page.locator("#db-msg", { hasText: /created|refused/ }).waitFor({ timeout: T });
    const made_ = await rest("GET", `/v1/databases/${name}`);
    if (made_.status === 200) dbsMade.add(made_.json.id);
    const createdMsg = (await page.locator("#db-msg").textContent()).trim();
    if (made_.status !== 200) throw new Error(`the create form: "${createdMsg}"; GET /v1/databases/${name}: ${made_.status} ${made_.text}`);
    const pw0 = page.locator("#db-new #db-password");
    const d = { ...made_.json, password: (await pw0.textContent()).trim() };
    const cleared = await page.locator("#db-name").inputValue();
    await page.locator("#db-new #db-password-done").click();
    await pw0.waitFor({ state: "detached", timeout: 5000 });
    check("db_create_form", createdMsg === `created ${name} (${d.id})` && /^[a-z0-9]{24}$/.test(d.password) && cleared === "" &&
      !(await page.content()).includes(d.password),
      `the form made ${name} (${d.id}): "${createdMsg}", its password shown once (24 characters), off the page after Done`,
      `message "${createdMsg}", password ${d.password.length} chars, name field "${cleared}"`);
    const row = page.locator(`#databases tr[data-id="${d.id}"]`);
    await row.waitFor({ timeout: 30000 });
    const text = (await row.textContent()).replace(/\s+/g, " ");
    await shot("databases");
    check("databases_list", text.includes(name) && text.includes(`${d.host}:5432`) && text.includes("postgres") && text.includes(d.status),
      `${name} (${d.id}) listed: "${text}"`, `row "${text}", database ${made_.text}`);

    await row.getByRole("link", { name }).click();
    await page.locator("#db-facts").waitFor({ timeout: 30000 });
    const urlShown = await page.locator("#db-url").textContent();
    await page.getByRole("button", { name: "Back up now" }).click();
    await page.locator("#dbv-msg", { hasText: /made|failed/ }).waitFor({ timeout: T });
    const bk = await rest("GET", `/v1/databases/${d.id}/backups`);
    for (const b of bk.json?.backups ?? []) snapsMade.add(b.id);
    const bid = bk.json?.backups?.[0]?.id;
    const bshown = bid ? await page.locator(`#backups tr[data-id="${bid}"]`).count() : 0;
    check("db_backup", bk.json?.backups?.length === 1 && bshown === 1 && !urlShown.includes(d.password),
      `"Back up now" made ${bid}, listed on the page; the URL shown has no password`, `backups ${bk.text}, shown ${bshown}, url "${urlShown}"`);

    await page.getByRole("button", { name: "Reset password" }).click();
    const pw = page.locator("#db-password");
    await pw.waitFor({ timeout: T });
    const shownPw = (await pw.textContent()).trim();
    await shot("database-password");
    await page.locator("#db-password-done").click();
    await pw.waitFor({ state: "detached", timeout: 5000 });
    // Where the password is still (none: ""). The reset's answer has it
    // in its url too, which the page must not draw.
    const left = await page.evaluate((p) => [
      document.documentElement.outerHTML.includes(p) && "the DOM",
      [...document.querySelectorAll("input")].some((i) => i.value.includes(p)) && "a field",
      (JSON.stringify(localStorage) + JSON.stringify(sessionStorage)).includes(p) && "storage",
      location.href.includes(p) && "the URL"].filter(Boolean).join(", "), shownPw);
    check("db_reset_password_once", /^\S{24}$/.test(shownPw) && shownPw !== d.password && !left,
      "reset from the page: a new 24-character password shown once, gone from the page (DOM, fields, storage, URL) after Done",
      `shown ${shownPw.length} chars, same as the old ${shownPw === d.password}, still in: ${left || "nothing"}`);

    await page.getByRole("button", { name: "Delete" }).click();
    await page.locator("#databases").waitFor({ timeout: T });
    await page.locator(`#databases tr[data-id="${d.id}"]`).waitFor({ state: "detached", timeout: 30000 });
    const gone = await rest("GET", `/v1/databases/${d.id}`);
    if (gone.status === 404) dbsMade.delete(d.id);
    check("db_delete", gone.status === 404, `${d.id} deleted after the confirmation, gone from the list (database steps: ${((Date.now() - t0) / 1000).toFixed(0)} s)`, `GET after delete ${gone.status}`);
  });
}

await step("usage_page", async () => {
  await page.goto(URL_ + "/dashboard/#/usage");
  await page.locator("#usage dt", { hasText: "CPU time" }).waitFor({ timeout: 15000 });
  await page.locator("#limits dt", { hasText: "Plan" }).waitFor({ timeout: 15000 });
  const limits = await rest("GET", "/v1/limits");
  const shown = await page.locator("#limits dd").first().textContent();
  await shot("usage");
  check("usage_page", limits.status === 200 && shown === limits.json?.plan,
    `the usage figures of GET /v1/usage, and the plan of GET /v1/limits (${shown})`,
    `the page shows plan "${shown}", GET /v1/limits says ${limits.status} ${limits.text}`);
});

await step("phone_dark", async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(URL_ + "/dashboard/#/sandboxes");
  await page.locator("#sandboxes").waitFor({ timeout: 15000 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  await shot("phone");
  await page.getByRole("button", { name: "Switch between light and dark" }).click();
  const theme = await page.evaluate(() => [document.documentElement.dataset.theme, getComputedStyle(document.body).backgroundColor]);
  await shot("phone-dark");
  await page.setViewportSize({ width: 1280, height: 860 });
  await shot("sandboxes-dark");
  await page.getByRole("button", { name: "Switch between light and dark" }).click();
  check("phone_dark", overflow <= 0 && theme[0] === "dark" && theme[1] === "rgb(15, 17, 21)", "no sideways scroll at 390 px; the dark theme switches on",
    `overflow ${overflow}px, theme ${theme}`);
  // Keyboard: every control has a name, and Tab reaches the nav.
  const unlabelled = await page.evaluate(() => [...document.querySelectorAll("input, select, textarea, button")].filter((e) => {
    const id = e.id && document.querySelector(`label[for="${e.id}"]`);
    return !id && !e.getAttribute("aria-label") && !(e.textContent || "").trim();
  }).map((e) => e.outerHTML.slice(0, 80)));
  check("labelled_controls", unlabelled.length === 0, "every input, select and button has a label or a name", unlabelled.join(" "));
});

await step("revoke_signs_out", async () => {
  await page.goto(URL_ + "/dashboard/#/keys");
  await page.getByLabel("Name of a new key").fill("browser-test");
  await page.getByRole("button", { name: "Create key" }).click();
  const out = page.locator("#new-key-value");
  await out.waitFor({ timeout: 15000 });
  const newKey = (await out.textContent()).trim();
  await shot("keys-created");
  const listed = await rest("GET", "/v1/keys");
  const row = listed.json.keys.find((k) => newKey.startsWith(k.prefix));
  if (row) keysMade.add(row.id);
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByLabel("Workspace API key").waitFor({ timeout: 15000 });
  const afterOut = (await page.content()).includes(newKey);	// the key left the page with the sign-out
  await signIn(newKey);
  await page.locator("#sandboxes").waitFor({ timeout: 15000 });
  await page.goto(URL_ + "/dashboard/#/keys");
  await page.getByRole("button", { name: `Revoke key ${row.prefix}` }).click();
  const msg = page.locator("#signin-msg");
  await msg.filter({ hasText: "revoked" }).waitFor({ timeout: 15000 });
  await shot("signed-out-revoked");
  const text = await msg.textContent();
  const again = await rest("GET", "/v1/keys");
  const st = again.json.keys.find((k) => k.id === row.id);
  check("revoke_signs_out", st?.revoked === true && /revoked/.test(text) && !afterOut,
    `signed in with a key made on the keys page, revoked it there, and was signed out: "${text}"`, `${JSON.stringify(st)} ${text}`);
});

check("no_console_errors", consoleErrors.filter((e) => !/401|403|Failed to load resource/.test(e)).length === 0,
  "the page logged no script errors", consoleErrors.join(" | "));

// ---- cleanup ---------------------------------------------------------------------------------
await browser.close();
for (const id of appsMade) await rest("DELETE", `/v1/apps/${id}`);
for (const id of dbsMade) await rest("DELETE", `/v1/databases/${id}`);
for (const id of made) await rest("DELETE", `/v1/sandboxes/${id}`);
for (const id of keysMade) await rest("DELETE", `/v1/keys/${id}`);
for (const id of snapsMade) await rest("DELETE", `/v1/snapshots/${id}`);
for (const id of volsMade) await rest("DELETE", `/v1/volumes/${id}`);
if (S) await fetch(URL_ + "/v1/session", { method: "DELETE", headers: { Cookie: S.cookie, "X-CSRF-Token": S.json.csrf_token } });
process.exit(failed ? 1 : 0);
