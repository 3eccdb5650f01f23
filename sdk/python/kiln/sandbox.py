"""Sandboxes: create, find, run commands and code, files, lifecycle."""

from __future__ import annotations

import base64
import codecs
import json
import math
import urllib.parse
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .client import Client, _id, argv_or_cmd, clean, resolve, str_map
from .commands import Commands
from .errors import ConnectionFailed, ForkError, NotFound, error_for
from .files import Files
from .code import LANGUAGES, Code, CodeContext, ContextLike, Execution, ExecutionError, Result, language_of
from .processes import Processes
from .pty import Pty
from .types import ExecResult, Snapshot

Command = Union[str, Sequence[str]]
OutputCallback = Callable[[str], None]

# An SSE stream sends a keepalive every 15 s: a minute of silence is a dead
# connection, whatever the command does.
STREAM_SILENCE_S = 60.0


class Sandbox:
    """A kiln sandbox: a microVM with its own kernel, forked from a template.

    Use it as a context manager to delete it when the block ends, however
    it ends::

        with Sandbox.create(template="base") as sb:
            print(sb.exec("uname -a").stdout)
    """

    def __init__(self, client: Client, info: Mapping[str, Any]) -> None:
        self._client = client
        self._info: Dict[str, Any] = dict(info)
        self.id: str = self._info["id"]
        self.files = Files(self)
        self.processes = Processes(self)
        self.code = Code(self)
        # E2B's names for running commands (docs/migrating.md).
        self.commands = Commands(self)

    # ---- finding and making ------------------------------------------------------------------------

    @classmethod
    def create(cls, template: Optional[str] = None, *, ttl_seconds: Optional[int] = None,
               persistent: Optional[bool] = None, idle_pause_seconds: Optional[int] = None,
               metadata: Optional[Mapping[str, str]] = None, env: Optional[Mapping[str, str]] = None,
               allow_out: Optional[Sequence[str]] = None, deny_out: Optional[Sequence[str]] = None,
               allow_internet: Optional[bool] = None, from_snapshot: Optional[str] = None,
               volumes: Optional[Sequence[Mapping[str, Any]]] = None,
               disk_mib: Optional[int] = None,
               api_url: Optional[str] = None, api_key: Optional[str] = None,
               client: Optional[Client] = None) -> "Sandbox":
        """Create a sandbox from a template (default ``base``) or a snapshot.
        It is running when this returns.

        ``ttl_seconds`` is an idle timeout (0: never); ``persistent=True``
        makes that timeout hibernate the sandbox instead of deleting it
        (the next request wakes it; docs/api.md); ``idle_pause_seconds``
        pauses it after that long without a request, before the timeout
        acts (a request resumes it; docs/api.md "Pausing when idle"); ``env`` the
        environment of every command; ``allow_out`` a list of CIDRs the
        sandbox may reach (only those), ``deny_out`` CIDRs it may never
        reach, ``allow_internet=False`` nothing at all (docs/network.md);
        ``volumes`` named volumes to mount, each ``{"name": N, "path":
        "/data", "read_only": False}`` (kiln.Volume; docs/api.md "Volumes");
        ``disk_mib`` a root disk of that many MiB, at least the template's
        (or snapshot's) and at most the plan's, its filesystem grown to all
        of it before this returns (docs/templates.md "A sandbox's disk
        size"; default: the template's size)."""
        c = resolve(client, api_url, api_key)
        if template is not None and from_snapshot is not None:
            raise ValueError("give either template or from_snapshot, not both")
        body = clean({
            "template": template, "from_snapshot": from_snapshot, "ttl_seconds": ttl_seconds,
            "persistent": persistent, "idle_pause_seconds": idle_pause_seconds,
            "metadata": str_map("metadata", metadata), "env": str_map("env", env),
            "allow_out": list(allow_out) if allow_out is not None else None,
            "deny_out": list(deny_out) if deny_out is not None else None,
            "allow_internet": allow_internet,
            "volumes": [dict(v) for v in volumes] if volumes is not None else None,
            "disk_mib": disk_mib,
        })
        return cls(c, c.transport.request("POST", "/v1/sandboxes", json_body=body).json())

    @classmethod
    def get(cls, sandbox_id: str, *, api_url: Optional[str] = None, api_key: Optional[str] = None,
            client: Optional[Client] = None) -> "Sandbox":
        """The sandbox with this id (NotFound if there is none in the workspace)."""
        c = resolve(client, api_url, api_key)
        return cls(c, c.transport.request("GET", "/v1/sandboxes/" + _id(sandbox_id)).json())

    @classmethod
    def list(cls, *, status: Optional[str] = None, template: Optional[str] = None,
             metadata: Optional[Mapping[str, str]] = None, limit: Optional[int] = None,
             api_url: Optional[str] = None, api_key: Optional[str] = None,
             client: Optional[Client] = None) -> List["Sandbox"]:
        """The workspace's sandboxes that have not ended, oldest first: those
        of that status, template and metadata (every key/value must match),
        all of them (the pages followed) or the first ``limit``."""
        c = resolve(client, api_url, api_key)
        out: List["Sandbox"] = []
        cursor: Optional[str] = None
        while limit is None or len(out) < limit:
            page, cursor = cls.list_page(status=status, template=template, metadata=metadata,
                                         limit=min(1000, limit - len(out)) if limit is not None else 1000,
                                         cursor=cursor, client=c)
            out.extend(page)
            if cursor is None:
                break
        return out

    @classmethod
    def list_page(cls, *, status: Optional[str] = None, template: Optional[str] = None,
                  metadata: Optional[Mapping[str, str]] = None, limit: Optional[int] = None,
                  cursor: Optional[str] = None, api_url: Optional[str] = None,
                  api_key: Optional[str] = None,
                  client: Optional[Client] = None) -> Tuple[List["Sandbox"], Optional[str]]:
        """One page of the list (``limit`` 1 to 1000, default 100) and the
        cursor of the next (None on the last): pass it as ``cursor``."""
        c = resolve(client, api_url, api_key)
        query: Dict[str, Any] = {"status": status, "template": template, "limit": limit, "cursor": cursor}
        for k, v in (metadata or {}).items():
            query["metadata." + k] = v
        j = c.transport.request("GET", "/v1/sandboxes", query=query).json()
        return [cls(c, s) for s in j["sandboxes"]], j.get("next_cursor")

    # ---- what it is ------------------------------------------------------------------------------------

    @property
    def client(self) -> Client:
        return self._client

    @property
    def info(self) -> Dict[str, Any]:
        """The sandbox as the server last described it (docs/api.md, Sandbox)."""
        return dict(self._info)

    @property
    def status(self) -> str:
        return str(self._info.get("status", ""))

    @property
    def template(self) -> str:
        return str(self._info.get("template", ""))

    @property
    def metadata(self) -> Dict[str, str]:
        return dict(self._info.get("metadata") or {})

    @property
    def ttl_seconds(self) -> int:
        return int(self._info.get("ttl_seconds", 0))

    @property
    def parent_id(self) -> Optional[str]:
        return self._info.get("parent_id")

    @property
    def disk_mib(self) -> Optional[int]:
        """The size of its root disk in MiB: the template's, or the
        create's ``disk_mib`` (None: made before kilnd kept it)."""
        return self._info.get("disk_mib")

    @property
    def ready_ms(self) -> Optional[float]:
        return self._info.get("ready_ms")

    def refresh(self) -> "Sandbox":
        """Read the sandbox's state again from the server."""
        self._info = self._get("").json()
        return self

    def __repr__(self) -> str:
        return f"<Sandbox {self.id} {self.status} {self.template}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sandbox) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    # ---- requests ----------------------------------------------------------------------------------------

    @property
    def _path(self) -> str:
        return "/v1/sandboxes/" + _id(self.id)

    def _get(self, sub: str, **kw: Any) -> Any:
        return self._client.transport.request("GET", self._path + sub, **kw)

    def _post(self, sub: str, body: Optional[Mapping[str, Any]] = None, **kw: Any) -> Any:
        return self._client.transport.request("POST", self._path + sub, json_body=dict(body or {}), **kw)

    # ---- commands ------------------------------------------------------------------------------------------

    def exec(self, cmd: Command, *, timeout: Optional[int] = None, env: Optional[Mapping[str, str]] = None,
             cwd: Optional[str] = None, stdin: Optional[str] = None, user: Optional[str] = None) -> ExecResult:
        """Run a command to its end. A string runs with /bin/sh -c; a list
        is the argv. ``timeout`` (seconds) kills it (result.timed_out);
        ``user`` runs it as that guest user (name, uid or "uid:gid").
        A non-zero exit is a result, not an exception."""
        body = _exec_body(cmd, timeout, env, cwd, stdin, user)
        # The HTTP answer comes when the command ends: wait for it (without
        # a bound when the command has none: 0 is no limit).
        wait = None if not timeout else timeout + 60.0
        return ExecResult.from_json(self._post("/exec", body, timeout=wait).json())

    def exec_stream(self, cmd: Command, *, on_stdout: Optional[OutputCallback] = None,
                    on_stderr: Optional[OutputCallback] = None, timeout: Optional[int] = None,
                    env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                    stdin: Optional[str] = None, user: Optional[str] = None) -> ExecResult:
        """Run a command, handing its output to on_stdout / on_stderr as it
        comes (before the command ends), and return how it ended with all
        of its output. If a callback raises, the connection is closed, which
        kills the command, and the exception propagates. ``user`` as for
        exec."""
        outs: Dict[str, List[str]] = {"stdout": [], "stderr": []}
        callbacks = {"stdout": on_stdout, "stderr": on_stderr}
        result: Optional[Mapping[str, Any]] = None
        for kind, text in self._stream(cmd, timeout, env, cwd, stdin, user):
            if kind == "exit":
                result = json.loads(text)
                continue
            outs[kind].append(text)
            cb = callbacks[kind]
            if cb is not None:
                cb(text)
        if result is None:
            raise ConnectionFailed("the output stream ended without the command's exit", "stream_ended")
        return ExecResult.from_json(result, "".join(outs["stdout"]), "".join(outs["stderr"]))

    def _stream(self, cmd: Command, timeout: Optional[int], env: Optional[Mapping[str, str]],
                cwd: Optional[str], stdin: Optional[str],
                user: Optional[str] = None) -> Iterator[Tuple[str, str]]:
        """(stdout|stderr, text) as chunks arrive, then (exit, its JSON).
        Bytes are decoded as UTF-8 across chunk boundaries (a character split
        between two chunks comes out whole); invalid bytes become U+FFFD."""
        body = _exec_body(cmd, timeout, env, cwd, stdin, user)
        with self._client.transport.open("POST", self._path + "/exec/stream", json_body=body,
                                         timeout=STREAM_SILENCE_S, ok=(200,),
                                         headers={"Accept": "text/event-stream"}) as r:
            for event, data, j in output_events(r.chunks()):
                if event in ("stdout", "stderr", "exit"):
                    yield event, data
                elif event == "error":
                    raise error_for(None, str(j.get("code", "error")), str(j.get("message", "")))

    def run_code(self, code: str, language: Optional[str] = None, *, context: Optional[ContextLike] = None,
                 timeout: Optional[int] = None, envs: Optional[Mapping[str, str]] = None,
                 env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                 on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None,
                 on_result: Optional[Callable[[Result], None]] = None,
                 on_error: Optional[Callable[[ExecutionError], None]] = None) -> Execution:
        """Run code, as E2B's ``run_code``: in the sandbox's code interpreter,
        in ``context`` or the language's default context, which keeps its
        state between calls: python's variables (``x = 41``, then ``x + 1``
        is 42), bash's and sh's variables, functions, exports and working
        directory, javascript's globals (node: the code-interpreter
        template has it; a cell may ``await`` at top level, its value the
        awaited one, its ``let``/``const`` kept for the next cell).
        ``language`` is python (default), bash, sh or
        javascript (js, node); with a ``context``, the context's. An
        error is ``execution.error`` (name, value, traceback; bash: a
        failing last command is NonZeroExit), the context lives on.
        ``envs`` are environment variables of this cell only, as E2B's.
        ``env`` and ``cwd`` are refused: envs is the cell's, and a context
        has its own working directory (``create_code_context(cwd=...)``,
        ``cd`` in bash)."""
        lang = language_of(language)
        if env is not None or cwd is not None:
            raise ValueError("env and cwd: a cell's variables are envs=; a context keeps its own working "
                             "directory: create_code_context(cwd=...), or cd in a bash cell (it lasts)")
        if lang is None and context is None:
            lang = "python"
        return self.code.run(code, language=lang, context=context, timeout=timeout, envs=envs, on_stdout=on_stdout,
                             on_stderr=on_stderr, on_result=on_result, on_error=on_error)

    # E2B's names for contexts (docs/migrating.md).
    def create_code_context(self, cwd: Optional[str] = None, language: Optional[str] = None) -> CodeContext:
        """A new context of ``language`` (default python) with its own state."""
        return self.code.create_context(cwd=cwd, language=language)

    def list_code_contexts(self) -> List[CodeContext]:
        return self.code.list_contexts()

    def restart_code_context(self, context: ContextLike) -> None:
        self.code.restart_context(context)

    def remove_code_context(self, context: ContextLike) -> None:
        self.code.delete_context(context)

    # ---- terminal ------------------------------------------------------------------------------------------------

    def pty(self, *, cols: Optional[int] = None, rows: Optional[int] = None, cmd: Optional[str] = None) -> Pty:
        """An interactive terminal (a WebSocket): the login shell, or ``cmd``
        run by the shell; ``cols`` and ``rows`` 1 to 1000 (default 80x24).
        Raises NotFound for a sandbox that is not there, InvalidRequest for
        a bad size, as the other calls."""
        return Pty.open(self._client.transport, self._path + "/pty", cols=cols, rows=rows, cmd=cmd)

    # ---- logs --------------------------------------------------------------------------------------------------

    def logs(self, tail: int = 200) -> List[Dict[str, Any]]:
        """The last ``tail`` lines (0 to 10000) of the sandbox's console, oldest
        first, each {"source": "console"|"init", "text": ..., "ts": None}
        (docs/api.md, Logs). Reading logs is not activity (TTL)."""
        j = self._client.transport.request("GET", self._path + "/logs", query={"tail": tail}).json()
        return list(j["lines"])

    def follow_logs(self, tail: int = 200) -> Iterator[Dict[str, Any]]:
        """The last ``tail`` lines, then each new one as the guest writes it,
        until the sandbox ends (deleted or failed); stop early by leaving the
        loop (the connection is closed)."""
        with self._client.transport.open("GET", self._path + "/logs",
                                         query={"tail": tail, "follow": "true"},
                                         timeout=STREAM_SILENCE_S, ok=(200,),
                                         headers={"Accept": "text/event-stream"}) as r:
            for event, data in sse_events(r.chunks()):
                if event == "line":
                    yield dict(json.loads(data))
                elif event == "end":
                    return

    # ---- lifecycle ---------------------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Snapshot memory, devices and disk; the sandbox runs on."""
        return Snapshot.from_json(self._post("/snapshot").json())

    def hibernate(self) -> "Sandbox":
        """Save the sandbox to disk and stop its VM (it costs nothing until
        it wakes; any request that needs it wakes it)."""
        self._info = self._post("/hibernate").json()
        return self

    def wake(self) -> "Sandbox":
        self._info = self._post("/wake").json()
        return self

    def pause(self) -> "Sandbox":
        """Stop its vCPUs, keeping its memory, processes and network: no
        CPU is billed while paused (its memory is). Cheaper to come back
        from than hibernate; any request that needs the guest resumes it."""
        self._info = self._post("/pause").json()
        return self

    def resume(self) -> "Sandbox":
        """Start a paused sandbox's vCPUs again."""
        self._info = self._post("/resume").json()
        return self

    def attach_volume(self, name: str, path: str, read_only: bool = False) -> Dict[str, Any]:
        """Mount the workspace's volume ``name`` at ``path`` in this running
        sandbox (its lowest free volume slot; a hibernated one is woken).
        Conflict for the one-writer rule, a path or volume it has already,
        or no free slot. Returns the volume as the API gives it."""
        return self._post("/volumes", {"name": name, "path": path, "read_only": bool(read_only)}).json()

    def detach_volume(self, volume: str, force: bool = False) -> None:
        """Sync, unmount and let go the volume (its name or id): Conflict,
        naming what holds it, while a process in the guest uses the mount;
        with ``force``, those processes are killed first."""
        self._client.transport.request("DELETE", f"{self._path}/volumes/{urllib.parse.quote(volume, safe='')}"
                                       + ("?force=true" if force else ""), ok=(204,))

    def fork(self, count: int = 1) -> List["Sandbox"]:
        """count copies of this running sandbox, memory and disk, each
        continuing from here (one pause per child)."""
        return self._fork("/fork", count)

    def fork_tree(self, count: int) -> List["Sandbox"]:
        """count identical copies made in a single pause."""
        return self._fork("/fork_tree", count)

    def promote(self, *, delete_parent: bool = False) -> Dict[str, Any]:
        """Keep this child of a fork and delete its siblings (and the parent
        with delete_parent). The report: kept, parent, deleted (ids),
        parent_deleted, failed ([{id, parent, error}])."""
        return dict(self._post("/promote", {"delete_parent": bool(delete_parent)}).json())

    def _fork(self, route: str, count: int) -> List["Sandbox"]:
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError("count must be a positive integer")
        j = self._post(route, {"count": count}).json()
        kids = [Sandbox(self._client, s) for s in j["sandboxes"]]
        if j.get("failed"):
            raise ForkError(f"{j['failed']} of {count} forks failed: {j.get('error', '')}", kids, int(j["failed"]))
        return kids

    # ---- exposed ports -------------------------------------------------------------------------------------

    def expose_port(self, port: int, public: bool = False) -> str:
        """Make a TCP port of the guest (a server on its 127.0.0.1)
        reachable through kilnd; returns its URL. Requests need this
        workspace's API key unless ``public``. Exposing it again changes
        only ``public``."""
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise ValueError("port must be an integer from 1 to 65535")
        return self._post("/ports", {"port": port, "public": bool(public)}).json()["url"]

    def preview_url(self, port: int, ttl: int = 3600) -> str:
        """A signed link to an exposed port (private ones too) that needs no
        API key for ``ttl`` seconds (60 to 604800)."""
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise ValueError("port must be an integer from 1 to 65535")
        if not isinstance(ttl, int) or isinstance(ttl, bool) or not 60 <= ttl <= 604800:
            raise ValueError("ttl must be whole seconds from 60 to 604800")
        return str(self._post(f"/ports/{port}/preview", {"ttl_seconds": ttl}).json()["url"])

    def ports(self) -> List[Dict[str, Any]]:
        """The exposed ports: {port, public, url, host_url?, created_at}."""
        return self._get("/ports").json()["ports"]

    def unexpose_port(self, port: int) -> None:
        """Stop exposing a port (NotFound if it was not)."""
        self._client.transport.request("DELETE", f"{self._path}/ports/{int(port)}", ok=(204,))

    def set_ttl(self, seconds: int) -> "Sandbox":
        """Change the idle timeout (0: never deleted for idleness)."""
        self._info = self._client.transport.request(
            "PATCH", self._path + "/lifecycle", json_body={"ttl_seconds": seconds}).json()
        return self

    def set_persistent(self, persistent: bool = True) -> "Sandbox":
        """True: its idle timeout hibernates it instead of deleting it, and
        only a delete ends it; False: the plan's TTL rule again."""
        if not isinstance(persistent, bool):
            raise TypeError("persistent must be a bool")
        self._info = self._client.transport.request(
            "PATCH", self._path + "/lifecycle", json_body={"persistent": persistent}).json()
        return self

    @property
    def persistent(self) -> bool:
        """Hibernated when idle and never deleted by its TTL."""
        return bool(self._info.get("persistent", False))

    def set_idle_pause(self, seconds: int) -> "Sandbox":
        """Pause it after this many seconds without a request, before its
        TTL acts (0: never); the next request resumes it."""
        if not isinstance(seconds, int) or isinstance(seconds, bool) or not 0 <= seconds <= 604800:
            raise ValueError("seconds must be whole seconds from 0 to 604800")
        self._info = self._client.transport.request(
            "PATCH", self._path + "/lifecycle", json_body={"idle_pause_seconds": seconds}).json()
        return self

    @property
    def idle_pause_seconds(self) -> int:
        """Paused after this many idle seconds (0: never)."""
        return int(self._info.get("idle_pause_seconds", 0))

    def set_network(self, *, allow_out: Optional[Sequence[str]] = None,
                    deny_out: Optional[Sequence[str]] = None,
                    allow_internet: bool = True) -> "Sandbox":
        """Replace the egress policy (fields left out take their defaults);
        in force for new connections when this returns."""
        body = clean({"allow_out": list(allow_out) if allow_out is not None else None,
                      "deny_out": list(deny_out) if deny_out is not None else None,
                      "allow_internet": allow_internet})
        self._info = self._client.transport.request("PUT", self._path + "/network", json_body=body).json()
        return self

    def delete(self) -> None:
        """Delete the sandbox: its VM, disk and network."""
        self._client.transport.request("DELETE", self._path, ok=(204,))
        self._info["status"] = "deleted"

    # ---- E2B's names (docs/migrating.md): thin wrappers, kiln's meaning kept where it differs ----------

    @property
    def sandbox_id(self) -> str:
        """E2B's name for ``id``."""
        return self.id

    @classmethod
    def connect(cls, sandbox_id: str, *, api_url: Optional[str] = None, api_key: Optional[str] = None,
                client: Optional[Client] = None) -> "Sandbox":
        """E2B's name for Sandbox.get: the sandbox with this id. A
        hibernated one stays so until a call needs its guest, which wakes it."""
        return cls.get(sandbox_id, api_url=api_url, api_key=api_key, client=client)

    def kill(self) -> bool:
        """E2B's name for delete: True, or False if it was gone already."""
        try:
            self.delete()
            return True
        except NotFound:
            self._info["status"] = "deleted"
            return False

    def set_timeout(self, timeout: int) -> None:
        """E2B's name for set_ttl. kiln's TTL is an idle timeout, counted
        again from each activity (docs/api.md), where E2B's is a deadline."""
        self.set_ttl(timeout)

    def get_host(self, port: int) -> str:
        """E2B's get_host: where a guest port is reached, without a scheme,
        for ``f"http://{host}/..."`` (https when kilnd serves TLS). The port
        is exposed first if it is not yet (private: requests need the API
        key; ``expose_port(port, public=True)`` before makes it public, and
        get_host leaves that as it is). With kilnd's --domain it is the
        port's own host name; without, kilnd's host and the port's path."""
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise ValueError("port must be an integer from 1 to 65535")
        found = [p for p in self.ports() if p.get("port") == port]
        entry = found[0] if found else self._post("/ports", {"port": port, "public": False}).json()
        u = urllib.parse.urlsplit(entry.get("host_url") or entry["url"])
        return u.netloc + u.path.rstrip("/")

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.delete()
        except NotFound:
            pass  # deleted already (in the block, or by its TTL)


