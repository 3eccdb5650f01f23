"""Files inside a sandbox. Paths are absolute guest paths, taken literally
(``/../etc`` is the guest's ``/etc``): nothing outside the VM is reachable
through them."""

from __future__ import annotations

import base64
import os
import shutil
import tarfile
import tempfile
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Union, overload

from .errors import NotFound
from .types import FileInfo
from .watch import WATCH_SILENCE_S, FileWatch, FsEvent, WatchHandle

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Sandbox

PathLike = Union[str, "os.PathLike[str]"]


class Files:
    """``sandbox.files``: read, write (one file or many), list, stat,
    remove, make_dir, rename, copy, chmod, watch, upload, download,
    upload_dir, download_dir.

    Every method takes ``user=`` (a guest user name, uid or "uid:gid"):
    the guest then acts as that user, with its permissions (PermissionDenied
    for a file it may not read) and new files are its own; an unknown user
    is InvalidRequest. Default: root."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def _url(self, sub: str = "") -> str:
        return self._sb._path + "/files" + sub

    @property
    def _t(self):  # type: ignore[no-untyped-def]
        return self._sb.client.transport

    @overload
    def read(self, path: str, format: Optional[Literal["bytes"]] = None, *, user: Optional[str] = None) -> bytes: ...

    @overload
    def read(self, path: str, format: Literal["text"], *, user: Optional[str] = None) -> str: ...

    def read(self, path: str, format: Optional[str] = None, *, user: Optional[str] = None) -> Union[bytes, str]:
        """The file's bytes; ``format="text"`` (E2B's default, not kiln's)
        decodes them as UTF-8."""
        if format not in (None, "bytes", "text"):
            raise ValueError(f"format is 'bytes' or 'text', not {format!r} (download() streams a file)")
        data = bytes(self._t.request("GET", self._url(), query={"path": _guest(path), "user": user}).body)
        return data.decode("utf-8") if format == "text" else data

    def read_text(self, path: str, encoding: str = "utf-8", *, user: Optional[str] = None) -> str:
        return self.read(path, user=user).decode(encoding)

    def write(self, path: Any, data: Union[bytes, bytearray, str, None] = None, *, mode: int = 0o644,
              mkdirs: bool = True, user: Optional[str] = None) -> Any:
        """Create or replace the file (atomically), making missing
        directories unless mkdirs is False. Returns the bytes written.

        E2B's form, a list of ``{"path", "data"}`` (or of (path, data)
        pairs) as the only argument, writes them all in one request:
        write_many."""
        if isinstance(path, (list, tuple)) and data is None:
            return self.write_many(path, user=user)
        if data is None:
            raise TypeError("write(path, data), or write([{'path': ..., 'data': ...}, ...])")
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("data must be bytes or str")
        r = self._t.request("PUT", self._url(), query=_put_query(path, mode, mkdirs, user), body=bytes(data),
                            headers={"Content-Type": "application/octet-stream"})
        return int(r.json()["size"])

    def write_many(self, files: Sequence[Any], *, user: Optional[str] = None) -> List[Dict[str, Any]]:
        """Write several files in one request: each a dict ``{"path",
        "data" (bytes or str), "mode"?}`` or a (path, data) pair. All or
        none: a failure while writing changes no file (docs/api.md). At
        most 1000 files and 64 MiB. Returns ``[{"path", "size"}]``."""
        out = []
        for i, f in enumerate(files):
            if isinstance(f, (tuple, list)) and len(f) == 2:
                f = {"path": f[0], "data": f[1]}
            if not isinstance(f, Mapping) or "path" not in f or "data" not in f:
                raise TypeError(f"files[{i}] must be {{'path': ..., 'data': ...}} or (path, data)")
            data = f["data"]
            e: Dict[str, Any] = {"path": _guest(f["path"])}
            if isinstance(data, str):
                e["content"] = data
            elif isinstance(data, (bytes, bytearray)):
                e["content_base64"] = base64.b64encode(bytes(data)).decode()
            else:
                raise TypeError(f"files[{i}]['data'] must be bytes or str")
            if f.get("mode") is not None:
                e["mode"] = format(_mode(f["mode"]), "04o")
            out.append(e)
        j = self._t.request("POST", self._url("/write"), query={"user": user}, json_body={"files": out}).json()
        return list(j["files"])

    def list(self, path: str = "/", *, depth: int = 1, user: Optional[str] = None) -> List[FileInfo]:
        """The entries below a directory, depth levels deep (names relative to it)."""
        j = self._t.request("GET", self._url("/list"),
                            query={"path": _guest(path), "depth": depth, "user": user}).json()
        return [FileInfo.from_json(e) for e in j["entries"]]

    def stat(self, path: str, *, user: Optional[str] = None) -> FileInfo:
        """Type, size, mode, owner and time (a link is not followed)."""
        return FileInfo.from_json(self._t.request("GET", self._url("/stat"),
                                                  query={"path": _guest(path), "user": user}).json())

    def get_info(self, path: str, *, user: Optional[str] = None) -> FileInfo:
        """E2B's name for stat."""
        return self.stat(path, user=user)

    def exists(self, path: str, *, user: Optional[str] = None) -> bool:
        try:
            self.stat(path, user=user)
            return True
        except NotFound:
            return False

    def remove(self, path: str, *, recursive: bool = False, user: Optional[str] = None) -> None:
        """Remove a file, or a directory (a non-empty one with recursive=True)."""
        self._t.request("DELETE", self._url(), query={"path": _guest(path), "recursive": recursive, "user": user},
                        ok=(204,))

    def make_dir(self, path: str, *, parents: bool = True, mode: int = 0o755, user: Optional[str] = None) -> None:
        """Make a directory (and its missing parents; then an existing one
        is no error)."""
        if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
            raise ValueError("mode must be permission bits, e.g. 0o755")
        self._t.request("POST", self._url("/mkdir"),
                        query={"path": _guest(path), "parents": parents, "mode": format(mode, "04o"), "user": user},
                        ok=(201,))

    def rename(self, src: str, dst: str, *, replace: bool = False, user: Optional[str] = None) -> None:
        """Move a file or directory within the guest; an existing ``dst``
        is a Conflict unless ``replace``."""
        self._t.request("POST", self._url("/rename"), query={"user": user},
                        json_body={"from": _guest(src), "to": _guest(dst), "replace": bool(replace)})

    def move(self, src: str, dst: str, *, replace: bool = False, user: Optional[str] = None) -> None:
        """Another name for rename."""
        self.rename(src, dst, replace=replace, user=user)

    def copy(self, src: str, dst: str, *, recursive: bool = False, replace: bool = False,
             user: Optional[str] = None) -> None:
        """Copy a file, or with recursive=True a directory tree, inside the
        guest (modes, times and symlinks kept). ``dst`` names the copy; an
        existing one is a Conflict unless ``replace``. NotFound for a
        missing ``src``; InvalidRequest for a directory copied into itself."""
        self._t.request("POST", self._url("/copy"), query={"user": user},
                        json_body={"from": _guest(src), "to": _guest(dst), "recursive": bool(recursive),
                                   "replace": bool(replace)})

    def chmod(self, path: str, mode: int, *, user: Optional[str] = None) -> None:
        """Set a path's permission bits (0 to 0o7777; symlinks followed)."""
        self._t.request("POST", self._url("/chmod"), query={"user": user},
                        json_body={"path": _guest(path), "mode": format(_mode(mode), "04o")})

    def watch(self, path: str, *, recursive: bool = False, user: Optional[str] = None) -> FileWatch:
        """Watch a guest directory (or file): returns once the guest
        watches it (NotFound if it does not exist); iterate the result for
        FsEvents, close() it to stop. A write to one file in many pieces is
        one ``write`` event per 100 ms (docs/api.md)."""
        from .sandbox import sse_events
        r = self._t.open("GET", self._url("/watch"),
                         query={"path": _guest(path), "recursive": bool(recursive), "user": user},
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
                  on_exit: Optional[Callable[[Optional[BaseException]], None]] = None,
                  user: Optional[str] = None) -> WatchHandle:
        """E2B's name: on_event(FsEvent) for each change, on a thread, until
        handle.stop()."""
        return WatchHandle(self.watch(path, recursive=recursive, user=user), on_event, on_exit)

    def upload(self, local_path: PathLike, path: str, *, mode: int = 0o644, mkdirs: bool = True,
               user: Optional[str] = None) -> int:
        """Copy a local file into the sandbox, streamed from disk."""
        with open(local_path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            r = self._t.request("PUT", self._url(), query=_put_query(path, mode, mkdirs, user), body=f,
                                headers={"Content-Type": "application/octet-stream",
                                         "Content-Length": str(size)})
        return int(r.json()["size"])

    def download(self, path: str, local_path: PathLike, *, user: Optional[str] = None) -> int:
        """Copy a sandbox file to local_path, streamed to disk; the local
        file appears whole or not at all. Returns its size."""
        dest = os.fspath(local_path)
        fd, tmp = tempfile.mkstemp(prefix=".kiln-", dir=os.path.dirname(os.path.abspath(dest)))
        try:
            with os.fdopen(fd, "wb") as out:
                with self._t.open("GET", self._url(), query={"path": _guest(path), "user": user}) as r:
                    for chunk in r.chunks():
                        out.write(chunk)
                size = out.tell()
            shutil.move(tmp, dest)
            return size
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


    def upload_dir(self, local_dir: PathLike, path: str, *, user: Optional[str] = None) -> int:
        """Copy a local directory tree into the sandbox's directory ``path``
        (made with its parents) as one tar stream: files, directories and
        symlinks with their modes. Existing files are replaced. Returns the
        tar's size."""
        src = os.fspath(local_dir)
        if not os.path.isdir(src):
            raise ValueError(f"{src!r} is not a directory")
        with tempfile.TemporaryFile(prefix="kiln-") as spool:
            with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT) as t:
                for name in sorted(os.listdir(src)):
                    t.add(os.path.join(src, name), arcname=name)
            size = spool.tell()
            spool.seek(0)
            self._t.request("PUT", self._url("/archive"), query={"path": _guest(path), "user": user}, body=spool,
                            headers={"Content-Type": "application/x-tar", "Content-Length": str(size)})
        return size

    def download_dir(self, path: str, local_dir: PathLike, *, user: Optional[str] = None) -> int:
        """Copy the sandbox's directory tree ``path`` into local_dir (made
        if missing), streamed as a tar. Names that would leave local_dir
        (absolute, "..", through a symlink) and device nodes are refused
        (tarfile's "data" filter where Python has it). Returns the tar's size."""
        dest = os.fspath(local_dir)
        os.makedirs(dest, exist_ok=True)
        with tempfile.TemporaryFile(prefix="kiln-") as spool:
            with self._t.open("GET", self._url("/archive"), query={"path": _guest(path), "user": user}) as r:
                for chunk in r.chunks():
                    spool.write(chunk)
            size = spool.tell()
            spool.seek(0)
            with tarfile.open(fileobj=spool, mode="r:") as t:
                if hasattr(tarfile, "data_filter"):
                    t.extractall(dest, filter="data")
                else:  # pragma: no cover (Python before 3.8.17 / 3.11.4)
                    root = os.path.realpath(dest)
                    for m in t.getmembers():
                        target = os.path.realpath(os.path.join(root, m.name))
                        if m.name.startswith("/") or not (target == root or target.startswith(root + os.sep)) \
                                or m.isdev() or m.islnk():
                            raise ValueError(f"refused tar entry {m.name!r}")
                    t.extractall(dest)
        return size


def _mode(mode: Any) -> int:
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
        raise ValueError("mode must be permission bits, e.g. 0o644")
    return mode


def _guest(path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"guest paths are absolute: {path!r}")
    return path


def _put_query(path: str, mode: int, mkdirs: bool, user: Optional[str] = None) -> dict:  # type: ignore[type-arg]
    if not isinstance(mode, int) or not 0 <= mode <= 0o7777:
        raise ValueError("mode must be permission bits, e.g. 0o644")
    return {"path": _guest(path), "mode": format(mode, "04o"), "mkdirs": mkdirs, "user": user}
