// A terminal into a sandbox: xterm.js over the PTY WebSocket
// (GET /v1/sandboxes/{id}/pty). The browser sends the session cookie with
// the upgrade and its Origin, which kilnd checks; no key is involved.
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import "@xterm/xterm/css/xterm.css";

export interface TermHandle {
  close(): void;
}

export function openTerminal(box: HTMLElement, id: string, status: (s: string) => void): TermHandle {
  const dark = document.documentElement.dataset.theme === "dark";
  const term = new Terminal({
    fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace",
    fontSize: 14,
    cursorBlink: true,
    screenReaderMode: true,
    theme: dark ? { background: "#111418", foreground: "#e6e6e6" } : { background: "#fbfbfb", foreground: "#1b1b1b", cursor: "#1b1b1b", selectionBackground: "#b3d4fc" },
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(box);
  try {
    fit.fit();
  } catch {
    /* not laid out yet: the default 80x24 */
  }
  const proto = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${proto}://${location.host}/v1/sandboxes/${encodeURIComponent(id)}/pty?cols=${term.cols}&rows=${term.rows}`);
  ws.binaryType = "arraybuffer";
  const enc = new TextEncoder();
  status("connecting…");
  ws.onopen = () => {
    status("connected");
    term.focus();
  };
  ws.onmessage = (ev) => {
    if (typeof ev.data === "string") {
      try {
        const m = JSON.parse(ev.data);
        if (m.type === "exit") status(`the shell exited (${m.exit_code})`);
        else if (m.type === "error") status(`error: ${m.message}`);
      } catch {
        /* not a control message */
      }
      return;
    }
    term.write(new Uint8Array(ev.data as ArrayBuffer));
  };
  ws.onclose = (ev) => {
    if (ev.code !== 1000) status(`disconnected (${ev.code}${ev.reason ? ": " + ev.reason : ""})`);
    else status("closed");
  };
  ws.onerror = () => status("the terminal could not connect");
  const input = term.onData((d) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(enc.encode(d));
  });
  const resize = term.onResize(({ cols, rows }) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", cols, rows }));
  });
  const onWin = () => {
    try {
      fit.fit();
    } catch {
      /* hidden */
    }
  };
  window.addEventListener("resize", onWin);
  return {
    close() {
      window.removeEventListener("resize", onWin);
      input.dispose();
      resize.dispose();
      ws.close(1000);
      term.dispose();
    },
  };
}