def _exec_body(cmd: Command, timeout: Optional[int], env: Optional[Mapping[str, str]],
               cwd: Optional[str], stdin: Optional[str], user: Optional[str] = None) -> Dict[str, Any]:
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise ValueError("timeout must be a number of seconds, 0 or more")
        timeout = math.ceil(timeout)  # the server counts whole seconds
    body = argv_or_cmd(cmd)
    if user is not None and (not isinstance(user, (str, int)) or isinstance(user, bool)):
        raise ValueError("user must be a guest user name, a uid or 'uid:gid'")
    body.update(clean({"timeout_seconds": timeout, "env": str_map("env", env), "cwd": cwd, "stdin": stdin,
                       "user": None if user is None else str(user)}))
    return body


def sse_events(chunks: Iterable[bytes]) -> Iterator[Tuple[str, str]]:
    """Server-Sent Events (event name, data) from a byte stream."""
    from .events import sse_records
    for _, event, data in sse_records(chunks):
        yield event, data


def output_events(chunks: Iterable[bytes]) -> Iterator[Tuple[str, str, Dict[str, Any]]]:
    """A command's output stream (exec/stream, a process's output):
    ("stdout"|"stderr", text, {}) as chunks arrive, decoded as UTF-8 across
    chunk boundaries (a character split between two chunks comes out
    whole; invalid bytes become U+FFFD); every other event as (event, its
    data, its JSON), an exit after what its decoders still held."""
    decoders = {k: codecs.getincrementaldecoder("utf-8")("replace") for k in ("stdout", "stderr")}
    for event, data in sse_events(chunks):
        j = json.loads(data)
        if event in decoders:
            raw = base64.b64decode(j["data_b64"]) if "data_b64" in j else str(j["data"]).encode()
            text = decoders[event].decode(raw)
            if text:
                yield event, text, {}
            continue
        if event == "exit":
            for kind, d in decoders.items():
                rest = d.decode(b"", final=True)
                if rest:
                    yield kind, rest, {}
        yield event, data, j
