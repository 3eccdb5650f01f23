"""kiln's code interpreter inside a sandbox (docs/api.md, Code).

kilnd writes this file into the guest and starts `python3 kiln_interp.py
serve` in the background the first time a sandbox runs code; it listens
on 127.0.0.1:49999 inside the guest, which kilnd reaches through the
guest agent (nothing outside the VM can). Each context is a worker
process (`kiln_interp.py worker`) with its own variables; a cell runs in
its context's worker, so one context's crash, hang or interrupt touches
no other. Because the server and its workers are ordinary processes in
the guest's memory, a snapshot or a fork of the sandbox carries every
context's state with it.

Protocol: one JSON request per connection, then JSON lines back.
  {"op":"run","context":ID,"code":TEXT,"timeout":S}
      -> {"t":"stdout"|"stderr","text"}* {"t":"result","data":{MIME: ...},"main":bool}*
         {"t":"error","name","value","traceback"}? {"t":"end","count":N}
  {"op":"create","language":"python","cwd":DIR} -> {"t":"context","id","language","cwd"}
  {"op":"list"} -> {"t":"contexts","contexts":[{"id","language","cwd"}]}
  {"op":"delete","id"} / {"op":"restart","id"} -> {"t":"ok"}
  {"op":"ready"} -> {"t":"ok"} once the default context's worker has
      started (its preloaded modules imported): what `start` waits for
  failures: {"t":"fail","code","message"}
A client that goes away mid-cell interrupts it (SIGINT, then SIGKILL and a
fresh worker if it does not stop within 2 s).

`kiln_interp.py start --preload numpy,pandas` is how a template starts it
before its snapshot (the code-interpreter template, src/host/template.c):
the server as a daemon, every worker importing those modules before its
first cell, and it returns once the default context is ready, so the
first cell of every sandbox made from the snapshot starts nothing.
"""

import ast
import base64
import importlib
import io
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

PORT = 49999
MAX_TEXT = 1 << 20          # per stdout/stderr message
MAX_CELL = 4 << 20          # code of one cell


# ---- the worker: one context's interpreter ---------------------------------------------------------

class _Stream(io.TextIOBase):
    """sys.stdout / sys.stderr of user code: each write is a message."""

    def __init__(self, send, name):
        self._send, self._name = send, name

    def writable(self):
        return True

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not " + type(s).__name__)
        for i in range(0, len(s), MAX_TEXT):
            self._send({"t": self._name, "text": s[i:i + MAX_TEXT]})
        return len(s)

    def isatty(self):
        return False


def _formats(value):
    """A value's representations by MIME type, as Jupyter's display does."""
    data = {"text/plain": repr(value)}
    for meth, mime in (("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown"),
                       ("_repr_json_", "application/json"), ("_repr_png_", "image/png"),
                       ("_repr_svg_", "image/svg+xml")):
        f = getattr(value, meth, None)
        if not callable(f):
            continue
        try:
            r = f()
        except Exception:  # a broken _repr_ is not the cell's error
            continue
        if r is None:
            continue
        if mime == "image/png" and isinstance(r, bytes):
            r = base64.b64encode(r).decode()
        data[mime] = r
    mpl = sys.modules.get("matplotlib.figure")
    if mpl is not None and isinstance(value, mpl.Figure):
        buf = io.BytesIO()
        value.savefig(buf, format="png")
        data["image/png"] = base64.b64encode(buf.getvalue()).decode()
    return data


