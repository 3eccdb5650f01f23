"""``sandbox.commands``: running commands under the names of E2B's SDK
(docs/migrating.md), as thin wrappers over kiln's exec and processes.

E2B names a command by its guest pid; kiln's API names a process by the
guest agent's id (a pid may be reused once its process ended). These
methods take the pid, as E2B's do, and look up the running process that
has it (one GET); they also take a CommandHandle or a Process, whose id
needs no lookup. kiln's own ``sandbox.processes`` methods take the id.

Where E2B's behaviour differs, kiln's is kept and said (docs/migrating.md):
a non-zero exit is a result, not an exception; a background command's
output reaches wait()'s callbacks when it ended (iterate the handle, or
sandbox.processes.follow, to read it as it is printed); commands run with
/bin/sh -c, as root unless ``user`` says otherwise.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Iterator, List, Literal, Mapping, Optional, Tuple, Union, overload

from .errors import NotFound
from .processes import Process, ProcessOutput
from .types import ExecResult

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Sandbox

OutputCallback = Callable[[str], None]

# E2B's default: a command is bounded to 60 s unless ``timeout=0``, in the
# background too; kept, so that a ported program behaves as it did.
DEFAULT_TIMEOUT = 60
# wait(): how long each GET .../output waits for the end before asking again.
WAIT_STEP_S = 60


class CommandHandle:
    """A command running in the background (E2B's CommandHandle).
    ``pid`` is the guest pid, as in E2B; ``id`` is kiln's process id (what
    ``sandbox.processes`` takes)."""

    def __init__(self, sandbox: "Sandbox", process: Process,
                 on_stdout: Optional[OutputCallback] = None,
                 on_stderr: Optional[OutputCallback] = None) -> None:
        self._sb = sandbox
        self.process = process
        self.id = process.id
        self.pid = process.pid
        self._on_stdout = on_stdout
        self._on_stderr = on_stderr
        self.exit_code: Optional[int] = None

    def wait(self, on_stdout: Optional[OutputCallback] = None,
             on_stderr: Optional[OutputCallback] = None) -> ProcessOutput:
        """Wait for the command to end; its output and exit status. The
        callbacks (these, or those given to run) get all of its output once,
        when it ended: kiln keeps a background process's output for reading,
        it does not stream it. A non-zero exit is returned, not raised."""
        while True:
            out = self._sb.processes.output(self.id, wait=WAIT_STEP_S)
            if not out.running:
                break
        for cb, text in ((on_stdout or self._on_stdout, out.stdout), (on_stderr or self._on_stderr, out.stderr)):
            if cb is not None and text:
                cb(text)
        return out

    def __iter__(self) -> Iterator[Tuple[Optional[str], Optional[str], None]]:
        """Its output as it is printed, as E2B's handle iterates:
        ``for stdout, stderr, _ in handle`` (one of the two set per item;
        the third, E2B's pty output, always None), to the command's end.
        After it, ``exit_code`` is set. (sandbox.processes.follow.)"""
        stream = self._sb.processes.follow(self.id)
        for kind, text in stream:
            yield (text, None, None) if kind == "stdout" else (None, text, None)
        self.exit_code = stream.exit_code

    def kill(self) -> bool:
        """SIGKILL it: True, or False if it had ended already."""
        return self._sb.commands.kill(self)

    def send_stdin(self, data: Union[str, bytes]) -> None:
        self._sb.commands.send_stdin(self, data)

    def disconnect(self) -> None:
        """Nothing to do: a handle holds no connection (the command runs on
        either way, as after E2B's disconnect)."""

    def __repr__(self) -> str:
        return f"<CommandHandle id={self.id} pid={self.pid}>"


Target = Union[int, CommandHandle, Process]


class Commands:
    """``sandbox.commands``: run, list, kill, send_stdin, connect."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    @overload
    def run(self, cmd: str, background: Literal[True], envs: Optional[Mapping[str, str]] = None,
            user: Optional[str] = None, cwd: Optional[str] = None,
            on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None,
            stdin: Optional[bool] = None, timeout: Optional[float] = DEFAULT_TIMEOUT) -> CommandHandle: ...

    @overload
    def run(self, cmd: str, background: Optional[Literal[False]] = None,
            envs: Optional[Mapping[str, str]] = None, user: Optional[str] = None, cwd: Optional[str] = None,
            on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None,
            stdin: Optional[bool] = None, timeout: Optional[float] = DEFAULT_TIMEOUT) -> ExecResult: ...

    def run(self, cmd: str, background: Optional[bool] = None, envs: Optional[Mapping[str, str]] = None,
            user: Optional[str] = None, cwd: Optional[str] = None,
            on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None,
            stdin: Optional[bool] = None,
            timeout: Optional[float] = DEFAULT_TIMEOUT) -> Union[ExecResult, CommandHandle]:
        """Run ``cmd`` to its end (an ExecResult; on_stdout/on_stderr get
        its output as it comes), or, with ``background=True``, start it and
        return a CommandHandle at once. ``timeout`` seconds (default 60, as
        in E2B; 0: no limit) kill the command. ``stdin=True`` keeps a
        background command's stdin open for send_stdin, as in E2B; a
        foreground command cannot be sent any (kiln's ``exec(stdin=...)``
        feeds it)."""
        t = math.ceil(timeout) if timeout else None  # 0 is no limit, as an absent one
        if background:
            p = self._sb.processes.start(cmd, env=envs, cwd=cwd, user=user, timeout=t, stdin=bool(stdin))
            return CommandHandle(self._sb, p, on_stdout, on_stderr)
        if stdin:
            raise ValueError("kiln cannot send stdin to a command run in the foreground: start it "
                             "with background=True and use send_stdin, or give the input to "
                             "sandbox.exec(cmd, stdin=...)")
        if on_stdout is not None or on_stderr is not None:
            return self._sb.exec_stream(cmd, on_stdout=on_stdout, on_stderr=on_stderr, timeout=t,
                                        env=envs, cwd=cwd, user=user)
        return self._sb.exec(cmd, timeout=t, env=envs, cwd=cwd, user=user)

    def list(self) -> List[Process]:
        """The running processes kiln started (sandbox.processes.list() also
        has the ended ones it remembers)."""
        return [p for p in self._sb.processes.list() if p.running]

    def kill(self, pid: Target) -> bool:
        """SIGKILL the command: True, or False if no running command has
        that pid (as E2B). An unknown sandbox is still NotFound."""
        pid_id = self._find(pid)
        if pid_id is None:
            return False
        try:
            self._sb.processes.kill(pid_id, "KILL")
            return True
        except NotFound:
            self._sb._get("")  # the sandbox gone is an error; the process gone is False
            return False

    def send_stdin(self, pid: Target, data: Union[str, bytes]) -> None:
        """Write to the stdin of a command started with ``stdin=True``
        (NotFound if no running command has that pid; Conflict if its stdin
        is not open)."""
        self._sb.processes.send_stdin(self._need(pid), data)

    def connect(self, pid: Target) -> CommandHandle:
        """A handle on a running command, to wait for it (NotFound if no
        running command has that pid)."""
        if isinstance(pid, CommandHandle):
            return CommandHandle(self._sb, pid.process)
        if isinstance(pid, Process):
            return CommandHandle(self._sb, pid)
        _check_pid(pid)
        for p in self._sb.processes.list():
            if p.running and p.pid == pid:
                return CommandHandle(self._sb, p)
        raise _no_such(pid)

    def _find(self, pid: Target) -> Optional[int]:
        """kiln's id for a handle, a Process, or the running process with
        this guest pid (None if there is none)."""
        if isinstance(pid, (CommandHandle, Process)):
            return pid.id
        _check_pid(pid)
        for p in self._sb.processes.list():
            if p.running and p.pid == pid:
                return p.id
        return None

    def _need(self, pid: Target) -> int:
        found = self._find(pid)
        if found is None:
            raise _no_such(pid)
        return found


def _check_pid(pid: object) -> None:
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise ValueError("a command is its pid (a positive int), a CommandHandle or a Process")


def _no_such(pid: Target) -> NotFound:
    return NotFound(f"no running command with pid {pid} in this sandbox (kiln knows the processes it "
                    "started: sandbox.processes.list())", "not_found", 404)
