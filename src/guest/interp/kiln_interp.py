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

Languages: python (a worker that is a Python interpreter), bash and sh
(a worker that keeps one interactive shell: variables, functions, cwd and
exported variables last from cell to cell; a cell whose last command
fails is a NonZeroExit error) and javascript (a node process: globals
last; needs node, which the code-interpreter template has). A cell
without a context runs in its language's default context ("default" for
python, "default-bash", "default-sh", "default-javascript").

Protocol: one JSON request per connection, then JSON lines back.
  {"op":"run","context":ID,"language":L,"code":TEXT,"timeout":S,"max_output":BYTES,"envs":{NAME:VALUE}}
      -> {"t":"stdout"|"stderr","text"}* {"t":"result","data":{MIME: ...},"main":bool}*
         {"t":"error","name","value","traceback"}? {"t":"end","count":N,"truncated":bool}
      stdout and stderr together stop at max_output bytes (default 1 MiB;
      then truncated): what leaves the guest is bounded, whatever a cell
      prints. envs are environment variables of that cell only: set
      before it (os.environ, process.env, exported shell variables: what
      it starts inherits them), undone after it.
  {"op":"create","language":L,"cwd":DIR} -> {"t":"context","id","language","cwd"}
  {"op":"list"} -> {"t":"contexts","contexts":[{"id","language","cwd"}]}
  {"op":"delete","id"} / {"op":"restart","id"} -> {"t":"ok"}
  {"op":"ready"} -> {"t":"ok"} once the default context's worker has
      started (its preloaded modules imported): what `start` waits for
  failures: {"t":"fail","code","message"}
A client that goes away mid-cell interrupts it (SIGINT, then SIGKILL and a
fresh worker if it does not stop within 2 s).

