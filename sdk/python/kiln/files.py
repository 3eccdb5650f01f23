"""Files inside a sandbox. Paths are absolute guest paths, taken literally
(``/../etc`` is the guest's ``/etc``): nothing outside the VM is reachable
through them."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Callable, List, Literal, Optional, Union, overload

from .errors import NotFound
from .types import FileInfo
from .watch import WATCH_SILENCE_S, FileWatch, FsEvent, WatchHandle

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Sandbox

PathLike = Union[str, "os.PathLike[str]"]


class Files:
    """``sandbox.files``: read, write, list, stat, remove, make_dir, rename,
    watch, upload, download."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def _url(self, sub: str = "") -> str:
        return self._sb._path + "/files" + sub

    @property
    def _t(self):  # type: ignore[no-untyped-def]
        return self._sb.client.transport

    @overload
    def read(self, path: str, format: Optional[Literal["bytes"]] = None) -> bytes: ...

    @overload
    def read(self, path: str, format: Literal["text"]) -> str: ...

    def read(self, path: str, format: Optional[str] = None) -> Union[bytes, str]:
        """The file's bytes; ``format="text"`` (E2B's default, not kiln's)
        decodes them as UTF-8."""
        if format not in (None, "bytes", "text"):
            raise ValueError(f"format is 'bytes' or 'text', not {format!r} (download() streams a file)")
        data = bytes(self._t.request("GET", self._url(), query={"path": _guest(path)}).body)
        return data.decode("utf-8") if format == "text" else data

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def write(self, path: str, data: Union[bytes, bytearray, str], *, mode: int = 0o644,
              mkdirs: bool = True) -> int:
        """Create or replace the file (atomically), making missing
        directories unless mkdirs is False. Returns the bytes written."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("data must be bytes or str")
        r = self._t.request("PUT", self._url(), query=_put_query(path, mode, mkdirs), body=bytes(data),
                            headers={"Content-Type": "application/octet-stream"})
        return int(r.json()["size"])

    def list(self, path: str = "/", *, depth: int = 1) -> List[FileInfo]:
        """The entries below a directory, depth levels deep (names relative to it)."""
        j = self._t.request("GET", self._url("/list"), query={"path": _guest(path), "depth": depth}).json()
        return [FileInfo.from_json(e) for e in j["entries"]]

    def stat(self, path: str) -> FileInfo:
        """Type, size, mode, owner and time (a link is not followed)."""
        return FileInfo.from_json(self._t.request("GET", self._url("/stat"), query={"path": _guest(path)}).json())

    def get_info(self, path: str) -> FileInfo:
        """E2B's name for stat."""
        return self.stat(path)

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except NotFound:
            return False

    def remove(self, path: str, *, recursive: bool = False) -> None:
        """Remove a file, or a directory (a non-empty one with recursive=True)."""
        self._t.request("DELETE", self._url(), query={"path": _guest(path), "recursive": recursive}, ok=(204,))

    def make_dir(self, path: str, *, parents: bool = True, mode: int = 0o755) -> None:
        """Make a directory (and its missing parents; then an existing one
        is no error)."""
        if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
            raise ValueError("mode must be permission bits, e.g. 0o755")
        self._t.request("POST", self._url("/mkdir"),
                        query={"path": _guest(path), "parents": parents, "mode": format(mode, "04o")}, ok=(201,))

    def rename(self, src: str, dst: str, *, replace: bool = False) -> None:
        """Move a file or directory within the guest; an existing ``dst``
        is a Conflict unless ``replace``."""
        self._t.request("POST", self._url("/rename"),
                        json_body={"from": _guest(src), "to": _guest(dst), "replace": bool(replace)})

    def watch(self, path: str, *, recursive: bool = False) -> FileWatch:
        """Watch a guest directory (or file): returns once the guest
        watches it (NotFound if it does not exist); iterate the result for
        FsEvents, close() it to stop. A write to one file in many pieces is
        one ``write`` event per 100 ms (docs/api.md)."""
        from .sandbox import sse_events
        r = self._t.open("GET", self._url("/watch"), query={"path": _guest(path), "recursive": bool(recursive)},
                         timeout=WATCH_SILENCE_S, ok=(200,), headers={"Accept": "text/event-stream"})
        events = sse_events(r.chunks())
        try:
            first = next(events, None)
        except BaseException:
            r.close()
            raise
        if first is None or first[0] != "ready":
            r.close()
            raise NotFound(f"the watch of {path} did not start", "watch_failed")
        return FileWatch(r, events)

    def watch_dir(self, path: str, on_event: Callable[[FsEvent], None], *, recursive: bool = False,
                  on_exit: Optional[Callable[[Optional[BaseException]], None]] = None) -> WatchHandle:
        """E2B's name: on_event(FsEvent) for each change, on a thread, until
        handle.stop()."""
        return WatchHandle(self.watch(path, recursive=recursive), on_event, on_exit)

    def upload(self, local_path: PathLike, path: str, *, mode: int = 0o644, mkdirs: bool = True) -> int:
        """Copy a local file into the sandbox, streamed from disk."""
        with open(local_path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            r = self._t.request("PUT", self._url(), query=_put_query(path, mode, mkdirs), body=f,
                                headers={"Content-Type": "application/octet-stream",
                                         "Content-Length": str(size)})
        return int(r.json()["size"])

    def download(self, path: str, local_path: PathLike) -> int:
        """Copy a sandbox file to local_path, streamed to disk; the local
        file appears whole or not at all. Returns its size."""
        dest = os.fspath(local_path)
        fd, tmp = tempfile.mkstemp(prefix=".kiln-", dir=os.path.dirname(os.path.abspath(dest)))
        try:
            with os.fdopen(fd, "wb") as out:
                with self._t.open("GET", self._url(), query={"path": _guest(path)}) as r:
                    for chunk in r.chunks():
                        out.write(chunk)
                size = out.tell()
            shutil.move(tmp, dest)
            return size
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def _guest(path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"guest paths are absolute: {path!r}")
    return path


def _put_query(path: str, mode: int, mkdirs: bool) -> dict:  # type: ignore[type-arg]
    if not isinstance(mode, int) or not 0 <= mode <= 0o7777:
        raise ValueError("mode must be permission bits, e.g. 0o644")
    return {"path": _guest(path), "mode": format(mode, "04o"), "mkdirs": mkdirs}
