// The kiln dashboard (docs/dashboard.md): a single page, routed by the URL
// hash, drawing the workspace's state from the public REST API and keeping
// the sandbox list live from GET /v1/events.
import "./style.css";
import { api, ApiError, setCsrf, whenSignedOut, type Sandbox, type FileEntry, type Template, type Volume } from "./api";
import { h, clear, fmtBytes, fmtShape, fmtTime, notice, keepFocus, badge, actionButton } from "./dom";
import { openTerminal, type TermHandle } from "./terminal";
import { lineChart } from "./chart";
import { appsView, appView, type View } from "./apps";
import { databasesView, databaseView } from "./databases";

const app = document.getElementById("app")!;
const sandboxes = new Map<string, Sandbox>();
let events: EventSource | null = null;
let liveState = "connecting";
let workspace = "";
let teardown: (() => void) | null = null;	// the current view's terminal etc.
let signinMessage = "";
// Live usage per sandbox, from `event: usage`: CPU seconds and memory at each sample.
const samples = new Map<string, { t: number; cpu: number; mem: number }[]>();
const MAX_SAMPLES = 120;

// ---- theme -----------------------------------------------------------------------------------

function applyTheme(t: string): void {
  document.documentElement.dataset.theme = t;
}
const savedTheme = localStorage.getItem("kiln-theme");
applyTheme(savedTheme ?? (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light"));

// ---- session ---------------------------------------------------------------------------------

whenSignedOut((why) => {
  signedOut(why);
});

function signedOut(why: string): void {
  setCsrf(null);
  events?.close();
  events = null;
  sandboxes.clear();
  workspace = "";
  signinMessage = why;
  route();
}

async function boot(): Promise<void> {
  try {
    const s = await api("GET", "/v1/session");
    if (s.csrf_token) {
      setCsrf(s.csrf_token);
      workspace = s.workspace_id;
      startEvents();
    }
  } catch {
    /* not signed in */
  }
  route();
}

function signinView(): HTMLElement {
  const input = h("input", { id: "apikey", type: "password", name: "apikey", autocomplete: "off", spellcheck: "false", required: true, placeholder: "kiln_…", "aria-describedby": "signin-help" });
  const msg = h("p", { id: "signin-msg", "aria-live": "assertive" });
  if (signinMessage) notice(msg, signinMessage, "error");
  const btn = h("button", { type: "submit" }, "Sign in");
  const form = h("form", { class: "card signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title" }, "Sign in to kiln"),
    h("label", { for: "apikey" }, "Workspace API key"),
    input,
    h("p", { id: "signin-help", class: "help" }, "The key is exchanged for a session cookie and is not kept by the browser."),
    btn, msg);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const key = input.value.trim();
    input.value = "";
    btn.disabled = true;
    try {
      const s = await api("POST", "/v1/session", { api_key: key });
      setCsrf(s.csrf_token);
      workspace = s.workspace_id;
      signinMessage = "";
      startEvents();
      if (!location.hash || location.hash === "#/") location.hash = "#/sandboxes";
      else route();
    } catch (e) {
      notice(msg, `Sign-in refused: ${(e as Error).message}`, "error");
      btn.disabled = false;
      input.focus();
    }
  });
  queueMicrotask(() => input.focus());
  return h("main", { class: "center" }, form);
}

async function signOut(): Promise<void> {
  try {
    await api("DELETE", "/v1/session");
  } catch {
    /* gone already */
  }
  signedOut("");
  location.hash = "#/";
}

// ---- live list -------------------------------------------------------------------------------

async function loadSandboxes(): Promise<void> {
  const r = await api<{ sandboxes: Sandbox[] }>("GET", "/v1/sandboxes");
  sandboxes.clear();
  for (const s of r.sandboxes) sandboxes.set(s.id, s);
  redraw();
}

function startEvents(): void {
  events?.close();
  events = new EventSource("/v1/events");
  let opened = false;
  events.onopen = () => {
    liveState = "live";
    // The first time, the list as it is; after a reconnect the browser
    // sends Last-Event-ID and kilnd replays what was missed, or sends
    // "resync" (handled below) when it cannot.
    if (!opened) loadSandboxes().catch(() => {});
    opened = true;
  };
  events.onerror = () => {
    liveState = "reconnecting";
    updateLive();
    // A signed-out session shows as an error too: ask once.
    api("GET", "/v1/session").catch(() => {});
  };
  events.addEventListener("sandbox", async (ev) => {
    const { id, state } = JSON.parse((ev as MessageEvent).data);
    if (state === "deleted") {
      sandboxes.delete(id);
    } else {
      const prev = sandboxes.get(id);
      if (prev) sandboxes.set(id, { ...prev, status: state });
      else sandboxes.set(id, { id, status: state, template: "", vcpus: 0, memory_mib: 0, created_at: "", ttl_seconds: 0 });
      redraw();
      try {
        sandboxes.set(id, await api<Sandbox>("GET", `/v1/sandboxes/${id}`));
      } catch (e) {
        if ((e as ApiError).status === 404) sandboxes.delete(id);
      }
    }
    redraw();
  });
  events.addEventListener("resync", () => loadSandboxes().catch(() => {}));
  events.addEventListener("usage", (ev) => {
    const { id, cpu_seconds, memory_bytes } = JSON.parse((ev as MessageEvent).data);
    const list = samples.get(id) ?? [];
    list.push({ t: Date.now() / 1000, cpu: cpu_seconds, mem: memory_bytes });
    if (list.length > MAX_SAMPLES) list.shift();
    samples.set(id, list);
    const s = sandboxes.get(id);
    if (s) s.usage = { ...(s.usage ?? { memory_mib_seconds: 0, running_seconds: 0 }), cpu_seconds, memory_bytes } as Sandbox["usage"];
    redraw();
  });
}

