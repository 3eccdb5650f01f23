// The Databases views (docs/dashboard.md "Databases"): the workspace's
// managed PostgreSQL databases (docs/databases.md), and one with its
// backups, reset password and delete. A password is on the page only from
// the answer that carries it until "Done" (or the view) removes it: it is
// kept in no variable, storage or URL.
import { api, type Database, type DatabaseBackup } from "./api";
import { h, clear, fmtTime, notice, badge, actionButton } from "./dom";
import type { View } from "./apps";

/* The password of a create or reset-password answer, shown once in box:
 * a Copy button, and Done, which takes it off the page. */
function showPassword(box: HTMLElement, d: Database, what: string): void {
  const out = h("output", { id: "db-password", class: "secret" }, d.password ?? "");
  const copy = h("button", { type: "button", class: "ghost" }, "Copy");
  copy.addEventListener("click", () => navigator.clipboard?.writeText(out.textContent ?? "").then(() => (copy.textContent = "Copied")));
  const done = h("button", { type: "button", id: "db-password-done" }, "Done");
  done.addEventListener("click", () => clear(box));
  clear(box, h("div", { class: "card warn", role: "status" },
    h("p", {}, `${what} The password of user ${d.user} is shown only now: kiln keeps it nowhere. Copy it somewhere safe.`),
    out, " ", copy, " ", done));
}

export function databasesView(): View {
  const tbody = h("tbody");
  const msg = h("p", { id: "db-msg", "aria-live": "polite" });
  const shown = h("div", { id: "db-new", "aria-live": "polite" });
  const load = async () => {
    const r = await api<{ databases: Database[] }>("GET", "/v1/databases");
    clear(tbody, ...(r.databases.length ? r.databases.map((d) => h("tr", { "data-id": d.id, "data-name": d.name },
      h("td", {}, h("a", { href: `#/databases/${encodeURIComponent(d.id)}` }, d.name)),
      h("td", {}, badge(d.status)),
      h("td", {}, h("code", {}, `${d.host}:${d.port}`)),
      h("td", {}, d.user),
      h("td", {}, fmtTime(d.created_at)))) :
      [h("tr", {}, h("td", { colspan: "5" }, "No databases: make one above."))]));
  };
  const name = h("input", { id: "db-name", type: "text", maxlength: "63", pattern: "[a-z0-9][a-z0-9\\-]*", placeholder: "main", spellcheck: "false", "aria-describedby": "db-help" });
  const btn = h("button", { type: "submit" }, "Create database");
  const form = h("form", { class: "card create", "aria-label": "Create a database" },
    h("h2", {}, "New database"),
    h("div", { class: "row" }, h("div", { class: "grow" }, h("label", { for: "db-name" }, "Name"), name)),
    h("p", { id: "db-help", class: "help" }, "PostgreSQL 15 in a microVM of its own, reachable from this workspace's sandboxes only (docs/databases.md). It takes a while to start."),
    btn, msg, shown);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    btn.disabled = true;
    notice(msg, "creating…");
    try {
      const body = name.value.trim() ? { name: name.value.trim() } : {};
      const d = await api<Database>("POST", "/v1/databases", body);
      notice(msg, `created ${d.name} (${d.id})`);
      name.value = "";
      showPassword(shown, d, `Database ${d.name} is up.`);
      await load();
    } catch (e) {
      notice(msg, `Create refused: ${(e as Error).message}`, "error");
    }
    btn.disabled = false;
  });
  load().catch((e) => notice(msg, (e as Error).message, "error"));
  const timer = setInterval(() => load().catch(() => {}), 5000);
  const v: View = h("div", {}, form,
    h("section", { class: "card" }, h("div", { class: "scroll" }, h("table", { id: "databases" },
      h("thead", {}, h("tr", {}, ...["Name", "Status", "Address", "User", "Created"].map((t) => h("th", { scope: "col" }, t)))), tbody))));
  v.close = () => {
    clearInterval(timer);
    clear(shown);	// the password leaves the page with the view
  };
  return v;
}

