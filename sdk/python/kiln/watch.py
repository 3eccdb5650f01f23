"""Watching a guest directory (docs/api.md, Files: watch): changes as they
happen, from ``sandbox.files.watch(path)`` (an iterator) or E2B's
``files.watch_dir(path, on_event)`` (a callback on a thread)."""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from .errors import ConnectionFailed, error_for

if TYPE_CHECKING:  # pragma: no cover
    from ._transport import OpenResponse

#: kilnd sends a comment every 15 s; this much silence means it is gone.
WATCH_SILENCE_S = 60.0


@dataclass(frozen=True)
class FsEvent:
    """One change: ``type`` is create, write, remove, rename (``moved``
    says "from" or "to") or chmod; ``name`` is relative to the watched
    path ("" for the path itself). ``overflow`` and ``gone`` are the
    stream's own: events were lost, or the watched path went away (the
    watch then ends)."""
    type: str
    name: str = ""
    dir: bool = False
    moved: Optional[str] = None


class FileWatch:
    """An open watch: iterate it for FsEvents; close() ends it (also from
    another thread, which unblocks a reader)."""

    def __init__(self, resp: "OpenResponse", events: Iterator[tuple]) -> None:
        self._resp = resp
        self._events = events
        self._closed = False

    def __iter__(self) -> Iterator[FsEvent]:
        try:
            for event, data in self._events:
                j = json.loads(data)
                if event == "fs":
                    yield FsEvent(type=str(j["type"]), name=str(j["name"]), dir=bool(j.get("dir")),
                                  moved=j.get("moved"))
                elif event == "overflow":
                    yield FsEvent(type="overflow")
                elif event == "gone":
                    yield FsEvent(type="gone")
                    return
                elif event == "error":
                    raise error_for(None, str(j.get("code", "error")), str(j.get("message", "")))
        except ConnectionFailed:
            if not self._closed:
                raise
        finally:
            self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        conn = getattr(self._resp, "_conn", None)
        sock = getattr(conn, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._resp.close()

    def __enter__(self) -> "FileWatch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WatchHandle:
    """E2B's watch handle: events go to a callback on a thread until stop()."""

    def __init__(self, watch: FileWatch, on_event: Callable[[FsEvent], None],
                 on_exit: Optional[Callable[[Optional[BaseException]], None]] = None) -> None:
        self._watch = watch
        self.error: Optional[BaseException] = None

        def run() -> None:
            try:
                for ev in watch:
                    on_event(ev)
            except BaseException as e:  # noqa: BLE001 - handed to on_exit, kept in .error
                self.error = e
            if on_exit is not None:
                on_exit(self.error)

        self._thread = threading.Thread(target=run, name="kiln-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._watch.close()
        self._thread.join(timeout=10)