let redrawHook: (() => void) | null = null;
function redraw(): void {
  updateLive();
  keepFocus(() => redrawHook?.());
}
function updateLive(): void {
  const el = document.getElementById("live");
  if (el) {
    el.textContent = liveState === "live" ? "● live" : `○ ${liveState}`;
    el.className = `live ${liveState}`;
  }
}

// ---- layout ----------------------------------------------------------------------------------

function shell(title: string, body: HTMLElement): HTMLElement {
  const here = location.hash.split("/")[1] || "sandboxes";
  const link = (to: string, label: string) => h("a", { href: `#/${to}`, "aria-current": here === to ? "page" : undefined }, label);
  const themeBtn = h("button", { type: "button", class: "ghost", "aria-label": "Switch between light and dark", "aria-pressed": String(document.documentElement.dataset.theme === "dark") },
    document.documentElement.dataset.theme === "dark" ? "☀ Light" : "☾ Dark");
  themeBtn.addEventListener("click", () => {
    const t = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
    applyTheme(t);
    localStorage.setItem("kiln-theme", t);
    route();
  });
  const out = h("button", { type: "button", class: "ghost", id: "signout" }, "Sign out");
  out.addEventListener("click", signOut);
  return h("div", { class: "page" },
    h("a", { href: "#main", class: "skip" }, "Skip to content"),
    h("header", { class: "top" },
      h("span", { class: "brand" }, "kiln"),
      h("nav", { "aria-label": "Sections" }, link("sandboxes", "Sandboxes"), link("templates", "Templates"), link("volumes", "Volumes"), link("apps", "Apps"), link("databases", "Databases"), link("keys", "API keys"), link("usage", "Usage")),
      h("span", { class: "spacer" }),
      h("span", { id: "live", class: "live", role: "status" }),
      h("span", { class: "ws", title: "workspace" }, workspace),
      themeBtn, out),
    h("main", { id: "main", tabindex: "-1" }, h("h1", {}, title), body));
}

function route(): void {
  teardown?.();
  teardown = null;
  redrawHook = null;
  if (!workspace) {
    clear(app, signinView());
    return;
  }
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  let view: HTMLElement;
  if (parts[0] === "keys") view = shell("API keys", keysView());
  else if (parts[0] === "usage") view = shell("Usage", usageView());
  else if (parts[0] === "templates") view = shell("Templates and snapshots", templatesView());
  else if (parts[0] === "volumes") view = shell("Volumes", volumesView());
  else if (parts[0] === "apps" || parts[0] === "databases") {
    // Views of their own module: what they hold open (a log's stream, a
    // timer, a password on the page) ends with them.
    const id = parts[1] ? decodeURIComponent(parts[1]) : "";
    const apps = parts[0] === "apps";
    const body: View = apps ? (id ? appView(id) : appsView()) : id ? databaseView(id) : databasesView();
    teardown = body.close ?? null;
    view = shell(id ? `${apps ? "App" : "Database"} ${id}` : apps ? "Apps" : "Databases", body);
  }
  else if (parts[0] === "sandboxes" && parts[1]) view = shell(`Sandbox ${parts[1]}`, sandboxView(decodeURIComponent(parts[1])));
  else view = shell("Sandboxes", listView());
  clear(app, view);
  updateLive();
}
window.addEventListener("hashchange", route);

// ---- sandboxes -------------------------------------------------------------------------------

function parseEnv(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const l = line.trim();
    if (!l || l.startsWith("#")) continue;
    const eq = l.indexOf("=");
    if (eq <= 0) throw new Error(`env line "${l}" is not NAME=VALUE`);
    env[l.slice(0, eq)] = l.slice(eq + 1);
  }
  return env;
}

// The create form. POST /v1/sandboxes takes a disk size (disk_mib: at
// least the template's, at most the plan's); vCPUs and memory are the
// template's (set when it is built), so the form shows them beside the
// template it names. A refusal is shown in kilnd's words and the form
// keeps everything typed, to be corrected and sent again.
function createForm(): HTMLElement {
  const tpl = h("select", { id: "c-template", name: "template" });
  const shape = h("p", { id: "c-shape", class: "help" });
  const templates = new Map<string, Template>();
  const disk = h("input", { id: "c-disk", type: "number", inputmode: "numeric", placeholder: "the template's", "aria-describedby": "c-shape" });
  const showShape = () => {
    const t = templates.get(tpl.value);
    shape.textContent = t ? `${tpl.value}: ${fmtShape(t.vcpus, t.memory_mib, t.disk_mib)}` : "";
    disk.placeholder = t?.disk_mib ? `${t.disk_mib} (the template's)` : "the template's";
  };
  tpl.addEventListener("change", showShape);
  api<{ templates: Template[] }>("GET", "/v1/templates").then((r) => {
    for (const t of r.templates) {
      templates.set(t.name, t);
      tpl.append(h("option", { value: t.name }, t.status === "not_built" ? `${t.name} (not built)` : t.name));
    }
    const base = r.templates.find((t) => t.name === "base");
    if (base) tpl.value = "base";
    showShape();
  }).catch(() => {});
  const ttl = h("input", { id: "c-ttl", type: "number", min: "0", max: "604800", value: "600", inputmode: "numeric" });
  const env = h("textarea", { id: "c-env", rows: "2", placeholder: "NAME=value, one a line", spellcheck: "false" });
  const noNet = h("input", { id: "c-nonet", type: "checkbox" });
  const msg = h("p", { id: "create-msg", "aria-live": "polite" });
  const btn = h("button", { type: "submit" }, "Create sandbox");
  const form = h("form", { class: "card create", "aria-label": "Create a sandbox" },
    h("h2", {}, "New sandbox"),
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "c-template" }, "Template"), tpl),
      h("div", {}, h("label", { for: "c-disk" }, "Disk MiB (empty: default)"), disk),
      h("div", {}, h("label", { for: "c-ttl" }, "Idle timeout (s, 0: none)"), ttl),
      h("div", { class: "check" }, noNet, h("label", { for: "c-nonet" }, "No internet"))),
    shape,
    h("label", { for: "c-env" }, "Environment"), env,
    btn, msg);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    btn.disabled = true;
    notice(msg, "creating…");
    try {
      const body: any = { template: tpl.value, ttl_seconds: Number(ttl.value || 0) };
      // As typed: kilnd checks it (a number, its bounds) and says what is wrong.
      if (disk.value.trim()) body.disk_mib = Number(disk.value);
      const e = parseEnv(env.value);
      if (Object.keys(e).length) body.env = e;
      if (noNet.checked) body.allow_internet = false;
      const s = await api<Sandbox>("POST", "/v1/sandboxes", body);
      sandboxes.set(s.id, s);
      notice(msg, `created ${s.id} in ${s.ready_ms ?? "?"} ms`);
      redraw();
    } catch (e) {
      notice(msg, `Create failed: ${(e as Error).message}`, "error");
    }
    btn.disabled = false;
  });
  return form;
}

