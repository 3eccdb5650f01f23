"""An interactive terminal in a sandbox: GET .../pty as a WebSocket
(docs/api.md, "Terminal"), with what the TypeScript SDK's Pty offers:
output as it comes, typing, resizing, and the exit status.

A reader thread drains the socket into a queue from the start, whether or
not anyone reads: kilnd stops reading our keystrokes while it cannot write
the terminal's output, so a client that typed a long paste without reading
its echo would otherwise wait on kilnd while kilnd waits on it.
"""

from __future__ import annotations

import codecs
import json
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Deque, Iterator, Optional, Pattern, Union

from ._websocket import OP_BINARY, WebSocket
from .errors import ConnectionFailed, KilnError, Timeout

if TYPE_CHECKING:  # pragma: no cover
    from ._transport import Transport

# How long close() waits for kilnd's answering close frame before it
# drops the connection anyway.
CLOSE_WAIT_S = 5.0


class Pty:
    """A terminal session (Sandbox.pty opens one). Iterate it, or read(),
    for output; write() types, resize() changes the window; wait() returns
    the exit status when the shell ends. A context manager: leaving the
    block closes the session (the shell is hung up)::

        with sb.pty(cols=80, rows=24) as term:
            term.write("echo $((6*7))x; exit 7\\n")
            print(term.read_until("42x"))
            print(term.wait())   # 7
    """

    def __init__(self, ws: WebSocket) -> None:
        self._ws = ws
        self._cond = threading.Condition()
        self._queue: Deque[bytes] = deque()
        self._ended = False
        self._exit_code: Optional[int] = None
        self._failure: Optional[KilnError] = None
        self._reader = threading.Thread(target=self._read, name="kiln-pty", daemon=True)
        self._reader.start()

    @classmethod
    def open(cls, transport: "Transport", path: str, *, cols: Optional[int] = None,
             rows: Optional[int] = None, cmd: Optional[str] = None) -> "Pty":
        """Open a terminal at ``path`` (kilnd checks cols and rows: 1 to 1000)."""
        ws = WebSocket.connect(transport, path, {"cols": cols, "rows": rows, "cmd": cmd},
                               timeout=transport.timeout)
        return cls(ws)

    # ---- the reader thread ---------------------------------------------------------------------

    def _read(self) -> None:
        err: Optional[KilnError] = None
        try:
            while True:
                msg = self._ws.recv()
                if msg is None:
                    break
                op, data = msg
                if op == OP_BINARY:
                    with self._cond:
                        self._queue.append(data)
                        self._cond.notify_all()
                    continue
                try:
                    m = json.loads(data)
                except ValueError:
                    continue  # not a message of ours
                with self._cond:
                    if m.get("type") == "exit":
                        self._exit_code = int(m.get("exit_code"))
                    elif m.get("type") == "error":
                        self._failure = KilnError(str(m.get("message", "")), "pty_error")
        except KilnError as e:
            err = e
        finally:
            self._ws.shutdown()
            with self._cond:
                self._ended = True
                if self._exit_code is None and self._failure is None:
                    self._failure = err or ConnectionFailed("the terminal closed without an exit status",
                                                            "pty_closed")
                self._cond.notify_all()

    # ---- typing --------------------------------------------------------------------------------

    def write(self, data: Union[str, bytes, bytearray]) -> None:
        """Type into the terminal (a str is sent as UTF-8)."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("data must be str or bytes")
        self._ws.send(OP_BINARY, bytes(data))

    def resize(self, cols: int, rows: int) -> None:
        """Change the window size (the program gets SIGWINCH)."""
        for name, v in (("cols", cols), ("rows", rows)):
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1000:
                raise ValueError(f"{name} must be an integer from 1 to 1000")
        self._ws.send(0x1, json.dumps({"type": "resize", "cols": cols, "rows": rows}).encode())

    # ---- output --------------------------------------------------------------------------------

    def read(self, timeout: Optional[float] = None) -> bytes:
        """The next piece of output as it came; b"" once the session ended
        and all of it was read. Timeout (code pty_timeout) if none came
        within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._queue and not self._ended:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise Timeout(f"no terminal output within {timeout} s", "pty_timeout")
                self._cond.wait(left)
            return self._queue.popleft() if self._queue else b""

    def __iter__(self) -> Iterator[bytes]:
        while True:
            chunk = self.read()
            if not chunk:
                return
            yield chunk

    def read_until(self, pattern: Union[str, Pattern[str]], timeout: float = 30.0) -> str:
        """Output, decoded as UTF-8, until ``pattern`` (a string, or a
        compiled regular expression) shows up; returns all of it. Timeout
        (code pty_timeout) with the last output in its message if it does
        not show within ``timeout`` seconds or before the session ends."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text = ""
        deadline = time.monotonic() + timeout

        def found() -> bool:
            return pattern in text if isinstance(pattern, str) else bool(pattern.search(text))

        while not found():
            left = deadline - time.monotonic()
            try:
                chunk = self.read(timeout=max(left, 0.0)) if left > 0 else b""
            except Timeout:
                chunk = b""
            if not chunk:
                break
            text += decoder.decode(chunk)
        if not found():
            what = pattern if isinstance(pattern, str) else pattern.pattern
            raise Timeout(f"terminal output did not show {what!r}; it was: {text[-500:]!r}", "pty_timeout")
        return text

    # ---- the end -------------------------------------------------------------------------------

    @property
    def exit_code(self) -> Optional[int]:
        """The shell's exit status once it ended (None before)."""
        with self._cond:
            return self._exit_code

    @property
    def ended(self) -> bool:
        with self._cond:
            return self._ended

    def wait(self, timeout: Optional[float] = None) -> int:
        """The exit status, when the shell has ended. Raises what ended the
        session otherwise (its error, or ConnectionFailed pty_closed if it
        closed without a status), or Timeout after ``timeout`` seconds."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._ended, timeout):
                raise Timeout(f"the terminal did not end within {timeout} s", "pty_timeout")
            if self._exit_code is not None:
                return self._exit_code
            assert self._failure is not None
            raise self._failure

    def close(self) -> None:
        """Close the session (the shell is hung up). Output not read yet
        stays readable."""
        if not self.ended:
            self._ws.close(1000)
            self._reader.join(CLOSE_WAIT_S)
        self._ws.shutdown()

    def __enter__(self) -> "Pty":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "ended" if self.ended else "open"
        return f"<Pty {state} exit_code={self.exit_code}>"

