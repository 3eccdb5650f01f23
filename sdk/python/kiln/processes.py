"""Background processes of a sandbox (docs/api.md, Processes): started,
they outlive the call; the guest agent keeps them and a ring of their
output, to be listed, signalled and read later."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, List, Mapping, Optional, Tuple, Union

from .errors import ConnectionFailed, error_for

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Command, Sandbox


@dataclass(frozen=True)
class Process:
    """A process the agent keeps. ``id`` names it in the API (the guest
    ``pid`` may be reused); ``exit_code`` and ``signal`` once it ended."""
    id: int
    pid: int
    status: str
    command: str = ""
    started_at: Optional[str] = None
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    output_dropped: int = 0

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "Process":
        return cls(id=int(j["id"]), pid=int(j["pid"]), status=str(j["status"]),
                   command=str(j.get("command", "")), started_at=j.get("started_at"),
                   exit_code=j.get("exit_code"), signal=j.get("signal"),
                   output_dropped=int(j.get("output_dropped", 0)))

    @property
    def running(self) -> bool:
        return self.status == "running"


@dataclass(frozen=True)
class ProcessOutput:
    """What a process printed (what the agent kept of it), and whether it
    had ended by then."""
    id: int
    pid: int
    status: str
    stdout: str
    stderr: str
    exit_code: Optional[int]
    signal: Optional[int]
    output_dropped: int
    truncated: bool

    @property
    def running(self) -> bool:
        return self.status == "running"


class ProcessStream:
    """A process's output as it prints it (``GET .../output?follow=true``):
    iterate it for ``(stream, text)`` pairs, stream ``"stdout"`` or
    ``"stderr"``, first what the agent's ring kept (``output_dropped``
    says how much it lost before), then each chunk as the process writes
    it, until the process ends; then ``exit_code`` and ``signal`` are set
    and ``ended`` is True. Text is decoded as UTF-8 across chunks (bytes
    that are not become U+FFFD). Leaving the loop early closes the
    connection; the process runs on. An ended process whose exit a reader
    has had is forgotten by the agent: NotFound."""

    def __init__(self, sandbox: "Sandbox", process_id: int) -> None:
        self._sb = sandbox
        self.id = process_id
        self.output_dropped = 0
        self.exit_code: Optional[int] = None
        self.signal: Optional[int] = None
        self.ended = False
        self._started = False

    def __iter__(self) -> Iterator[Tuple[str, str]]:
        from .sandbox import STREAM_SILENCE_S, output_events
        if self._started:
            raise RuntimeError("a ProcessStream can be read only once")
        self._started = True
        with self._sb._client.transport.open("GET", f"{self._sb._path}/processes/{self.id}/output",
                                             query={"follow": "true"}, timeout=STREAM_SILENCE_S, ok=(200,),
                                             headers={"Accept": "text/event-stream"}) as r:
            for event, data, j in output_events(r.chunks()):
                if event == "attached":
                    self.output_dropped = int(j.get("output_dropped", 0))
                elif event in ("stdout", "stderr"):
                    yield event, data
                elif event == "exit":
                    self.exit_code, self.signal, self.ended = j.get("exit_code"), j.get("signal"), True
                    return
                elif event == "error":
                    raise error_for(None, str(j.get("code", "error")), str(j.get("message", "")))
        raise ConnectionFailed("the output stream ended before the process did", "stream_ended")

    def stdout_iter(self) -> Iterator[str]:
        """Only its stdout, chunk by chunk (stderr is read and dropped)."""
        for kind, text in self:
            if kind == "stdout":
                yield text


class Processes:
    """``sandbox.processes``: start, list, kill, send_stdin, output, follow."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def start(self, cmd: "Command", *, env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
              user: Optional[str] = None, timeout: Optional[int] = None, stdin: bool = False) -> Process:
        """Start ``cmd`` (a string for /bin/sh -c, or an argv list) in the
        background and return at once; ``timeout`` (seconds) kills it.
        With ``stdin``, its standard input stays open for send_stdin."""
        from .sandbox import _exec_body
        if not isinstance(stdin, bool):
            raise TypeError("stdin must be True or False (send the bytes with send_stdin)")
        body = _exec_body(cmd, timeout, env, cwd, None, user)
        if stdin:
            body["stdin"] = True
        j = self._sb._post("/processes", body).json()
        return Process(id=int(j["id"]), pid=int(j["pid"]), status=str(j["status"]))

    def list(self) -> List[Process]:
        return [Process.from_json(p) for p in self._sb._get("/processes").json()["processes"]]

    def kill(self, process: Union[Process, int], signal: Union[str, int] = "KILL") -> None:
        """Signal the process's group: a name (TERM, KILL, INT...) or a number."""
        self._sb._post(f"/processes/{_pid(process)}/signal", {"signal": signal})

    def send_stdin(self, process: Union[Process, int], data: Union[bytes, bytearray, str], *,
                   close: bool = False) -> int:
        """Write ``data`` to the stdin of a process started with
        ``stdin=True`` (``close`` closes it after); the bytes sent. A
        process that reads nothing raises Conflict once 2 MiB wait."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("data must be bytes or str")
        query = {"close": "true"} if close else None
        r = self._sb._client.transport.request("POST", f"{self._sb._path}/processes/{_pid(process)}/stdin",
                                               body=bytes(data), query=query,
                                               headers={"Content-Type": "application/octet-stream"})
        return int(r.json()["bytes"])

    def close_stdin(self, process: Union[Process, int]) -> None:
        """Close the process's stdin (it reads end of file)."""
        self._sb._client.transport.request("POST", f"{self._sb._path}/processes/{_pid(process)}/stdin",
                                           body=b"", query={"close": "true"},
                                           headers={"Content-Type": "application/octet-stream"})

    def output(self, process: Union[Process, int], *, wait: int = 0) -> ProcessOutput:
        """Its output kept so far; with ``wait`` (seconds), also what comes
        until it ends or the time passes."""
        if isinstance(wait, bool) or not isinstance(wait, int) or not 0 <= wait <= 3600:
            raise ValueError("wait must be whole seconds from 0 to 3600")
        j = self._sb._get(f"/processes/{_pid(process)}/output", query={"wait_seconds": wait},
                          timeout=wait + 60.0).json()
        return ProcessOutput(id=int(j["id"]), pid=int(j["pid"]), status=str(j["status"]),
                             stdout=str(j["stdout"]), stderr=str(j["stderr"]), exit_code=j.get("exit_code"),
                             signal=j.get("signal"), output_dropped=int(j.get("output_dropped", 0)),
                             truncated=bool(j.get("truncated", False)))


    def follow(self, process: Union[Process, int]) -> ProcessStream:
        """Its output live: ``for stream, text in sandbox.processes.follow(p)``
        (ProcessStream: the kept output first, then as it is printed, to
        the process's end; its exit_code after)."""
        return ProcessStream(self._sb, _pid(process))


def _pid(process: Union[Process, int]) -> int:
    p = process.id if isinstance(process, Process) else process
    if isinstance(p, bool) or not isinstance(p, int) or p <= 0:
        raise ValueError("a process is a Process or its id (a positive int)")
    return p