function listView(): HTMLElement {
  const status = h("select", { id: "f-status" }, ...["all", "creating", "running", "paused", "hibernated", "failed", "deleting"].map((s) => h("option", { value: s }, s)));
  const search = h("input", { id: "f-search", type: "search", placeholder: "id, template or parent" });
  const tbody = h("tbody");
  const count = h("p", { class: "help", "aria-live": "polite" });
  const draw = () => {
    const want = status.value, q = search.value.trim().toLowerCase();
    const rows = [...sandboxes.values()].filter((s) =>
      (want === "all" || s.status === want) &&
      (!q || s.id.includes(q) || s.template.includes(q) || (s.parent_id ?? "").includes(q)));
    clear(tbody, ...rows.map((s) => h("tr", { "data-id": s.id },
      h("td", {}, h("a", { href: `#/sandboxes/${s.id}` }, s.id)),
      h("td", {}, badge(s.status)),
      h("td", {}, s.template),
      h("td", { class: "shape" }, fmtShape(s.vcpus, s.memory_mib, s.disk_mib)),
      h("td", {}, s.parent_id ? h("a", { href: `#/sandboxes/${s.parent_id}` }, s.parent_id) : "—"),
      h("td", {}, fmtTime(s.created_at)),
      h("td", { class: "num" }, s.usage ? s.usage.cpu_seconds.toFixed(1) : "—"),
      h("td", { class: "num" }, s.usage ? fmtBytes(s.usage.memory_bytes) : "—"))));
    count.textContent = `${rows.length} of ${sandboxes.size} sandboxes`;
  };
  status.addEventListener("change", draw);
  search.addEventListener("input", draw);
  redrawHook = draw;
  draw();
  return h("div", {},
    createForm(),
    h("section", { class: "card", "aria-labelledby": "list-title" },
      h("h2", { id: "list-title" }, "Sandboxes"),
      h("div", { class: "row filters", role: "search" },
        h("div", {}, h("label", { for: "f-status" }, "Status"), status),
        h("div", { class: "grow" }, h("label", { for: "f-search" }, "Filter"), search)),
      h("div", { class: "scroll" },
        h("table", { id: "sandboxes" },
          h("thead", {}, h("tr", {}, ...["Id", "Status", "Template", "Shape", "Parent", "Created", "CPU s", "Memory"].map((t) => h("th", { scope: "col" }, t)))),
          tbody)),
      count));
}

// ---- one sandbox -----------------------------------------------------------------------------