def _figures(send):
    """Every open matplotlib figure as a PNG result, then closed."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in plt.get_fignums():
        buf = io.BytesIO()
        plt.figure(num).savefig(buf, format="png")
        send({"t": "result", "main": False,
              "data": {"text/plain": "<Figure %d>" % num, "image/png": base64.b64encode(buf.getvalue()).decode()}})
    plt.close("all")


def worker(cwd, preload):
    chan = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    # User code reading stdin gets end of file, not the next request.
    null_in = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_in, 0)
    sys.stdin = open(os.devnull)
    # An interrupt reaches a running cell as KeyboardInterrupt (a process
    # started in the background may inherit SIGINT ignored: set it), and
    # is ignored between cells: one that comes late, as the cell ends,
    # must not end the worker and its variables with it.
    running = [False]

    def on_interrupt(sig, frame):
        if running[0]:
            raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_interrupt)
    lock = threading.Lock()

    def send(msg):
        with lock:
            chan.write(json.dumps(msg) + "\n")

    # fd 1 and 2 of the worker (C extensions, os.system) go to the
    # server's log, not into the channel.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.environ.setdefault("MPLBACKEND", "Agg")
    if cwd:
        os.chdir(cwd)
    # Imported, not bound: `import numpy as np` in a cell is then instant,
    # and a context's variables are only the user's.
    for mod in filter(None, preload.split(",")):
        try:
            importlib.import_module(mod)
        except Exception as e:
            print("kiln_interp: preload %s: %s" % (mod, e), file=sys.__stderr__)
    ns = {"__name__": "__main__", "__builtins__": __builtins__}
    count = 0
    sys.stdout, sys.stderr = _Stream(send, "stdout"), _Stream(send, "stderr")
    for line in requests:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        if req.get("ping"):
            send({"t": "end", "count": count})
            continue
        count += 1
        name = "<cell-%d>" % count
        running[0] = True
        try:
            tree = ast.parse(req["code"], name, "exec")
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, name, "exec"), ns)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), name, "eval"), ns)
                if value is not None:
                    ns["_"] = value
                    send({"t": "result", "main": True, "data": _formats(value)})
            _figures(send)
        except BaseException as e:  # the cell's error, KeyboardInterrupt and SystemExit included
            tb = traceback.format_exception(type(e), e, e.__traceback__)
            # Keep the cell's frames, not this file's.
            tb = [tb[0]] + [f for f in tb[1:] if __file__ not in f]
            try:
                _figures(send)
            except Exception:
                pass
            send({"t": "error", "name": type(e).__name__, "value": str(e), "traceback": "".join(tb)})
        finally:
            running[0] = False
        sys.stdout.flush()
        send({"t": "end", "count": count})


# ---- the server: contexts and connections ---------------------------------------------------------

class Context:
    def __init__(self, cid, cwd):
        self.id, self.cwd = cid, cwd
        self.lock = threading.Lock()    # one cell at a time
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([sys.executable, "-u", __file__, "worker", self.cwd or "", PRELOAD],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     encoding="utf-8", bufsize=1)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self):
        self.stop()
        self.start()

    def describe(self):
        return {"id": self.id, "language": "python", "cwd": self.cwd}


contexts = {}
contexts_lock = threading.Lock()
PRELOAD = ""    # modules every worker imports at start (--preload)


def get_context(cid):
    with contexts_lock:
        if cid == "default" and cid not in contexts:
            contexts[cid] = Context(cid, None)
        return contexts.get(cid)


def run(conn, send, req):
    ctx = get_context(req.get("context") or "default")
    if ctx is None:
        return send({"t": "fail", "code": "not_found", "message": "no context %r" % req.get("context")})
    code = req.get("code")
    if not isinstance(code, str) or len(code) > MAX_CELL:
        return send({"t": "fail", "code": "invalid_request", "message": "code must be text of at most 4 MiB"})
    timeout = req.get("timeout") or 0
    with ctx.lock:
        if ctx.proc.poll() is not None:
            ctx.restart()
        p = ctx.proc
        p.stdin.write(json.dumps({"code": code}) + "\n")
        p.stdin.flush()
        state = {"done": False, "why": None}
        # done and the interrupt under one lock: an interrupt goes only to
        # a cell still running, never to the next one or an idle worker.
        state_lock = threading.Lock()

        def guard():
            # The client going away, or the time limit: interrupt, then kill.
            deadline = time.monotonic() + timeout if timeout else None
            while True:
                time.sleep(0.1)
                gone = False
                try:
                    gone = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
                except BlockingIOError:
                    pass
                except OSError:
                    gone = True
                late = deadline is not None and time.monotonic() > deadline
                with state_lock:
                    if state["done"]:
                        return
                    if gone or late:
                        state["why"] = "timeout" if late else "gone"
                        p.send_signal(signal.SIGINT)
                if gone or late:
                    t = time.monotonic()
                    while not state["done"] and time.monotonic() - t < 2:
                        time.sleep(0.05)
                    with state_lock:
                        if not state["done"]:
                            p.kill()
                    return

        g = threading.Thread(target=guard, daemon=True)
        g.start()
        ended = False
        for line in p.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("t") == "end":
                # Before the client hears it: once it has, it closes the
                # connection, which the guard must not take for leaving.
                with state_lock:
                    state["done"] = True
            if msg.get("t") == "error" and state["why"] == "timeout" and msg.get("name") == "KeyboardInterrupt":
                msg = {"t": "error", "name": "TimeoutError",
                       "value": "the cell ran past its %s s limit and was interrupted" % timeout,
                       "traceback": msg.get("traceback", "")}
            try:
                send(msg)
            except OSError:
                pass
            if msg.get("t") == "end":
                ended = True
                break
        with state_lock:
            state["done"] = True
        if not ended:
            status = p.wait()
            ctx.start()
            why = ("the cell ran past its %s s limit" % timeout if state["why"] == "timeout"
                   else "the interpreter exited (status %s)" % status)
            try:
                send({"t": "error", "name": "InterpreterDied" if state["why"] != "timeout" else "TimeoutError",
                      "value": why + "; the context was restarted empty", "traceback": ""})
                send({"t": "end", "count": 0})
            except OSError:
                pass


def handle(conn):
    f = conn.makefile("rw", encoding="utf-8", newline="\n")

    def send(msg):
        f.write(json.dumps(msg) + "\n")
        f.flush()

    try:
        line = f.readline(MAX_CELL * 2)
        req = json.loads(line)
        op = req.get("op")
        if op == "run":
            run(conn, send, req)
        elif op == "create":
            if (req.get("language") or "python") != "python":
                return send({"t": "fail", "code": "invalid_request", "message": "only python contexts exist"})
            cid = "ctx-" + secrets.token_hex(6)
            ctx = Context(cid, req.get("cwd") or None)
            with contexts_lock:
                contexts[cid] = ctx
            send(dict(t="context", **ctx.describe()))
        elif op == "ready":
            ctx = get_context("default")
            with ctx.lock:
                if ctx.proc.poll() is not None:
                    ctx.restart()
                ctx.proc.stdin.write(json.dumps({"ping": True}) + "\n")
                ctx.proc.stdin.flush()
                for line in ctx.proc.stdout:
                    try:
                        if json.loads(line).get("t") == "end":
                            break
                    except ValueError:
                        continue
                else:
                    return send({"t": "fail", "code": "internal", "message": "the default context's worker exited"})
            send({"t": "ok"})
        elif op == "list":
            get_context("default")
            with contexts_lock:
                send({"t": "contexts", "contexts": [c.describe() for c in contexts.values()]})
        elif op in ("delete", "restart"):
            ctx = get_context(req.get("id") or "")
            if ctx is None:
                return send({"t": "fail", "code": "not_found", "message": "no context %r" % req.get("id")})
            if op == "delete":
                with contexts_lock:
                    contexts.pop(ctx.id, None)
                ctx.stop()
            else:
                with ctx.lock:
                    ctx.restart()
            send({"t": "ok"})
        else:
            send({"t": "fail", "code": "invalid_request", "message": "unknown op %r" % op})
    except (OSError, ValueError, KeyError) as e:
        try:
            send({"t": "fail", "code": "invalid_request", "message": str(e)})
        except OSError:
            pass
    finally:
        try:
            f.close()
            conn.close()
        except OSError:
            pass


def serve():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", PORT))
    s.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def start(wait_s=300):
    """Start the server as a daemon (its own session, out of the caller's
    process group) and return once its default context is ready."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            fd = os.open("/var/log/kiln-interp.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            try:
                serve()
            finally:
                os._exit(1)
        os._exit(0)
    os.wait()
    deadline = time.monotonic() + wait_s
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", PORT), timeout=wait_s)
            break
        except OSError:
            if time.monotonic() > deadline:
                sys.exit("kiln_interp: the server did not listen within %d s" % wait_s)
            time.sleep(0.1)
    with s, s.makefile("rw", encoding="utf-8") as f:
        f.write(json.dumps({"op": "ready"}) + "\n")
        f.flush()
        reply = json.loads(f.readline() or "{}")
    if reply.get("t") != "ok":
        sys.exit("kiln_interp: not ready: %s" % reply)


def _preload_arg(args):
    return args[args.index("--preload") + 1] if "--preload" in args[:-1] else ""


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2] if len(sys.argv) > 2 else "", sys.argv[3] if len(sys.argv) > 3 else "")
    elif len(sys.argv) > 1 and sys.argv[1] == "start":
        PRELOAD = _preload_arg(sys.argv)
        start()
    else:
        PRELOAD = _preload_arg(sys.argv)
        serve()
