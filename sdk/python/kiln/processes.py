"""Background processes of a sandbox (docs/api.md, Processes): started,
they outlive the call; the guest agent keeps them and a ring of their
output, to be listed, signalled and read later."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Union

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


class Processes:
    """``sandbox.processes``: start, list, kill, output."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def start(self, cmd: "Command", *, env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
              user: Optional[str] = None, timeout: Optional[int] = None) -> Process:
        """Start ``cmd`` (a string for /bin/sh -c, or an argv list) in the
        background and return at once; ``timeout`` (seconds) kills it."""
        from .sandbox import _exec_body
        body = _exec_body(cmd, timeout, env, cwd, None, user)
        j = self._sb._post("/processes", body).json()
        return Process(id=int(j["id"]), pid=int(j["pid"]), status=str(j["status"]))

    def list(self) -> List[Process]:
        return [Process.from_json(p) for p in self._sb._get("/processes").json()["processes"]]

    def kill(self, process: Union[Process, int], signal: Union[str, int] = "KILL") -> None:
        """Signal the process's group: a name (TERM, KILL, INT...) or a number."""
        self._sb._post(f"/processes/{_pid(process)}/signal", {"signal": signal})

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


def _pid(process: Union[Process, int]) -> int:
    p = process.id if isinstance(process, Process) else process
    if isinstance(p, bool) or not isinstance(p, int) or p <= 0:
        raise ValueError("a process is a Process or its id (a positive int)")
    return p