function sandboxView(id: string): HTMLElement {
  const msg = h("p", { id: "action-msg", "aria-live": "polite" });
  const detail = h("div");
  const actions = h("div", { class: "actions", role: "group", "aria-label": "Actions" });
  const act = (label: string, fn: () => Promise<string>, confirmText?: string) => actionButton(actions, msg, label, fn, confirmText);
  actions.append(
    act("Snapshot", async () => `snapshot ${(await api("POST", `/v1/sandboxes/${id}/snapshot`, {})).id} taken`),
    act("Hibernate", async () => (await api("POST", `/v1/sandboxes/${id}/hibernate`, {}), "hibernated"), `Hibernate ${id}? Its memory is saved to disk and its processes pause until it wakes.`),
    act("Wake", async () => (await api("POST", `/v1/sandboxes/${id}/wake`, {}), "awake")),
    act("Fork", async () => `forked: ${(await api("POST", `/v1/sandboxes/${id}/fork`, { count: 1 })).sandboxes.map((s: Sandbox) => s.id).join(", ")}`),
    act("Delete", async () => {
      await api("DELETE", `/v1/sandboxes/${id}`);
      location.hash = "#/sandboxes";
      return "deleted";
    }, `Delete ${id}? Its disk and memory are gone for good.`));

  const drawDetail = () => {
    const s = sandboxes.get(id);
    if (!s) {
      clear(detail, h("p", {}, "Not in this workspace's live sandboxes (deleted, or not yet listed)."));
      return;
    }
    const net = s.network;
    clear(detail, h("dl", { class: "facts" },
      h("dt", {}, "Status"), h("dd", { id: "d-status" }, badge(s.status)),
      h("dt", {}, "Template"), h("dd", {}, s.template || "—"),
      h("dt", {}, "Size"), h("dd", { id: "d-size" }, `${s.vcpus} vCPU, ${s.memory_mib} MiB memory`),
      h("dt", {}, "Disk"), h("dd", { id: "d-disk" }, s.disk_mib != null ? `${s.disk_mib} MiB` : "—"),
      h("dt", {}, "Created"), h("dd", {}, fmtTime(s.created_at)),
      h("dt", {}, "Ready in"), h("dd", {}, s.ready_ms != null ? `${s.ready_ms.toFixed(1)} ms` : "—"),
      h("dt", {}, "Idle timeout"), h("dd", {}, s.ttl_seconds ? `${s.ttl_seconds} s (expires ${fmtTime(s.expires_at)})` : "none"),
      h("dt", {}, "Parent"), h("dd", {}, s.parent_id ? h("a", { href: `#/sandboxes/${s.parent_id}` }, s.parent_id) : "—"),
      h("dt", {}, "CPU time"), h("dd", {}, s.usage ? `${s.usage.cpu_seconds.toFixed(2)} s` : "—"),
      h("dt", {}, "Memory"), h("dd", {}, s.usage ? fmtBytes(s.usage.memory_bytes) : "—"),
      h("dt", {}, "Network"), h("dd", {}, !net ? "—" : net.allow_internet ? `internet allowed${net.deny_out?.length ? `, denied ${net.deny_out.join(" ")}` : ""}` : `no internet${net.allow_out?.length ? `, allowed ${net.allow_out.join(" ")}` : ""}`),
      s.error ? h("dt", {}, "Error") : null, s.error ? h("dd", {}, s.error) : null));
  };
  const tree = h("div", { id: "tree" });
  const drawTree = () => clear(tree, forkTree(id));
  const charts = h("div", { class: "charts" });
  const drawCharts = () => {
    const list = samples.get(id) ?? [];
    // CPU: the share of one vCPU used between samples.
    const cpu = list.slice(1).map((p, i) => Math.max(0, ((p.cpu - list[i].cpu) / Math.max(0.001, p.t - list[i].t)) * 100));
    clear(charts,
      lineChart("chart-cpu", "CPU (% of one vCPU)", cpu, (v) => `${v.toFixed(1)} %`, 5),
      lineChart("chart-mem", "Memory", list.map((p) => p.mem / 1048576), (v) => `${v.toFixed(1)} MiB`, 16));
  };
  redrawHook = () => {
    drawDetail();
    drawTree();
    drawCharts();
  };
  drawCharts();
  api<Sandbox>("GET", `/v1/sandboxes/${id}`).then((s) => {
    sandboxes.set(id, s);
    redraw();
  }).catch((e) => notice(msg, (e as Error).message, "error"));
  if (sandboxes.size === 0) loadSandboxes().catch(() => {});
  drawDetail();
  drawTree();

  // Tabs: only the open one does any work (the terminal connects when shown).
  const panels: [string, () => HTMLElement][] = [
    ["Terminal", () => terminalPanel(id)],
    ["Files", () => filesPanel(id)],
    ["Fork tree", () => h("div", {}, tree)],
    ["Processes", () => processesPanel(id)],
    ["Ports", () => portsPanel(id)],
    ["Network", () => networkPanel(id)],
  ];
  const tablist = h("div", { role: "tablist", "aria-label": "Sandbox views" });
  const panel = h("div", { role: "tabpanel", id: "panel", tabindex: "0" });
  let closePanel: (() => void) | null = null;
  const show = (i: number) => {
    closePanel?.();
    closePanel = null;
    tablist.querySelectorAll("button").forEach((b, j) => {
      b.setAttribute("aria-selected", String(i === j));
      b.tabIndex = i === j ? 0 : -1;
    });
    panel.setAttribute("aria-label", panels[i][0]);
    const el = panels[i][1]();
    closePanel = (el as any).close ?? null;
    clear(panel, el);
    if (panels[i][0] === "Fork tree") drawTree();
  };
  panels.forEach(([name], i) => {
    const b = h("button", { type: "button", role: "tab", id: `tab-${name.replace(/ /g, "-").toLowerCase()}` }, name);
    b.addEventListener("click", () => show(i));
    b.addEventListener("keydown", (ev) => {
      const k = (ev as KeyboardEvent).key;
      if (k !== "ArrowRight" && k !== "ArrowLeft") return;
      const n = (i + (k === "ArrowRight" ? 1 : panels.length - 1)) % panels.length;
      show(n);
      (tablist.children[n] as HTMLElement).focus();
    });
    tablist.append(b);
  });
  teardown = () => closePanel?.();
  setTimeout(() => show(0));
  return h("div", {},
    h("p", {}, h("a", { href: "#/sandboxes" }, "← All sandboxes")),
    h("section", { class: "card" }, actions, msg, detail, charts),
    h("section", { class: "card" }, tablist, panel));
}

function forkTree(id: string): HTMLElement {
  const all = [...sandboxes.values()];
  let root = sandboxes.get(id);
  if (!root) return h("p", {}, "—");
  const seen = new Set<string>();
  while (root.parent_id && sandboxes.has(root.parent_id) && !seen.has(root.id)) {
    seen.add(root.id);
    root = sandboxes.get(root.parent_id)!;
  }
  const node = (s: Sandbox, depth: number): HTMLElement => {
    const kids = all.filter((k) => k.parent_id === s.id);
    return h("li", { "data-id": s.id },
      h("span", { class: s.id === id ? "node here" : "node" },
        h("a", { href: `#/sandboxes/${s.id}`, "aria-current": s.id === id ? "true" : undefined }, s.id), " ", badge(s.status)),
      kids.length && depth < 32 ? h("ul", {}, ...kids.map((k) => node(k, depth + 1))) : null);
  };
  return h("ul", { class: "tree", "aria-label": "Fork tree, parent to children" }, node(root, 0));
}

