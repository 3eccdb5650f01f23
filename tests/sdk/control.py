"""The control server of tests/sdk/serve, inside the KVM host.

GET /log     the last lines of kilnd's log (for a failing test's report);
             /log?ids=A,B every line naming one of those ids
GET /finish  checks that the tests left nothing behind (no live sandbox
             in any workspace, no sandbox VMM), stops kilnd, checks that no
             kiln-vmm of ours is left, answers PASS/FAIL lines and exits.
"""

import http.server
import os
import signal
import sqlite3
import subprocess
import sys
import time

addr, port, api_port, data, tmp = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]


def vmms():
    """Our kiln-vmm processes: pid -> is it a template zygote."""
    zygotes = set()
    for root, _, files in os.walk(os.path.join(data, "templates")):
        if "zygote.pid" in files:
            with open(os.path.join(root, "zygote.pid")) as f:
                zygotes.add(f.read().split()[0])
    out = {}
    for pid in subprocess.run(["pgrep", "-x", "kiln-vmm"], capture_output=True, text=True).stdout.split():
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if tmp in cmd or pid in zygotes:
            out[pid] = pid in zygotes
    return out


def live_sandboxes():
    db = sqlite3.connect(os.path.join(data, "kilnd.db"))
    try:
        return [r[0] for r in db.execute("SELECT id FROM sandboxes WHERE state != 'deleted'")]
    finally:
        db.close()


def finish():
    lines = []
    live = live_sandboxes()
    lines.append(("PASS" if not live else "FAIL") +
                 f" sdk_no_sandboxes_left: {len(live)} live sandboxes after the tests {' '.join(live)}".rstrip())
    running = [p for p, z in vmms().items() if not z]
    lines.append(("PASS" if not running else "FAIL") +
                 f" sdk_no_vmms_left: {len(running)} sandbox VMMs running {' '.join(running)}".rstrip())
    return lines


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, text):
        body = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/log" or self.path.startswith("/log?ids="):
            # /log?ids=sbx_a,sbx_b: every line naming one of them, from
            # the whole log (a sandbox that died early in a group is long
            # out of the last lines by the time the group's end asks).
            ids = [i for i in self.path[len("/log?ids="):].split(",") if i] if "?" in self.path else []
            try:
                with open(os.path.join(tmp, "kilnd.log"), errors="replace") as f:
                    lines = f.readlines()
                lines = [ln for ln in lines if any(i in ln for i in ids)][-60:] if ids else lines[-40:]
                self.reply("".join(lines))
            except OSError as e:
                self.reply(str(e))
        elif self.path == "/finish":
            self.reply("\n".join(finish()) + "\n")
            self.server.done = True
        else:
            self.send_error(404)


srv = http.server.HTTPServer((addr, port), Handler)
srv.done = False
signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
while not srv.done:
    srv.handle_request()
time.sleep(0.2)
