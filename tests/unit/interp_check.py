"""tests/unit/interp_check.py INTERP: tests/unit/interp.sh's checks, in a
network namespace of their own (the server's port is fixed)."""
import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import time

INTERP = sys.argv[1]
failed = 0


def result(name, ok, detail):
    global failed
    print("%s interp %s: %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)
    failed += 0 if ok else 1


def call(req, timeout=60):
    """One request; its answer lines, up to the last."""
    s = socket.create_connection(("127.0.0.1", 49999), timeout=timeout)
    with s, s.makefile("rw", encoding="utf-8") as f:
        f.write(json.dumps(req) + "\n")
        f.flush()
        lines = []
        for line in f:
            m = json.loads(line)
            lines.append(m)
            if m.get("t") in ("end", "context", "ok", "fail", "contexts"):
                break
        return lines


def run(code, **kw):
    """A cell: (stdout, the main result's text, the error or None)."""
    lines = call(dict(op="run", code=code, **kw))
    out = "".join(m.get("text", "") for m in lines if m.get("t") == "stdout")
    res = [m["data"]["text/plain"] for m in lines if m.get("t") == "result" and m.get("main")]
    err = [m for m in lines if m.get("t") in ("error", "fail")]
    return out, res[0] if res else None, err[0] if err else None


def create(**kw):
    return call(dict(op="create", **kw))[-1]


def start_server(env_extra):
    env = dict(os.environ, **env_extra)
    p = subprocess.Popen([sys.executable, "-u", INTERP, "serve", "--preload", "fractions,decimal"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(LOG, "a"), env=env)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", 49999), timeout=1).close()
            return p
        except OSError:
            time.sleep(0.05)
    raise SystemExit("FAIL interp start: the server did not listen")


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
                if int(st[st.rindex(")") + 2:].split()[1]) == pid:
                    out.append((int(d), st[st.rindex(")") + 2]))
            except (OSError, ValueError):
                pass
    return out


def zygote_of(server):
    z = [pid for pid, _ in children(server.pid) if " zygote " in cmdline(pid)]
    return z[0] if z else None


def gone(pid, within=5):
    t = time.monotonic()
    while time.monotonic() - t < within:
        if not os.path.exists("/proc/%d" % pid):
            return True
        time.sleep(0.05)
    return False


LOG = "/tmp/kiln-interp-check.%d.log" % os.getpid()
atexit.register(lambda: os.path.exists(LOG) and os.unlink(LOG))   # also when a check raises
shell_workers = []
server = start_server({})
try:
    # Forked by the zygote: its child, a session of its own, the preloads imported.
    t0 = time.monotonic()
    out, res, err = run("import os, sys; (os.getppid(), os.getsid(0) == os.getpid(), 'fractions' in sys.modules)")
    first = time.monotonic() - t0
    z = zygote_of(server)
    ok = err is None and z is not None and res == "(%d, True, True)" % z
    result("python_forked", ok, "the default context's worker: %s; zygote %s (%s); first cell %.2f s" %
           (res, z, cmdline(z).strip()[-40:] if z else "none", first))
    ctx = create(cwd="/tmp")
    t0 = time.monotonic()
    ctx2 = create()
    made = time.monotonic() - t0
    out, res, err = run("import os; x = 1; (os.getcwd(), os.getppid() == %d)" % (z or -1), context=ctx["id"])
    out2, res2, err2 = run("x", context=ctx2["id"])
    result("contexts_apart", res == "('/tmp', True)" and err2 and err2["name"] == "NameError",
           "cwd and parent %s; another context: %s; a context made in %.3f s" % (res, err2 and err2["name"], made))
    for lang in ("bash", "sh"):
        run("export K_V=%s; cd /tmp" % lang, language=lang)
        out, _, err = run('echo "$K_V $PWD $PPID"', language=lang)
        # $PPID of the shell is its worker, whose parent is the zygote.
        w = int(out.split()[-1]) if out.split() else -1
        wp = int(open("/proc/%d/stat" % w).read().rsplit(")", 1)[1].split()[1]) if w > 0 else -1
        shell_workers.append(w)
        result(lang + "_forked", err is None and out.split()[:2] == [lang, "/tmp"] and wp == z,
               "%r; its worker %d's parent %d (zygote %s)" % (out.strip(), w, wp, z))
    # Exit statuses through the zygote: a shell's own (its worker ends with it), a python worker's, a signal.
    bctx = create(language="bash")
    _, _, err = run("exit 7", context=bctx["id"])
    out, _, _ = run("echo back", context=bctx["id"])
    result("shell_exit_status", err and err["name"] == "InterpreterDied" and "(status 7)" in err["value"] and
           out == "back\n", "%s; then %r" % (err and err["value"], out))
    call(dict(op="delete", id=bctx["id"]))
    _, _, err = run("import os; os._exit(3)", context=ctx["id"])
    result("exit_status", err and err["name"] == "InterpreterDied" and "(status 3)" in err["value"],
           err and err["value"])
    _, _, err = run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", context=ctx["id"])
    result("signal_status", err and "(status -9)" in err["value"], err and err["value"])
    out, res, err = run("import os; os.getcwd()", context=ctx["id"])
    result("restarted", res == "'/tmp'", "the context works again, in its cwd: %s %s" % (res, err))
    # A timeout interrupts the forked worker (SIGINT through its pidfd) and keeps it.
    run("y = 5", context=ctx2["id"])
    t0 = time.monotonic()
    _, _, err = run("while True: pass", context=ctx2["id"], timeout=1)
    took = time.monotonic() - t0
    _, res, _ = run("y", context=ctx2["id"])
    result("timeout", err and err["name"] == "TimeoutError" and res == "5" and took < 5,
           "%s after %.1f s; y %s" % (err and err["name"], took, res))
    # A deleted context leaves no process.
    _, res, _ = run("import os; os.getpid()", context=ctx2["id"])
    w = int(res)
    call(dict(op="delete", id=ctx2["id"]))
    result("delete", gone(w) and not [c for c in children(z) if c[0] == w],
           "worker %d gone, not a zombie of the zygote" % w)
    # Many contexts: none left behind, no fd kept by the server.
    fds0 = len(os.listdir("/proc/%d/fd" % server.pid))
    kids0 = len(children(z))
    t0 = time.monotonic()
    ids = [create()["id"] for _ in range(10)]
    per = (time.monotonic() - t0) / 10
    for i in ids:
        run("1", context=i)
        call(dict(op="delete", id=i))
    time.sleep(0.3)
    fds1 = len(os.listdir("/proc/%d/fd" % server.pid))
    kids1 = len(children(z))
    result("no_leak", fds1 == fds0 and kids1 == kids0,
           "10 contexts made (%.3f s each), run and deleted: server fds %d -> %d, zygote's children %d -> %d" %
           (per, fds0, fds1, kids0, kids1))
    # The zygote's death: workers live on; a dead worker is still told; a new zygote forks the next.
    _, res, _ = run("import os; os.getpid()", context=ctx["id"])
    os.kill(z, signal.SIGKILL)
    time.sleep(0.3)
    out, res2, err = run("2 + 2", context=ctx["id"])
    t0 = time.monotonic()
    _, _, err2 = run("import os; os._exit(4)", context=ctx["id"])
    took = time.monotonic() - t0
    c3 = create()
    _, res3, _ = run("import os; os.getppid()", context=c3["id"])
    z2 = zygote_of(server)
    result("zygote_death", res2 == "4" and err2 and err2["name"] == "InterpreterDied" and took < 5 and
           z2 not in (None, z) and res3 == str(z2),
           "a worker of the dead zygote answered %s; its end: %s (%.1f s); next context's parent %s, the new zygote %s" %
           (res2, err2 and err2["value"], took, res3, z2))
finally:
    server.kill()
    server.wait()
# The server gone, its workers end (their requests end) and a shell
# worker takes its cells' directory with it.
cells = ["/tmp/kiln-cells-%d" % w for w in shell_workers]
t0 = time.monotonic()
while any(os.path.exists(c) for c in cells) and time.monotonic() - t0 < 5:
    time.sleep(0.05)
left = [c for c in cells if os.path.exists(c)]
result("shell_cells_removed", cells and not left, "%d shell workers' cells directories; left: %s" % (len(cells), left))

# The path without the zygote: workers are the server's children.
server = start_server({"KILN_INTERP_ZYGOTE": "0"})
try:
    _, res, err = run("import os, sys; (os.getppid(), 'fractions' in sys.modules)")
    _, _, err2 = run("import os; os._exit(5)")
    result("zygote_off", res == "(%d, True)" % server.pid and err2 and "(status 5)" in err2["value"],
           "KILN_INTERP_ZYGOTE=0: the worker's parent is the server: %s; %s" % (res, err2 and err2["value"]))
finally:
    server.kill()
    server.wait()
if failed:
    print("the server's log:\n" + open(LOG).read()[-3000:])
sys.exit(1 if failed else 0)