function terminalPanel(id: string): HTMLElement {
  const st = h("p", { class: "help", id: "term-status", role: "status" });
  const box = h("div", { class: "term", id: "terminal" });
  const wrap = h("div", {}, st, box);
  let t: TermHandle | null = null;
  setTimeout(() => {
    t = openTerminal(box, id, (s) => (st.textContent = `Terminal: ${s}`));
  });
  (wrap as any).close = () => t?.close();
  return wrap;
}

const EDIT_MAX = 64 * 1024;

function filesPanel(id: string): HTMLElement {
  const path = h("input", { id: "fp-path", type: "text", value: "/tmp", spellcheck: "false" });
  const msg = h("p", { "aria-live": "polite" });
  const tbody = h("tbody");
  const file = h("input", { id: "fp-upload", type: "file" });
  const join = (dir: string, name: string) => (dir.endsWith("/") ? dir : dir + "/") + name;
  const list = async () => {
    try {
      const r = await api<{ path: string; entries: FileEntry[]; truncated: boolean }>("GET", `/v1/sandboxes/${id}/files/list?path=${encodeURIComponent(path.value)}`);
      const up = path.value.replace(/\/[^/]+\/?$/, "") || "/";
      const rows = r.entries.sort((a, b) => (a.type === "dir" ? 0 : 1) - (b.type === "dir" ? 0 : 1) || a.name.localeCompare(b.name)).map((e) => {
        const full = join(path.value, e.name);
        const name = e.type === "dir"
          ? h("button", { type: "button", class: "link", onclick: (() => { path.value = full; list(); }) as EventListener }, e.name + "/")
          : h("a", { href: `/v1/sandboxes/${id}/files?path=${encodeURIComponent(full)}`, download: e.name }, e.name);
        const edit = e.type === "file" && e.size <= EDIT_MAX
          ? h("button", { type: "button", class: "ghost", "aria-label": `Edit ${e.name}`, onclick: (() => editFile(full)) as EventListener }, "Edit") : null;
        return h("tr", { "data-name": e.name }, h("td", {}, name, " ", edit), h("td", {}, e.type), h("td", { class: "num" }, e.type === "file" ? fmtBytes(e.size) : ""), h("td", {}, e.mode), h("td", {}, fmtTime(e.modified_at)));
      });
      const upBtn = path.value !== "/" ? h("tr", {}, h("td", {}, h("button", { type: "button", class: "link", onclick: (() => { path.value = up; list(); }) as EventListener }, "../")), h("td", {}, "dir"), h("td"), h("td"), h("td")) : null;
      clear(tbody, upBtn, ...rows);
      notice(msg, `${r.entries.length} entries${r.truncated ? " (truncated)" : ""}`);
    } catch (e) {
      notice(msg, (e as Error).message, "error");
    }
  };
  const form = h("form", { class: "row", "aria-label": "Browse a directory" },
    h("div", { class: "grow" }, h("label", { for: "fp-path" }, "Directory"), path),
    h("button", { type: "submit" }, "List"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    list();
  });
  const upForm = h("form", { class: "row", "aria-label": "Upload a file" },
    h("div", { class: "grow" }, h("label", { for: "fp-upload" }, "Upload a file to this directory"), file),
    h("button", { type: "submit", id: "fp-upload-btn" }, "Upload"));
  upForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = file.files?.[0];
    if (!f) return notice(msg, "choose a file first", "error");
    try {
      await api("PUT", `/v1/sandboxes/${id}/files?path=${encodeURIComponent(join(path.value, f.name))}`, undefined, f);
      notice(msg, `uploaded ${f.name} (${fmtBytes(f.size)})`);
      file.value = "";
      await list();
    } catch (e) {
      notice(msg, `Upload failed: ${(e as Error).message}`, "error");
    }
  });
  // Small text files open in a text area; Save writes them back (PUT).
  const editor = h("div", { id: "editor" });
  const editFile = async (full: string) => {
    try {
      const r = await fetch(`/v1/sandboxes/${id}/files?path=${encodeURIComponent(full)}`, { credentials: "same-origin" });
      if (!r.ok) throw new Error(`${r.status}: ${(await r.json().catch(() => null))?.error?.message ?? r.statusText}`);
      const bytes = new Uint8Array(await r.arrayBuffer());
      let text: string;
      try {
        text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
      } catch {
        return notice(msg, `${full} is not UTF-8 text: download it instead`, "error");
      }
      const area = h("textarea", { id: "ed-text", rows: "14", spellcheck: "false" });
      area.value = text;
      const save = h("button", { type: "submit" }, "Save");
      const cancel = h("button", { type: "button", class: "ghost", onclick: (() => clear(editor)) as EventListener }, "Cancel");
      const f = h("form", { class: "card", "aria-label": `Edit ${full}` }, h("label", { for: "ed-text" }, `Contents of ${full}`), area, h("div", { class: "actions" }, save, cancel));
      f.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        try {
          await api("PUT", `/v1/sandboxes/${id}/files?path=${encodeURIComponent(full)}`, undefined, new Blob([area.value]));
          notice(msg, `saved ${full}`);
          clear(editor);
          list();
        } catch (e) {
          notice(msg, `Save failed: ${(e as Error).message}`, "error");
        }
      });
      clear(editor, f);
      area.focus();
    } catch (e) {
      notice(msg, (e as Error).message, "error");
    }
  };
  setTimeout(list);
  return h("div", {}, form, upForm, msg, editor,
    h("div", { class: "scroll" }, h("table", { id: "files" },
      h("thead", {}, h("tr", {}, ...["Name", "Type", "Size", "Mode", "Modified"].map((t) => h("th", { scope: "col" }, t)))), tbody)));
}

