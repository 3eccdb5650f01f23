// A few lines instead of a UI framework: elements built in code, text
// always set as text (never innerHTML), so nothing from a sandbox is markup.

type Attrs = Record<string, string | number | boolean | EventListener | undefined | null>;
type Child = Node | string | number | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v as EventListener);
    else if (k === "class") el.className = String(v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(typeof c === "number" ? String(c) : c);
  return el;
}

export function clear(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(typeof c === "number" ? String(c) : c);
}

export function fmtBytes(n: number): string {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) (n /= 1024), i++;
  return `${i ? n.toFixed(1) : n} ${u[i]}`;
}

/** A sandbox's or template's shape as the API gives it: "2 vCPU · 512 MiB · 1024 MiB disk";
 * "—" in place of what it gives as null (or not yet: a sandbox known only from its event). */
export function fmtShape(vcpus?: number | null, memoryMib?: number | null, diskMib?: number | null): string {
  const or = (v: number | null | undefined, unit: string) => (v ? `${v} ${unit}` : "—");
  return `${or(vcpus, "vCPU")} · ${or(memoryMib, "MiB")} · ${or(diskMib, "MiB")} disk`;
}

export function fmtTime(iso?: string | null): string {
  if (!iso) return "—";
  const d = new Date(iso);
  return isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/* A status line for screen readers and eyes alike. */
export function notice(el: HTMLElement, text: string, kind: "ok" | "error" = "ok"): void {
  el.textContent = text;
  el.className = `notice ${kind}`;
  el.setAttribute("role", kind === "error" ? "alert" : "status");
}

/* Run a redraw without losing the keyboard's place: the focused link or
 * control is found again (by id, else href) in what was drawn. */
export function keepFocus(fn: () => void): void {
  const a = document.activeElement as HTMLElement | null;
  const id = a?.id, href = a?.getAttribute("href");
  fn();
  if (!a || document.contains(a)) return;
  const again = (id && document.getElementById(id)) || (href && document.querySelector(`[href="${CSS.escape(href)}"]`));
  (again as HTMLElement | null)?.focus();
}

export function badge(status: string): HTMLElement {
  return h("span", { class: `badge s-${status}` }, status);
}

/* A link to a URL kilnd gave (an app's own origin): only http(s), so a
 * javascript: URL could never be one; it opens apart from the dashboard
 * (noopener: the app's page gets no handle on this one). */
export function outLink(url: string | null | undefined): Node | string {
  if (!url || !/^https?:\/\//i.test(url)) return url || "—";
  return h("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, url);
}

/* A button that asks first (when confirmText is given), runs fn with every
 * button of its group disabled, and says how it went in msg. */
export function actionButton(group: HTMLElement, msg: HTMLElement, label: string, fn: () => Promise<string>, confirmText?: string, cls?: string): HTMLButtonElement {
  const b = h("button", { type: "button", class: cls, "data-action": label.toLowerCase().replace(/ /g, "-") }, label);
  b.addEventListener("click", async () => {
    if (confirmText && !confirm(confirmText)) return;
    for (const x of group.querySelectorAll("button")) (x as HTMLButtonElement).disabled = true;
    notice(msg, `${label}…`);
    try {
      notice(msg, await fn());
    } catch (e) {
      notice(msg, `${label} failed: ${(e as Error).message}`, "error");
    }
    for (const x of group.querySelectorAll("button")) (x as HTMLButtonElement).disabled = false;
  });
  return b;
}
