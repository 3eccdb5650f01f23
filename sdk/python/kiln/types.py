"""Plain result types of the kiln SDK."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional


@dataclass(frozen=True)
class ExecResult:
    """How a command ended, and what it printed."""

    stdout: str
    stderr: str
    exit_code: int
    signal: Optional[int] = None
    timed_out: bool = False
    duration_ms: float = 0.0
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """It exited with status 0 (and was not killed)."""
        return self.exit_code == 0 and not self.timed_out

    @classmethod
    def from_json(cls, j: Mapping[str, Any], stdout: Optional[str] = None,
                  stderr: Optional[str] = None) -> "ExecResult":
        return cls(stdout=j.get("stdout", "") if stdout is None else stdout,
                   stderr=j.get("stderr", "") if stderr is None else stderr,
                   exit_code=int(j["exit_code"]), signal=j.get("signal"),
                   timed_out=bool(j.get("timed_out", False)),
                   duration_ms=float(j.get("duration_ms", 0.0)),
                   truncated=bool(j.get("truncated", False)))


@dataclass(frozen=True)
class FileInfo:
    """A guest file: from files.stat (path set) or files.list (name relative
    to the listed directory)."""

    name: str
    type: str
    size: int
    mode: str
    uid: int
    gid: int
    modified_at: Optional[str]
    path: Optional[str] = None
    link: Optional[str] = None

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "FileInfo":
        path = j.get("path")
        name = j.get("name")
        if name is None:
            name = (path or "").rstrip("/").rsplit("/", 1)[-1] or "/"
        return cls(name=name, type=j["type"], size=int(j.get("size", 0)), mode=j.get("mode", ""),
                   uid=int(j.get("uid", 0)), gid=int(j.get("gid", 0)),
                   modified_at=j.get("modified_at"), path=path, link=j.get("link"))


@dataclass(frozen=True)
class Snapshot:
    """A snapshot of a sandbox: create sandboxes from it with
    ``Sandbox.create(from_snapshot=snap.id)``."""

    id: str
    sandbox_id: str
    template: str
    created_at: Optional[str]
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "Snapshot":
        return cls(id=j["id"], sandbox_id=j.get("sandbox_id", ""), template=j.get("template", ""),
                   created_at=j.get("created_at"), raw=dict(j))


class AuditPage(List[Dict[str, Any]]):
    """A page of the audit log (Client.audit): a list of its entries, newest
    first, as before, and ``next_cursor``: pass it as ``audit(cursor=...)``
    for the entries after them (older); None when this page was the last."""

    def __init__(self, entries: Iterable[Dict[str, Any]] = (), next_cursor: Optional[str] = None) -> None:
        super().__init__(entries)
        self.next_cursor = next_cursor

    def __repr__(self) -> str:
        return f"AuditPage({list.__repr__(self)}, next_cursor={self.next_cursor!r})"