function processesPanel(id: string): HTMLElement {
  const pre = h("pre", { class: "out", id: "ps", tabindex: "0", "aria-label": "Processes" });
  const btn = h("button", { type: "button" }, "Refresh");
  const load = async () => {
    try {
      const r = await api("POST", `/v1/sandboxes/${id}/exec`, { cmd: "ps -eo pid,user,etime,rss,args 2>/dev/null || ps", timeout_seconds: 10 });
      pre.textContent = r.stdout || r.stderr;
    } catch (e) {
      pre.textContent = (e as Error).message;
    }
  };
  btn.addEventListener("click", load);
  setTimeout(load);
  return h("div", {}, btn, pre);
}

function networkPanel(id: string): HTMLElement {
  const net = sandboxes.get(id)?.network;
  const allow = h("input", { id: "nw-internet", type: "checkbox" });
  allow.checked = net?.allow_internet ?? true;
  const allowOut = h("textarea", { id: "nw-allow", rows: "3", spellcheck: "false", placeholder: "10.0.0.0/8" });
  allowOut.value = (net?.allow_out ?? []).join("\n");
  const denyOut = h("textarea", { id: "nw-deny", rows: "3", spellcheck: "false", placeholder: "169.254.0.0/16" });
  denyOut.value = (net?.deny_out ?? []).join("\n");
  const msg = h("p", { "aria-live": "polite" });
  const lines = (t: string) => t.split(/[\s,]+/).filter(Boolean);
  const form = h("form", { "aria-label": "Egress policy" },
    h("div", { class: "check" }, allow, h("label", { for: "nw-internet" }, "Allow the internet")),
    h("label", { for: "nw-allow" }, "Also allowed (CIDRs, when the internet is not)"), allowOut,
    h("label", { for: "nw-deny" }, "Denied (CIDRs)"), denyOut,
    h("p", { class: "help" }, "Applies to new connections at once; a hibernated sandbox's when it wakes (docs/network.md)."),
    h("button", { type: "submit" }, "Save policy"), msg);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const body: any = { allow_internet: allow.checked };
      if (lines(allowOut.value).length) body.allow_out = lines(allowOut.value);
      if (lines(denyOut.value).length) body.deny_out = lines(denyOut.value);
      const s = await api<Sandbox>("PUT", `/v1/sandboxes/${id}/network`, body);
      sandboxes.set(id, s);
      notice(msg, "policy saved");
      redraw();
    } catch (e) {
      notice(msg, `Saving the policy failed: ${(e as Error).message}`, "error");
    }
  });
  return form;
}

function portsPanel(id: string): HTMLElement {
  const port = h("input", { id: "pt-port", type: "number", min: "1", max: "65535", inputmode: "numeric", required: true });
  const pub = h("input", { id: "pt-public", type: "checkbox" });
  const msg = h("p", { "aria-live": "polite" });
  const ul = h("ul", { class: "plain", id: "ports" });
  const load = async () => {
    try {
      const r = await api("GET", `/v1/sandboxes/${id}/ports`);
      clear(ul, ...(r.ports ?? []).map((p: any) => {
        const rm = h("button", { type: "button", class: "ghost", "aria-label": `Stop exposing port ${p.port}` }, "Remove");
        rm.addEventListener("click", async () => {
          if (!confirm(`Stop exposing port ${p.port}?`)) return;
          await api("DELETE", `/v1/sandboxes/${id}/ports/${p.port}`).catch((e) => notice(msg, e.message, "error"));
          load();
        });
        return h("li", {}, `${p.port}${p.public ? " (public)" : ""} `, h("a", { href: p.url, rel: "noopener noreferrer", target: "_blank" }, p.url), p.host_url ? [" ", h("a", { href: p.host_url, rel: "noopener noreferrer", target: "_blank" }, p.host_url)] as any : null, " ", rm);
      }));
      if (!r.ports?.length) clear(ul, h("li", {}, "No exposed ports."));
    } catch (e) {
      notice(msg, (e as Error).message, "error");
    }
  };
  const form = h("form", { class: "row", "aria-label": "Expose a port" },
    h("div", {}, h("label", { for: "pt-port" }, "Guest port"), port),
    h("div", { class: "check" }, pub, h("label", { for: "pt-public" }, "Public (no key needed)")),
    h("button", { type: "submit" }, "Expose"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await api("POST", `/v1/sandboxes/${id}/ports`, { port: Number(port.value), public: pub.checked });
      notice(msg, `port ${port.value} exposed`);
      load();
    } catch (e) {
      notice(msg, (e as Error).message, "error");
    }
  });
  setTimeout(load);
  return h("div", {}, form, msg, ul);
}

// ---- keys, usage -----------------------------------------------------------------------------