`kiln_interp.py start` is how a template starts it before its snapshot
(the code-interpreter template, src/host/template.c): the server as a
daemon, every python worker importing the modules named in
kiln_interp.preload beside this file (one line, comma-separated; or
--preload) before its first cell, and it returns once the default context
is ready, so the first cell of every sandbox made from the snapshot
starts nothing. kilnd, finding the server gone, starts this same file
(`serve`) when the template has it, so the preloads come back too.
"""

import ast
import base64
import importlib
import io
import json
import os
import re
import secrets
import shutil
import signal
import socket
import select
import subprocess
import sys
import tempfile
import threading
import time
import traceback

PORT = 49999
MAX_TEXT = 1 << 20          # per stdout/stderr message
MAX_CELL = 4 << 20          # code of one cell
MAX_OUTPUT = 1 << 20        # stdout and stderr of a cell, unless the request says
LANGUAGES = ("python", "bash", "sh", "javascript")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
MAX_ENVS = 128              # a cell's envs, as kilnd's exec allows
MAX_ENV_VALUE = 64 << 10


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
    sys.stdout, sys.stderr = _Stream(send, "stdout"), _Stream(send, "stderr")

    def cell(req, count):
        name = "<cell-%d>" % count
        running[0] = True
        saved = set_envs(req.get("envs") or {})
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
            restore_envs(saved)
        sys.stdout.flush()

    serve_cells(requests, send, cell)


def serve_cells(requests, send, cell):
    """Every worker's loop: one JSON request a line from the server. A
    ping (the server's `ready`) is answered with the count of cells so
    far; anything else is a cell, run by cell(req, count), then its end."""
    count = 0
    for line in requests:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        if req.get("ping"):
            send({"t": "end", "count": count})
            continue
        count += 1
        cell(req, count)
        send({"t": "end", "count": count})


def set_envs(envs):
    """A cell's environment variables set in os.environ (so what it starts
    has them too); what restore_envs needs to undo it after the cell."""
    saved = {k: os.environ.get(k) for k in envs}
    os.environ.update(envs)
    return saved


def restore_envs(saved):
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# ---- the shell worker: one interactive bash or sh per context ---------------------------------------

def shell_worker(shell, cwd):
    """A context of bash or sh: one interactive shell that every cell is
    sourced into, so variables, functions, `cd` and `export` last. It is
    interactive because that is how a shell survives an interrupt: SIGINT
    ends the command line under way (the cell) and the shell reads the
    next one, as at a prompt. Each cell is `command . FILE`, then a line that
    writes `SEQ $?` to a pipe of its own (the mark): stdout and stderr
    written before it are in their pipes when it comes."""
    chan = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)

    def send(msg):
        chan.write(json.dumps(msg) + "\n")

    cells = cells_dir(os.getpid())
    os.mkdir(cells, 0o700)
    marks_r, marks_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    argv = ["bash", "--norc", "--noprofile", "--noediting", "-i"] if shell == "bash" else ["sh", "-i"]
    env = dict(os.environ, PS1="", PS2="", PS4="+ ", TERM="dumb")
    env.pop("PROMPT_COMMAND", None)
    state = {"seq": 0, "running": False, "err_tail": "", "restore": ""}
    shell_proc = []

    def on_interrupt(sig, frame):
        # The cell's command line ends; its mark never comes, so one
        # is sent after it (a cell that ended meanwhile has its own,
        # the first one read wins; the other is skipped).
        if state["running"] and shell_proc:
            try:
                os.killpg(shell_proc[0].pid, signal.SIGINT)
            except OSError:
                pass
            line(mark(state["seq"], "130", state["restore"]))
    # Set before the shell starts: a worker started with SIGINT ignored
    # (in the background) would hand that on to the shell and its
    # commands, which no interrupt could then stop.
    signal.signal(signal.SIGINT, on_interrupt)
    # Its own process group, so that an interrupt reaches the shell and
    # what it runs in the foreground, not this worker.
    sh = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out_w, stderr=err_w, pass_fds=(marks_w,),
                          cwd=cwd or None, env=env, preexec_fn=os.setpgrp)
    for fd in (out_w, err_w, marks_w):
        os.close(fd)
    for fd in (out_r, err_r, marks_r):
        os.set_blocking(fd, False)
    decoders = {out_r: codecs_decoder(), err_r: codecs_decoder()}
    names = {out_r: "stdout", err_r: "stderr"}
    marks = [b""]
    shell_proc.append(sh)

    def line(text):
        # os.write, not the file object: the interrupt handler writes
        # too, and a buffered file refuses a reentrant call.
        data = text.encode() + b"\n"
        try:
            while data:
                data = data[os.write(sh.stdin.fileno(), data):]
        except OSError:
            pass

    def mark(seq, status="$?", restore=""):
        # printf is a builtin of both shells: no process per cell;
        # `command`, so that a cell's function named printf is not it.
        # restore (a cell's envs undone) runs first, the status kept.
        pre = "__kiln_st=%s; %s; " % (status, restore) if restore else ""
        return pre + "command printf '%%s %%s\\n' %d %s >&%d" % (seq, "$__kiln_st" if restore else status, marks_w)

    def pump(fd, forward=True):
        """What fd has now; False at its end."""
        while True:
            try:
                b = os.read(fd, 65536)
            except BlockingIOError:
                return True
            if not b:
                return False
            if fd == marks_r:
                marks[0] += b
                continue
            text = decoders[fd].decode(b)
            if forward and text:
                if fd == err_r:
                    state["err_tail"] = (state["err_tail"] + text)[-4096:]
                for i in range(0, len(text), MAX_TEXT):
                    send({"t": names[fd], "text": text[i:i + MAX_TEXT]})

    def wait_mark(seq, forward=True):
        """The status of cell seq, or None when the shell is gone. Marks
        of other cells (an interrupt's, sent as the cell ended) are
        skipped."""
        while True:
            while b"\n" in marks[0]:
                ln, marks[0] = marks[0].split(b"\n", 1)
                parts = ln.split()
                if len(parts) == 2 and parts[0] == b"%d" % seq:
                    for fd in (out_r, err_r):
                        pump(fd, forward)
                    try:
                        return int(parts[1])
                    except ValueError:
                        return 1
            ready, _, _ = select.select([out_r, err_r, marks_r], [], [])
            ended = False
            for fd in ready:
                ended = not pump(fd, forward) or ended
            if ended and sh.poll() is not None:
                for fd in (out_r, err_r):
                    pump(fd, forward)
                return None

    # Start-up: the shell's prompt settings, history off, and its
    # complaints about having no terminal read and dropped.
    line("PS1= PS2=")
    if shell == "bash":
        line("set +o history")
    line(mark(0))
    if wait_mark(0, forward=False) is None:
        shutil.rmtree(cells, ignore_errors=True)
        sys.exit("kiln_interp: %s did not start" % shell)

    def cell(req, count):
        path = os.path.join(cells, "cell-%d" % count)
        with open(path, "w", encoding="utf-8") as f:
            f.write(req["code"])
            if not req["code"].endswith("\n"):
                f.write("\n")
        envs = req.get("envs") or {}
        env_path = path + ".env"
        if envs:
            with open(env_path, "w", encoding="utf-8") as f:
                f.write(shell_set_envs(envs))
        state.update(seq=count, err_tail="", restore=shell_restore_envs(envs))
        state["running"] = True
        # Its standard input is /dev/null: a cell reading it must not
        # eat the next command line. `command .`: an error of a special
        # builtin (`.` of a cell that does not parse) would otherwise make
        # an interactive sh drop the input it has read, the mark with it.
        # The mark is a line of its own, $? lasting to it; it undoes the
        # cell's envs (so does an interrupt's mark: the shell drops this
        # one then).
        line(("command . %s; " % env_path if envs else "") + "command . %s </dev/null" % path)
        line(mark(count, restore=state["restore"]))
        status = wait_mark(count)
        state["running"] = False
        for p in (path, env_path):
            try:
                os.unlink(p)
            except OSError:
                pass
        if status is None:
            # `exit` in a cell, or the shell killed: this worker ends
            # with it and the server starts a fresh context.
            sys.exit(sh.wait())
        if status == 130:
            send({"t": "error", "name": "KeyboardInterrupt", "value": "the cell was interrupted",
                  "traceback": state["err_tail"]})
        elif status != 0:
            send({"t": "error", "name": "NonZeroExit", "value": "exit status %d" % status,
                  "traceback": state["err_tail"]})

    try:
        serve_cells(requests, send, cell)
    finally:
        # However it ends (its shell's exit, or the server gone: the end
        # of its requests), its cells go with it; the server's removal
        # (Context.gone) is for a worker killed.
        shutil.rmtree(cells, ignore_errors=True)


def shell_set_envs(envs):
    """A cell's environment variables as sh: each name's earlier value (or
    its absence) kept in __kiln_old_NAME / __kiln_had_NAME for
    shell_restore_envs, then the new one exported. Names are checked
    (ENV_NAME), values single-quoted, so nothing here is code of the
    caller's."""
    out = []
    for k, v in envs.items():
        out.append("if [ \"${%s+x}\" = x ]; then __kiln_old_%s=$%s; __kiln_had_%s=1; else __kiln_had_%s=; fi"
                   % (k, k, k, k, k))
        out.append("%s='%s'; export %s" % (k, v.replace("'", "'\\''"), k))
    return "\n".join(out) + "\n"


def shell_restore_envs(envs):
    """The line that undoes shell_set_envs ("" for none): the earlier value
    back, or the name unset. Running it twice is harmless."""
    return "; ".join("if [ -n \"${__kiln_had_%s-}\" ]; then %s=$__kiln_old_%s; else unset %s; fi" % (k, k, k, k)
                     for k in envs)


def cells_dir(pid):
    """Where a shell worker keeps its cells (removed as it ends, or by the
    server when the worker was killed)."""
    return os.path.join(tempfile.gettempdir(), "kiln-cells-%d" % pid)


def codecs_decoder():
    import codecs
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


# ---- the javascript worker: node, its globals kept --------------------------------------------------

# Run as `node -e NODE_WORKER CWD`: requests on stdin, messages on fd 1 (which
# nothing else writes: console, process.stdout and process.stderr of user
# code become messages). A cell is a script run in node's own global
# context, so its var, let, const, function and class declarations and
# its globals last; its completion value (the last expression's) is the
# result, awaited when it is a promise. `await` at the top level runs the
# cell as node's REPL does (asyncCell): its declarations last all the same. An interrupt (SIGINT) ends a running script
# (breakOnSigint) or the wait for its promise: KeyboardInterrupt.
NODE_WORKER = r"""
// In a function: its names must not be globals a cell's `const fs` meets.
(function () {
'use strict';
const vm = require('vm'), fs = require('fs'), util = require('util'), { Console } = require('console');
const Module = require('module');
const MAX_TEXT = 1 << 20;
function send(m) {
  const b = Buffer.from(JSON.stringify(m) + '\n');
  for (let off = 0; off < b.length;) {
    try { off += fs.writeSync(1, b, off); } catch (e) { if (e.code !== 'EAGAIN') throw e; }
  }
}
function sink(name) {
  return {
    write(chunk, enc, cb) {
      const s = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
      for (let i = 0; i < s.length; i += MAX_TEXT) send({ t: name, text: s.slice(i, i + MAX_TEXT) });
      if (typeof enc === 'function') enc(); else if (typeof cb === 'function') cb();
      return true;
    },
    isTTY: false, columns: 80, end() {},
    on() { return this; }, once() { return this; }, off() { return this; },
    removeListener() { return this; }, emit() { return false; }, listenerCount() { return 0; },
  };
}
const out = sink('stdout'), err = sink('stderr');
Object.defineProperty(process, 'stdout', { configurable: true, enumerable: true, get: () => out });
Object.defineProperty(process, 'stderr', { configurable: true, enumerable: true, get: () => err });
globalThis.console = new Console({ stdout: out, stderr: err, colorMode: false });
if (process.argv[1]) process.chdir(process.argv[1]);
globalThis.require = Module.createRequire(process.cwd() + '/');
globalThis.module = { exports: {} };
globalThis.exports = globalThis.module.exports;
let interrupt = null;
process.on('SIGINT', () => { if (interrupt) interrupt(); });
process.on('uncaughtException', (e) => send({ t: 'stderr', text: 'Uncaught ' + (e && e.stack || String(e)) + '\n' }));
process.on('unhandledRejection', (e) => send({ t: 'stderr', text: 'Unhandled rejection ' + (e && e.stack || String(e)) + '\n' }));
class KeyboardInterrupt extends Error {}
KeyboardInterrupt.prototype.name = 'KeyboardInterrupt';
// The cell's frames, not this program's or node's.
const OWN_FRAME = /\(?(node:vm|node:internal|\[eval\])|sigintHandlersWrap|processTicksAndRejections/;
function errorMessage(e) {
  if (e instanceof KeyboardInterrupt || (e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED')) {
    return { t: 'error', name: 'KeyboardInterrupt', value: 'the cell was interrupted', traceback: '' };
  }
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e && 'message' in e)) {
    const tb = String(e.stack || '').split('\n').filter((l) => !(/^\s+at /.test(l) && OWN_FRAME.test(l))).join('\n');
    return { t: 'error', name: String(e.name || 'Error'), value: String(e.message), traceback: tb };
  }
  return { t: 'error', name: 'Thrown', value: util.inspect(e), traceback: '' };
}
function formats(v) {
  const data = { 'text/plain': util.inspect(v, { depth: 4, colors: false }) };
  if (v !== null && typeof v === 'object' && (Array.isArray(v) || Object.getPrototypeOf(v) === Object.prototype)) {
    try { data['application/json'] = JSON.parse(JSON.stringify(v)); } catch (e) { /* not JSON */ }
  }
  return data;
}
function settle(p) {
  return new Promise((resolve, reject) => {
    interrupt = () => reject(new KeyboardInterrupt('the cell was interrupted'));
    Promise.resolve(p).then(resolve, reject);
  }).finally(() => { interrupt = null; });
}
// A cell with await at its top level, rewritten as node's own REPL does
// (internal/repl/await, reached with --expose-internals): its top-level
// var, let, const, function and class declarations are hoisted out of
// the async function that runs the rest, so they last to the next cell as
// a plain cell's do; the value is {value: last expression}. Without that
// module (another node), the cell is an async function of its own whose
// declarations are its own.
let processTopLevelAwait = null;
try { processTopLevelAwait = require('internal/repl/await').processTopLevelAwait; } catch (e) { /* older or newer node */ }
function asyncCell(code, filename) {
  if (processTopLevelAwait) {
    let wrapped = null;
    try { wrapped = processTopLevelAwait(code); } catch (e) { /* what it cannot parse: the fallback below */ }
    if (wrapped) {
      try { return { script: new vm.Script(wrapped, { filename }), boxed: true }; } catch (e) { /* fallback */ }
    }
  }
  const lines = code.replace(/\s+$/, '').split('\n');
  const last = lines.pop().replace(/;\s*$/, '');
  try {
    return { script: new vm.Script('(async () => {\n' + lines.join('\n') + '\nreturn (' + last + '\n);\n})()',
                                   { filename, lineOffset: -1 }), boxed: false };
  } catch (e) {
    return { script: new vm.Script('(async () => {\n' + code + '\n})()', { filename, lineOffset: -1 }), boxed: false };
  }
}
// A cell's envs in process.env (and so in what it spawns) until it ends:
// the function that undoes them.
function setEnvs(envs) {
  const saved = [];
  for (const k of Object.keys(envs || {})) {
    saved.push([k, Object.prototype.hasOwnProperty.call(process.env, k), process.env[k]]);
    process.env[k] = String(envs[k]);
  }
  return () => {
    for (const [k, had, v] of saved.reverse()) {
      if (had) process.env[k] = v; else delete process.env[k];
    }
  };
}
let count = 0;
async function cell(req) {
  count++;
  const code = String(req.code), filename = '<cell-' + count + '>';
  const restore = setEnvs(req.envs);
  try {
    let script, boxed = false;
    try {
      script = new vm.Script(code, { filename });
    } catch (e) {
      if (!(e instanceof SyntaxError) || !/await/.test(e.message)) throw e;
      ({ script, boxed } = asyncCell(code, filename));
    }
    let v = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (v !== null && (typeof v === 'object' || typeof v === 'function') && typeof v.then === 'function') v = await settle(v);
    if (boxed) v = v === undefined || v === null ? undefined : v.value;
    if (v !== undefined) send({ t: 'result', main: true, data: formats(v) });
  } catch (e) {
    send(errorMessage(e));
  } finally {
    restore();
  }
  send({ t: 'end', count });
}
let chain = Promise.resolve(), pending = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  pending += d;
  let i;
  while ((i = pending.indexOf('\n')) >= 0) {
    const ln = pending.slice(0, i);
    pending = pending.slice(i + 1);
    let req;
    try { req = JSON.parse(ln); } catch (e) { continue; }
    chain = chain.then(() => (req.ping ? send({ t: 'end', count }) : cell(req)));
  }
});
process.stdin.on('end', () => process.exit(0));
})();
"""

# ---- the zygote: workers forked, not started -------------------------------------------------------

# A python, bash or sh context's worker is forked from one process that
# has imported this file and the preloads once (the zygote), instead of
# being a Python interpreter of its own that starts and imports them: a
# new context costs a fork, not seconds (a Python start in a small VM; the
# code-interpreter template's numpy, pandas and matplotlib imports, most
# of them), and its workers share those modules' pages with the zygote.
# The server and the zygote speak over a SOCK_SEQPACKET pair: a request
# (JSON) carries the worker's two pipe ends; the zygote forks and answers
# with the child's pid and a pidfd of it, which the server signals (a
# pidfd cannot reach a process that reused the pid); the zygote is the
# worker's parent, so it reaps it and sends its exit status. If the
# zygote cannot start or dies, contexts start as processes of their own
# (the path before it) until one starts again. KILN_INTERP_ZYGOTE=0 turns
# it off (bench/interp-contexts compares the two).

class ForkedProc:
    """A worker the zygote forked: what Context and run() use of a Popen."""

    def __init__(self, pid, pidfd):
        self.pid, self.pidfd = pid, pidfd
        self.stdin = self.stdout = None
        self.returncode = None
        self.orphaned = False           # the zygote died: no status will come
        self._ended = threading.Event()

    def ended(self, status):
        self.returncode = status
        self._ended.set()

    def poll(self):
        if self._ended.is_set():
            return self.returncode
        if select.select([self.pidfd], [], [], 0)[0]:
            return self.wait()
        return None

    def wait(self):
        # A pidfd is readable once its process has ended; its status comes
        # from the zygote, which reaps it at once.
        select.select([self.pidfd], [], [])
        if not self._ended.wait(0 if self.orphaned else 10):
            self.ended("unknown")
        return self.returncode

    def send_signal(self, sig):
        try:
            signal.pidfd_send_signal(self.pidfd, sig)
        except OSError:
            pass                        # it has ended

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def __del__(self):
        try:
            os.close(self.pidfd)
        except (OSError, AttributeError):
            pass


class ZygoteClient:
    """The server's side of one zygote process."""

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen([sys.executable, "-u", __file__, "zygote", str(theirs.fileno()), PRELOAD],
                                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        finally:
            theirs.close()
        self.sock = ours
        self.lock = threading.Lock()    # one request at a time: answers come in order
        self.answers = []
        self.answered = threading.Condition()
        self.procs = {}                 # pid -> ForkedProc, until its exit status comes
        self.dead = False
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        while True:
            try:
                msg, fds, _, _ = socket.recv_fds(self.sock, 4096, 1)
            except OSError:
                msg, fds = b"", []
            if not msg:
                break
            try:
                m = json.loads(msg)
            except ValueError:
                m = {}
            if "pid" in m and fds:
                p = ForkedProc(m["pid"], fds[0])
                self.procs[p.pid] = p
                answer = p
            elif "exit" in m:
                p = self.procs.pop(m["exit"], None)
                if p is not None:
                    p.ended(m.get("status"))
                continue
            else:
                for fd in fds:
                    os.close(fd)
                answer = m.get("error") or "a bad answer"
            with self.answered:
                self.answers.append(answer)
                self.answered.notify_all()
        with self.answered:
            self.dead = True
            for p in self.procs.values():
                p.orphaned = True
            self.answered.notify_all()
        self.sock.close()
        try:
            self.proc.kill()
            self.proc.wait()
        except OSError:
            pass

    def spawn(self, language, cwd):
        """A worker of language in cwd, forked; None where the zygote
        cannot (it is gone, or its fork failed: said in the log)."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        with self.lock:     # one request in flight: its answer is the next one
            try:
                socket.send_fds(self.sock, [json.dumps({"language": language, "cwd": cwd}).encode()], [in_r, out_w])
                # No time limit: the zygote's first answer waits for its
                # imports, which took minutes in a loaded emulated host (a
                # worker of its own would take as long); a zygote that dies
                # ends the wait.
                with self.answered:
                    self.answered.wait_for(lambda: self.answers or self.dead)
                    answer = self.answers.pop(0) if self.answers else "it ended"
            except OSError as e:
                answer = str(e)
        os.close(in_r)
        os.close(out_w)
        if isinstance(answer, ForkedProc):
            answer.stdin = os.fdopen(in_w, "w", buffering=1, encoding="utf-8")
            answer.stdout = os.fdopen(out_r, "r", encoding="utf-8")
            return answer
        print("kiln_interp: the zygote did not fork a %s worker: %s" % (language, answer), file=sys.stderr)
        os.close(in_w)
        os.close(out_r)
        return None


_zygote = [None]
_zygote_lock = threading.Lock()


def zygote_client():
    """The live zygote, started (again) if it is not; None where it is
    turned off or cannot start."""
    if os.environ.get("KILN_INTERP_ZYGOTE") == "0":
        return None
    if not (hasattr(socket, "send_fds") and hasattr(os, "pidfd_open")):
        return None     # a Python before 3.9 (a user's image): workers of their own
    with _zygote_lock:
        z = _zygote[0]
        if z is None or z.dead:
            try:
                z = _zygote[0] = ZygoteClient()
            except OSError as e:
                print("kiln_interp: the zygote did not start: %s" % e, file=sys.stderr)
                z = _zygote[0] = None
        return z


def zygote(fd, preload):
    """The zygote's loop: fork a worker for each request, answer with its
    pid and a pidfd, and send each worker's exit status when it ends. It
    ends when the server does (its socket's end)."""
    sock = socket.socket(fileno=fd)
    os.environ.setdefault("MPLBACKEND", "Agg")
    for mod in filter(None, preload.split(",")):
        try:
            importlib.import_module(mod)
        except Exception as e:
            print("kiln_interp: preload %s: %s" % (mod, e), file=sys.stderr)
    import gc
    gc.freeze()     # what is imported stays out of the collector: its pages stay shared
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda sig, frame: None)
    while True:
        ready = select.select([sock, wake_r], [], [])[0]
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                try:
                    sock.send(json.dumps({"exit": pid, "status": os.waitstatus_to_exitcode(status)}).encode())
                except OSError:
                    os._exit(0)     # the server is gone
        if sock not in ready:
            continue
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 4096, 2)
        except OSError:
            msg, fds = b"", []      # a server killed resets the pair
        if not msg:
            os._exit(0)
        try:
            req = json.loads(msg)
            language, cwd = req["language"], req["cwd"]
            if len(fds) != 2 or language not in ("python", "bash", "sh") or not isinstance(cwd, str):
                raise ValueError("a bad request")
            pid = os.fork()
        except (ValueError, KeyError, TypeError, OSError) as e:
            for f in fds:
                os.close(f)
            try:
                sock.send(json.dumps({"error": str(e)}).encode())
            except OSError:
                os._exit(0)
            continue
        if pid == 0:
            _forked(language, cwd, fds, sock, (wake_r, wake_w))
        for f in fds:
            os.close(f)
        pidfd = os.pidfd_open(pid)
        try:
            socket.send_fds(sock, [json.dumps({"pid": pid}).encode()], [pidfd])
        except OSError:
            os._exit(0)
        os.close(pidfd)


def _forked(language, cwd, fds, sock, wake):
    """A worker, in the zygote's child: what `worker` or `shell` would
    have been as a process of its own. Never returns."""
    status = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for f in wake:
            os.close(f)
        os.setsid()
        os.dup2(fds[0], 0)
        os.dup2(fds[1], 1)
        for f in fds:
            os.close(f)
        if language == "python":
            worker(cwd, PRELOAD)
        else:
            shell_worker(language, cwd)
        status = 0
    except SystemExit as e:
        # As a process of its own would end: the shell worker ends with
        # its shell's status (sys.exit), which the caller reports.
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(status)


# ---- the server: contexts and connections ---------------------------------------------------------

class Unsupported(Exception):
    """A language this sandbox cannot run (javascript without node)."""


def kill_session(sid):
    """Every process of a context: its worker leads a session of its own,
    so what a cell started (a shell's children, a background job) ends
    with it."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid, "rb") as f:
                stat = f.read()
            fields = stat[stat.rindex(b")") + 2:].split()
            if int(fields[3]) == sid:
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass


class Context:
    def __init__(self, cid, cwd, language="python"):
        self.id, self.cwd, self.language = cid, cwd, language
        self.lock = threading.Lock()    # one cell at a time
        self.proc = None
        self.start()

    def start(self):
        if self.language in ("python", "bash", "sh"):
            z = zygote_client()
            if z is not None:
                self.proc = z.spawn(self.language, self.cwd or "")
                if self.proc is not None:
                    return
        if self.language == "python":
            argv = [sys.executable, "-u", __file__, "worker", self.cwd or "", PRELOAD]
        elif self.language in ("bash", "sh"):
            argv = [sys.executable, "-u", __file__, "shell", self.language, self.cwd or ""]
        else:
            argv = ["node", "--expose-internals", "-e", NODE_WORKER, self.cwd or ""]
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         encoding="utf-8", bufsize=1, start_new_session=True)
        except FileNotFoundError:
            self.proc = None
            raise Unsupported("%s contexts need %s, which this sandbox does not have (the code-interpreter "
                              "template has it)" % (self.language, argv[0])) from None

    def stop(self):
        if self.proc:
            kill_session(self.proc.pid)
            self.proc.kill()
            self.proc.wait()
            self.gone()

    def gone(self):
        """What a worker that ended leaves: its cells (a shell's)."""
        if self.language in ("bash", "sh"):
            shutil.rmtree(cells_dir(self.proc.pid), ignore_errors=True)

    def restart(self):
        self.stop()
        self.start()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def describe(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}


contexts = {}
contexts_lock = threading.Lock()
PRELOAD = ""    # modules every python worker imports at start (--preload, kiln_interp.preload)


def default_id(language):
    return "default" if language == "python" else "default-" + language


def get_context(cid, language=None):
    """The context cid (a language's default one is made when first
    asked for), or None."""
    with contexts_lock:
        ctx = contexts.get(cid)
        if ctx is None:
            for lang in LANGUAGES:
                if cid == default_id(lang) and (language or "python") == lang:
                    ctx = contexts[cid] = Context(cid, None, lang)
        return ctx


def envs_problem(envs):
    """Why a cell's envs cannot be set (None: they can). kilnd checks the
    same (src/api/h_code.c); this is for whoever else talks to the port,
    and what the shell worker relies on to put a name in a command line."""
    if not isinstance(envs, dict):
        return "envs must be an object of strings"
    if len(envs) > MAX_ENVS:
        return "envs has more than %d variables" % MAX_ENVS
    for k, v in envs.items():
        if not ENV_NAME.fullmatch(k):
            return "envs: %r is not a variable name ([A-Za-z_][A-Za-z0-9_]*)" % k[:64]
        if not isinstance(v, str) or "\0" in v or len(v.encode()) > MAX_ENV_VALUE:
            return "envs: %r must be a string of at most %d bytes without NUL" % (k, MAX_ENV_VALUE)
    return None


def run(conn, send, req):
    language = req.get("language")
    if language is not None and language not in LANGUAGES:
        return send({"t": "fail", "code": "invalid_request", "message": "unknown language %r" % language})
    cid = req.get("context") or default_id(language or "python")
    ctx = get_context(cid, language)
    if ctx is None:
        return send({"t": "fail", "code": "not_found", "message": "no context %r" % req.get("context")})
    if language is not None and ctx.language != language:
        return send({"t": "fail", "code": "invalid_request",
                     "message": "context %r is a %s context, not %s" % (cid, ctx.language, language)})
    code = req.get("code")
    if not isinstance(code, str) or len(code) > MAX_CELL:
        return send({"t": "fail", "code": "invalid_request", "message": "code must be text of at most 4 MiB"})
    envs = req.get("envs") or {}
    bad = envs_problem(envs)
    if bad:
        return send({"t": "fail", "code": "invalid_request", "message": bad})
    timeout = req.get("timeout") or 0
    max_output = req.get("max_output")
    if not isinstance(max_output, int) or max_output <= 0:
        max_output = MAX_OUTPUT
    with ctx.lock:
        if not ctx.alive():
            ctx.restart()
        p = ctx.proc
        try:
            p.stdin.write(json.dumps({"code": code, "envs": envs}) + "\n")
            p.stdin.flush()
        except OSError:
            pass    # it died just now: told below, as any death mid-cell
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
                            kill_session(p.pid)
                            p.kill()
                    return

        g = threading.Thread(target=guard, daemon=True)
        g.start()
        ended = False
        left = max_output   # stdout and stderr bytes still passed on
        truncated = False
        for line in p.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if not isinstance(msg, dict):
                continue
            t = msg.get("t")
            if t in ("stdout", "stderr"):
                data = str(msg.get("text", "")).encode("utf-8", "replace")
                if len(data) > left:
                    truncated = True
                    data = data[:left]
                    if not data:
                        continue
                    msg = {"t": t, "text": data.decode("utf-8", "ignore")}
                left -= len(data)
            if t == "end":
                msg["truncated"] = truncated
                # Before the client hears it: once it has, it closes the
                # connection, which the guard must not take for leaving.
                with state_lock:
                    state["done"] = True
            if t == "error" and state["why"] == "timeout" and msg.get("name") == "KeyboardInterrupt":
                msg = {"t": "error", "name": "TimeoutError",
                       "value": "the cell ran past its %s s limit and was interrupted" % timeout,
                       "traceback": msg.get("traceback", "")}
            try:
                send(msg)
            except OSError:
                pass
            if t == "end":
                ended = True
                break
        with state_lock:
            state["done"] = True
        if not ended:
            status = p.wait()
            kill_session(p.pid)
            ctx.gone()
            try:
                ctx.start()
            except Unsupported:
                pass
            why = ("the cell ran past its %s s limit" % timeout if state["why"] == "timeout"
                   else "the context's %s process exited (status %s)" % (ctx.language, status))
            try:
                send({"t": "error", "name": "InterpreterDied" if state["why"] != "timeout" else "TimeoutError",
                      "value": why + "; the context was restarted empty", "traceback": ""})
                send({"t": "end", "count": 0, "truncated": truncated})
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
            language = req.get("language") or "python"
            if language not in LANGUAGES:
                return send({"t": "fail", "code": "invalid_request",
                             "message": "language %r: contexts are %s" % (language, ", ".join(LANGUAGES))})
            cid = "ctx-" + secrets.token_hex(6)
            ctx = Context(cid, req.get("cwd") or None, language)
            with contexts_lock:
                contexts[cid] = ctx
            send(dict(t="context", **ctx.describe()))
        elif op == "ready":
            ctx = get_context("default")
            with ctx.lock:
                if not ctx.alive():
                    ctx.restart()
                ctx.proc.stdin.write(json.dumps({"ping": True}) + "\n")
                ctx.proc.stdin.flush()
                for line in ctx.proc.stdout:
                    try:
                        if json.loads(line).get("t") == "end":
                            break
                    except (ValueError, AttributeError):
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
    except Unsupported as e:
        try:
            send({"t": "fail", "code": "unsupported", "message": str(e)})
        except OSError:
            pass
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


def _preload(args):
    """--preload's list, or the one in kiln_interp.preload beside this file
    (a template's: kilnd restarting the server gets the same preloads)."""
    if "--preload" in args[:-1]:
        return args[args.index("--preload") + 1]
    try:
        with open(os.path.splitext(os.path.abspath(__file__))[0] + ".preload", encoding="utf-8") as f:
            return f.read(4096).strip()
    except OSError:
        return ""


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2] if len(sys.argv) > 2 else "", sys.argv[3] if len(sys.argv) > 3 else "")
    elif len(sys.argv) > 2 and sys.argv[1] == "zygote":
        PRELOAD = sys.argv[3] if len(sys.argv) > 3 else ""
        zygote(int(sys.argv[2]), PRELOAD)
    elif len(sys.argv) > 2 and sys.argv[1] == "shell":
        shell_worker(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
    elif len(sys.argv) > 1 and sys.argv[1] == "start":
        PRELOAD = _preload(sys.argv)
        start()
    else:
        PRELOAD = _preload(sys.argv)
        serve()