export function databaseView(id: string): View {
  const path = `/v1/databases/${encodeURIComponent(id)}`;
  const msg = h("p", { id: "dbv-msg", "aria-live": "polite" });
  const facts = h("div");
  const shown = h("div", { id: "db-secret", "aria-live": "polite" });
  const actions = h("div", { class: "actions", role: "group", "aria-label": "Actions" });
  const backups = h("tbody");
  const draw = (d: Database) => clear(facts, h("dl", { class: "facts", id: "db-facts" },
    h("dt", {}, "Name"), h("dd", { id: "db-name-v" }, d.name),
    h("dt", {}, "Status"), h("dd", { id: "db-status" }, badge(d.status)),
    h("dt", {}, "Address"), h("dd", {}, h("code", {}, `${d.host}:${d.port}`)),
    h("dt", {}, "User"), h("dd", {}, d.user),
    h("dt", {}, "Database"), h("dd", {}, d.database),
    h("dt", {}, "URL"), h("dd", {}, h("code", { id: "db-url" }, d.url)),
    h("dt", {}, "Created"), h("dd", {}, fmtTime(d.created_at)),
    h("dt", {}, "From backup"), h("dd", {}, d.from_backup ?? "—"),
    h("dt", {}, "Scheduled backups"), h("dd", {}, d.backup_interval_seconds ? `every ${d.backup_interval_seconds} s, ${d.backups_kept} kept` : "none"),
    h("dt", {}, "VM restarts"), h("dd", {}, d.vm_restarts ?? 0),
    h("dt", {}, "Sandbox"), h("dd", {}, d.sandbox_id ? h("a", { href: `#/sandboxes/${d.sandbox_id}` }, d.sandbox_id) : "—"),
    d.events?.length ? h("dt", {}, "Events") : null,
    d.events?.length ? h("dd", {}, h("ul", { class: "plain", id: "db-events" }, ...d.events.map((e) => h("li", {}, `${fmtTime(new Date(e.ts_ms).toISOString())} ${e.kind}: ${e.text}`)))) : null));
  const load = () => api<Database>("GET", path).then(draw);
  const loadBackups = async () => {
    const r = await api<{ backups: DatabaseBackup[] }>("GET", `${path}/backups`);
    clear(backups, ...(r.backups.length ? r.backups.map((b) => h("tr", { "data-id": b.id },
      h("td", {}, h("code", {}, b.id)), h("td", {}, b.kind ?? "manual"), h("td", {}, fmtTime(new Date(b.created_ms).toISOString())))) :
      [h("tr", {}, h("td", { colspan: "3" }, "No backups yet."))]));
  };
  actions.append(
    actionButton(actions, msg, "Back up now", async () => {
      const b = await api<DatabaseBackup>("POST", `${path}/backups`, {});
      await loadBackups();
      return `backup ${b.id} made`;
    }),
    actionButton(actions, msg, "Reset password", async () => {
      const d = await api<Database>("POST", `${path}/reset-password`, {});
      showPassword(shown, d, "The password was reset: the old one no longer works.");
      // Not draw(d): the answer's url carries the password too. GET's has none.
      await load();
      return "password reset";
    }, `Reset the password of ${id}? Programs using the old one stop connecting.`),
    actionButton(actions, msg, "Delete", async () => {
      await api("DELETE", path);
      location.hash = "#/databases";
      return "deleted";
    }, `Delete database ${id} and its data? Its backups are kept.`, "danger"));
  load().catch((e) => notice(msg, (e as Error).message, "error"));
  loadBackups().catch((e) => notice(msg, (e as Error).message, "error"));
  const v: View = h("div", {},
    h("p", {}, h("a", { href: "#/databases" }, "← All databases")),
    h("section", { class: "card" }, actions, msg, shown, facts),
    h("section", { class: "card" }, h("h2", {}, "Backups"),
      h("p", { class: "help" }, "A backup is a snapshot of the database's VM; it outlives the database and restores into a new one (POST /v1/databases {\"from_backup\": ID})."),
      h("div", { class: "scroll" }, h("table", { id: "backups" },
        h("thead", {}, h("tr", {}, ...["Id", "Kind", "Made"].map((t) => h("th", { scope: "col" }, t)))), backups))));
  v.close = () => clear(shown);
  return v;
}