function keysView(): HTMLElement {
  const name = h("input", { id: "k-name", type: "text", maxlength: "63", placeholder: "ci, laptop…" });
  const shown = h("div", { id: "new-key", "aria-live": "polite" });
  const msg = h("p", { "aria-live": "polite" });
  const tbody = h("tbody");
  const load = async () => {
    const r = await api<{ keys: any[] }>("GET", "/v1/keys");
    clear(tbody, ...r.keys.map((k) => {
      const b = h("button", { type: "button", class: "danger", "aria-label": `Revoke key ${k.prefix}` }, "Revoke");
      b.disabled = k.revoked;
      b.addEventListener("click", async () => {
        if (!confirm(`Revoke ${k.prefix}…${k.name ? ` (${k.name})` : ""}? Programs and sessions using it stop working.`)) return;
        try {
          await api("DELETE", `/v1/keys/${k.id}`);
          notice(msg, `revoked ${k.prefix}…`);
          await load();	// signs out if it was this session's key
        } catch (e) {
          if ((e as ApiError).status !== 401) notice(msg, (e as Error).message, "error");
        }
      });
      return h("tr", { "data-prefix": k.prefix }, h("td", {}, h("code", {}, `${k.prefix}…`)), h("td", {}, k.name || "—"), h("td", {}, fmtTime(k.created_at)), h("td", {}, k.revoked ? `revoked ${fmtTime(k.revoked_at)}` : "active"), h("td", {}, b));
    }));
  };
  const form = h("form", { class: "row", "aria-label": "Create a key" },
    h("div", { class: "grow" }, h("label", { for: "k-name" }, "Name of a new key"), name),
    h("button", { type: "submit" }, "Create key"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const k = await api("POST", "/v1/keys", { name: name.value });
      name.value = "";
      const out = h("output", { id: "new-key-value", class: "secret" }, k.key);
      const copy = h("button", { type: "button", class: "ghost" }, "Copy");
      copy.addEventListener("click", () => navigator.clipboard?.writeText(k.key).then(() => (copy.textContent = "Copied")));
      clear(shown, h("div", { class: "card warn" }, h("p", {}, "Your new key. It is shown only now: copy it somewhere safe."), out, " ", copy));
      await load();
    } catch (e) {
      notice(msg, (e as Error).message, "error");
    }
  });
  load().catch((e) => notice(msg, (e as Error).message, "error"));
  teardown = () => clear(shown);	// the key leaves the page with the view
  return h("div", {}, h("section", { class: "card" }, form, shown, msg),
    h("section", { class: "card" }, h("div", { class: "scroll" }, h("table", { id: "keys" },
      h("thead", {}, h("tr", {}, ...["Key", "Name", "Created", "State", ""].map((t) => h("th", { scope: "col" }, t)))), tbody))));
}

function templatesView(): HTMLElement {
  const tb = h("tbody"), sb = h("tbody");
  const msg = h("p", { "aria-live": "polite" });
  api<{ templates: Template[] }>("GET", "/v1/templates").then((r) => clear(tb, ...r.templates.map((t) => h("tr", { "data-name": t.name },
    h("td", {}, t.name), h("td", { class: "wrap" }, t.description), h("td", {}, `${t.vcpus} vCPU, ${t.memory_mib} MiB`),
    h("td", { class: "disk num" }, t.disk_mib ? `${t.disk_mib} MiB` : "—"),
    h("td", {}, t.status === "ready" ? `v${t.version}, ${fmtTime(t.built_at)}${t.snapshot ? " (zygote)" : ""}` : "not built")))))
    .catch((e) => notice(msg, (e as Error).message, "error"));
  const loadSnaps = () => api("GET", "/v1/snapshots").then((r) => clear(sb, ...(r.snapshots.length ? r.snapshots.map((n: any) => {
    const start = h("button", { type: "button", "aria-label": `New sandbox from ${n.id}` }, "New sandbox");
    start.addEventListener("click", async () => {
      try {
        const s = await api<Sandbox>("POST", "/v1/sandboxes", { from_snapshot: n.id });
        location.hash = `#/sandboxes/${s.id}`;
      } catch (e) {
        notice(msg, (e as Error).message, "error");
      }
    });
    const del = h("button", { type: "button", class: "danger", "aria-label": `Delete snapshot ${n.id}` }, "Delete");
    del.addEventListener("click", async () => {
      if (!confirm(`Delete snapshot ${n.id}?`)) return;
      await api("DELETE", `/v1/snapshots/${n.id}`).catch((e) => notice(msg, e.message, "error"));
      loadSnaps();
    });
    return h("tr", { "data-id": n.id }, h("td", {}, h("code", {}, n.id)), h("td", {}, n.sandbox_id ? h("a", { href: `#/sandboxes/${n.sandbox_id}` }, n.sandbox_id) : "—"),
      h("td", {}, n.template), h("td", {}, fmtTime(n.created_at)), h("td", {}, start, " ", del));
  }) : [h("tr", {}, h("td", { colspan: "5" }, "No snapshots: take one from a sandbox's page."))])))
    .catch((e) => notice(msg, (e as Error).message, "error"));
  loadSnaps();
  const head = (...c: string[]) => h("thead", {}, h("tr", {}, ...c.map((t) => h("th", { scope: "col" }, t))));
  return h("div", {}, msg,
    h("section", { class: "card" }, h("h2", {}, "Templates"), h("div", { class: "scroll" }, h("table", { id: "templates" }, head("Name", "Description", "Size", "Disk", "Built"), tb))),
    h("section", { class: "card" }, h("h2", {}, "Snapshots"), h("div", { class: "scroll" }, h("table", { id: "snapshots" }, head("Id", "Of sandbox", "Template", "Taken", ""), sb))));
}

// ---- volumes ---------------------------------------------------------------------------------

