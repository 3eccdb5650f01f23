// The Apps views (docs/dashboard.md "Apps"): the workspace's apps
// (docs/api.md "Apps"), and one app with its log, its events, redeploy and
// delete. Every string from kilnd or the app's log goes in as text.
import { api, type App, type AppLogs } from "./api";
import { h, clear, fmtTime, notice, badge, outLink, actionButton } from "./dom";

export type View = HTMLElement & { close?: () => void };

const TAIL = 200;	// log lines asked for; the view keeps at most MAX_LINES
const MAX_LINES = 2000;

export function appsView(): View {
  const tbody = h("tbody");
  const msg = h("p", { id: "apps-msg", "aria-live": "polite" });
  const load = async () => {
    const r = await api<{ apps: App[] }>("GET", "/v1/apps");
    clear(tbody, ...(r.apps.length ? r.apps.map((a) => h("tr", { "data-id": a.id, "data-name": a.name },
      h("td", {}, h("a", { href: `#/apps/${encodeURIComponent(a.id)}` }, a.name)),
      h("td", {}, badge(a.status)),
      h("td", {}, outLink(a.url)),
      h("td", {}, a.version),
      h("td", {}, a.vm_restarts),
      h("td", {}, fmtTime(a.created_at)))) :
      [h("tr", {}, h("td", { colspan: "6" }, "No apps: deploy one with POST /v1/apps, `kiln app deploy` or an SDK (docs/api.md \"Apps\")."))]));
  };
  load().catch((e) => notice(msg, (e as Error).message, "error"));
  // The status of an app is its sandbox's: reload now and then while shown.
  const timer = setInterval(() => load().catch(() => {}), 5000);
  const v: View = h("div", {}, h("section", { class: "card" }, msg, h("div", { class: "scroll" }, h("table", { id: "apps" },
    h("thead", {}, h("tr", {}, ...["Name", "Status", "URL", "Version", "VM restarts", "Created"].map((t) => h("th", { scope: "col" }, t)))), tbody))));
  v.close = () => clearInterval(timer);
  return v;
}

export function appView(id: string): View {
  const path = `/v1/apps/${encodeURIComponent(id)}`;
  const msg = h("p", { id: "app-msg", "aria-live": "polite" });
  const facts = h("div");
  const actions = h("div", { class: "actions", role: "group", "aria-label": "Actions" });
  const draw = (a: App) => clear(facts, h("dl", { class: "facts", id: "app-facts" },
    h("dt", {}, "Name"), h("dd", { id: "app-name" }, a.name),
    h("dt", {}, "Status"), h("dd", { id: "app-status" }, badge(a.status)),
    h("dt", {}, "URL"), h("dd", { id: "app-url" }, outLink(a.url)),
    h("dt", {}, "Port"), h("dd", {}, a.port),
    h("dt", {}, "Source"), h("dd", {}, a.from_snapshot ?? a.template ?? "—"),
    h("dt", {}, "Command"), h("dd", {}, a.command ? h("code", {}, a.command) : "—"),
    h("dt", {}, "Restart"), h("dd", {}, a.restart),
    h("dt", {}, "Hibernates after"), h("dd", {}, a.idle_seconds ? `${a.idle_seconds} s idle` : "never"),
    h("dt", {}, "Version"), h("dd", { id: "app-version" }, a.version),
    h("dt", {}, "VM restarts"), h("dd", {}, a.vm_restarts),
    h("dt", {}, "Sandbox"), h("dd", {}, a.sandbox_id ? h("a", { href: `#/sandboxes/${a.sandbox_id}` }, a.sandbox_id) : "—"),
    h("dt", {}, "Created"), h("dd", {}, fmtTime(a.created_at)),
    h("dt", {}, "Updated"), h("dd", {}, fmtTime(a.updated_at)),
    a.reason ? h("dt", {}, "Reason") : null, a.reason ? h("dd", {}, a.reason) : null));
  const load = () => api<App>("GET", path).then(draw);
  actions.append(
    actionButton(actions, msg, "Redeploy", async () => {
      const a = await api<App>("POST", `${path}/deploy`, {});
      draw(a);
      return `version ${a.version} serves`;
    }, `Redeploy ${id}? A new sandbox is made from the app's source; the old one serves until the new one listens.`),
    actionButton(actions, msg, "Delete", async () => {
      await api("DELETE", path);
      location.hash = "#/apps";
      return "deleted";
    }, `Delete app ${id}? Its sandboxes go, and its URL stops answering.`, "danger"));
  load().catch((e) => notice(msg, (e as Error).message, "error"));

  // The log: the last TAIL lines, then (Follow) what is appended, by SSE.
  const events = h("ul", { id: "app-events", class: "plain" });
  const log = h("pre", { id: "app-log", class: "out", tabindex: "0", "aria-label": "The app's log" });
  const logMsg = h("p", { id: "app-log-msg", "aria-live": "polite" });
  const addEvent = (at: string, text: string) => events.append(h("li", {}, h("time", {}, fmtTime(at)), " ", text));
  const addLine = (text: string) => {
    log.append(text + "\n");	// a text node: a line is never markup
    while (log.childNodes.length > MAX_LINES) log.firstChild!.remove();
    log.scrollTop = log.scrollHeight;
  };
  let es: EventSource | null = null;
  const stop = () => {
    es?.close();
    es = null;
  };
  const fetchLog = async () => {
    stop();
    notice(logMsg, "loading…");
    try {
      const r = await api<AppLogs>("GET", `${path}/logs?tail=${TAIL}`);
      clear(events);
      clear(log);
      for (const e of r.events) addEvent(e.at, e.text);
      for (const l of r.lines) addLine(l);
      if (!r.events.length) events.append(h("li", {}, "No events."));
      notice(logMsg, `${r.lines.length} line${r.lines.length === 1 ? "" : "s"}`);
    } catch (e) {
      notice(logMsg, (e as Error).message, "error");
    }
  };
  const follow = h("input", { id: "app-follow", type: "checkbox" });
  follow.addEventListener("change", () => {
    if (!follow.checked) {
      stop();
      notice(logMsg, "not following");
      return;
    }
    // follow=true replays the events and the tail, then streams new lines.
    clear(events);
    clear(log);
    es = new EventSource(`${path}/logs?follow=true&tail=${TAIL}`);
    es.onopen = () => notice(logMsg, "following");
    es.addEventListener("event", (ev) => {
      const e = JSON.parse((ev as MessageEvent).data);
      addEvent(e.at, e.text);
    });
    es.addEventListener("line", (ev) => addLine(JSON.parse((ev as MessageEvent).data).text));
    es.addEventListener("end", (ev) => {
      stop();
      follow.checked = false;
      notice(logMsg, `the log ended: ${JSON.parse((ev as MessageEvent).data).reason}`);
    });
    es.onerror = () => notice(logMsg, "reconnecting…", "error");
  });
  const refresh = h("button", { type: "button", class: "ghost" }, "Reload log");
  refresh.addEventListener("click", () => {
    follow.checked = false;
    fetchLog();
  });
  fetchLog();
  const v: View = h("div", {},
    h("p", {}, h("a", { href: "#/apps" }, "← All apps")),
    h("section", { class: "card" }, actions, msg, facts),
    h("section", { class: "card" }, h("h2", {}, "Events"), events),
    h("section", { class: "card" }, h("h2", {}, "Log"),
      h("div", { class: "row" }, refresh, h("div", { class: "check" }, follow, h("label", { for: "app-follow" }, "Follow"))), logMsg, log));
  v.close = stop;
  return v;
}