// The workspace's named volumes (docs/api.md "Volumes"): list, create,
// delete. What kilnd refuses (a name taken, a plan's limit, a volume still
// attached) is shown in its own words.
function volumesView(): HTMLElement {
  const tbody = h("tbody");
  const msg = h("p", { id: "volume-msg", "aria-live": "polite" });
  const load = async () => {
    const r = await api<{ volumes: Volume[] }>("GET", "/v1/volumes");
    clear(tbody, ...(r.volumes.length ? r.volumes.map((v) => {
      const del = h("button", { type: "button", class: "danger", "aria-label": `Delete volume ${v.name}` }, "Delete");
      del.addEventListener("click", async () => {
        if (!confirm(`Delete volume ${v.name} (${v.id}) and its data?`)) return;
        del.disabled = true;
        try {
          await api("DELETE", `/v1/volumes/${v.id}`);
          notice(msg, `deleted ${v.name}`);
        } catch (e) {
          notice(msg, `Delete refused: ${(e as Error).message}`, "error");
        }
        del.disabled = false;
        await load().catch(() => {});
      });
      const att = v.attached_to.length ? h("ul", { class: "plain" }, ...v.attached_to.map((a) => h("li", {},
        h("a", { href: `#/sandboxes/${a.sandbox_id}` }, a.sandbox_id), ` at ${a.path} (${a.read_only ? "ro" : "rw"})`))) : "—";
      return h("tr", { "data-id": v.id, "data-name": v.name }, h("td", {}, v.name), h("td", {}, h("code", {}, v.id)),
        h("td", {}, `${v.size_mib} MiB`), h("td", {}, att), h("td", {}, fmtTime(v.created_at)), h("td", {}, del));
    }) : [h("tr", {}, h("td", { colspan: "6" }, "No volumes: make one above, then attach it when creating a sandbox (volumes: [{name, path}])."))]));
  };
  const name = h("input", { id: "v-name", type: "text", maxlength: "63", pattern: "[a-z0-9][a-z0-9\\-]*", placeholder: "data", spellcheck: "false", required: true, "aria-describedby": "v-help" });
  const size = h("input", { id: "v-size", type: "number", min: "1", max: "65536", value: "1024", inputmode: "numeric", required: true });
  const btn = h("button", { type: "submit" }, "Create volume");
  const form = h("form", { class: "card create", "aria-label": "Create a volume" },
    h("h2", {}, "New volume"),
    h("div", { class: "row" },
      h("div", { class: "grow" }, h("label", { for: "v-name" }, "Name"), name),
      h("div", {}, h("label", { for: "v-size" }, "Size (MiB)"), size)),
    h("p", { id: "v-help", class: "help" }, "a-z, 0-9 and '-'. A volume outlives its sandboxes; attached read-write it is one sandbox's at a time."),
    btn, msg);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    btn.disabled = true;
    try {
      const v = await api<Volume>("POST", "/v1/volumes", { name: name.value.trim(), size_mib: Number(size.value) });
      notice(msg, `created ${v.name} (${v.id})`);
      name.value = "";
      await load();
    } catch (e) {
      notice(msg, `Create refused: ${(e as Error).message}`, "error");
    }
    btn.disabled = false;
  });
  load().catch((e) => notice(msg, (e as Error).message, "error"));
  // Sandbox events change what a volume is attached to: a redraw reloads
  // the list (one request at a time).
  let loading = false;
  redrawHook = () => {
    if (loading) return;
    loading = true;
    load().catch(() => {}).finally(() => (loading = false));
  };
  return h("div", {}, form,
    h("section", { class: "card" }, h("div", { class: "scroll" }, h("table", { id: "volumes" },
      h("thead", {}, h("tr", {}, ...["Name", "Id", "Size", "Attached to", "Created", ""].map((t) => h("th", { scope: "col" }, t)))), tbody))));
}

function usageView(): HTMLElement {
  const dl = h("dl", { class: "facts", id: "usage" });
  api("GET", "/v1/usage").then((u) => {
    clear(dl,
      h("dt", {}, "Live sandboxes"), h("dd", {}, u.live_sandboxes),
      h("dt", {}, "Sandboxes ever"), h("dd", {}, u.sandboxes),
      h("dt", {}, "CPU time"), h("dd", {}, `${u.cpu_seconds.toFixed(1)} s`),
      h("dt", {}, "Memory"), h("dd", {}, `${u.memory_gib_hours.toFixed(3)} GiB·h`),
      h("dt", {}, "Running time"), h("dd", {}, `${(u.running_seconds / 3600).toFixed(2)} h`));
  }).catch((e) => clear(dl, h("p", { role: "alert" }, (e as Error).message)));
  // The plan's limits beside what is in use of them (GET /v1/limits).
  const plan = h("dl", { class: "facts", id: "limits" });
  api("GET", "/v1/limits").then((l) => {
    const lim = (n: number, unit = "") => (n ? `${n}${unit}` : "no limit");
    clear(plan,
      h("dt", {}, "Plan"), h("dd", {}, l.plan),
      h("dt", {}, "Running sandboxes"), h("dd", {}, `${l.in_use.running} of ${lim(l.limits.running)}`),
      h("dt", {}, "Creates"), h("dd", {}, `${l.in_use.creates_in_window} in the last ${l.window_seconds} s, of ${lim(l.limits.creates_per_hour)}`),
      h("dt", {}, "Sandbox size"), h("dd", {}, `${lim(l.limits.vcpus, " vCPUs")}, ${lim(l.limits.memory_mib, " MiB")}`),
      h("dt", {}, "Longest TTL"), h("dd", {}, lim(l.limits.max_ttl_seconds, " s")),
      h("dt", {}, "TTL counts from"), h("dd", {}, l.limits.ttl_absolute ? "creation" : "last activity"),
      h("dt", {}, "When idle"), h("dd", {}, l.limits.idle_hibernate ? "hibernate" : "delete"));
  }).catch((e) => clear(plan, h("p", { role: "alert" }, (e as Error).message)));
  return h("div", {},
    h("section", { class: "card" }, h("p", { class: "help" }, "What this workspace has used so far."), dl),
    h("section", { class: "card" }, h("h2", {}, "Plan and limits"), h("p", { class: "help" }, "Creates and forks over a limit are refused (docs/billing.md)."), plan));
}

boot();
