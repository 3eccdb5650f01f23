"""A workspace's own templates, built from a Dockerfile (docs/templates.md
"Building through the API"): the build context is sent as a tar, the
build runs on kilnd, its log can be followed to its end."""

from __future__ import annotations

import json
import os
import tarfile
import tempfile
from typing import TYPE_CHECKING, Any, Dict, Iterator, Mapping, Optional
from urllib.parse import urlencode

from ._dockerignore import context_files

if TYPE_CHECKING:  # pragma: no cover
    from ._transport import Transport

PathLike = Any


def _name(name: str) -> str:
    ok = set("abcdefghijklmnopqrstuvwxyz0123456789-_")
    if not name or len(name) > 19 or not set(name) <= ok or name[0] in "-_":
        raise ValueError(f"{name!r} is not a template name (1 to 19 of a-z, 0-9, '-', '_')")
    return name


# disk_mib's bounds: kilnd's (docs/templates.md "Disk size").
DISK_MIN_MIB, DISK_MAX_MIB = 64, 1 << 20


def _disk_mib(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not DISK_MIN_MIB <= v <= DISK_MAX_MIB:
        raise ValueError(f"disk_mib {v!r}: want a number of MiB from {DISK_MIN_MIB} to {DISK_MAX_MIB}")
    return v


# A template's shape (docs/templates.md "vCPUs and memory"): kilnd's bounds.
VCPUS_MAX, MEMORY_MIN_MIB, MEMORY_MAX_MIB = 8, 128, 65536


def _bounded(what: str, v: Any, lo: int, hi: int, unit: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{what} {v!r}: want a number of {unit} from {lo} to {hi}")
    return v


def _build_net(v: Any) -> str:
    # none, internet or CIDR[,CIDR...]; kilnd checks each CIDR (its 400 names the bad one).
    if not isinstance(v, str) or not v or "" in v.split(","):
        raise ValueError(f"build_net {v!r}: want 'none', 'internet' or 'CIDR[,CIDR...]'")
    return v


def build(t: "Transport", context_dir: PathLike, name: str, *, dockerfile: Optional[str] = None,
          build_args: Optional[Mapping[str, str]] = None, disk_mib: Optional[int] = None,
          build_net: Optional[str] = None, vcpus: Optional[int] = None,
          memory_mib: Optional[int] = None) -> Dict[str, Any]:
    """POST /v1/templates: what context_dir's .dockerignore keeps (and the
    Dockerfile and .dockerignore), as a gzipped tar (spooled to a
    temporary file, not held in memory); {name, build_id, status:
    "building", context_bytes} once kilnd has unpacked it. disk_mib: the
    root's size (64 to 1048576 MiB, sparse; default the FROM image's);
    build_net: what the RUN steps reach ("none", the default, "internet",
    or "CIDR[,CIDR...]"); vcpus (1 to 8) and memory_mib (128 to 65536):
    the shape of its sandboxes (default 1 vCPU, 256 MiB)."""
    src = os.fspath(context_dir)
    if not os.path.isdir(src):
        raise ValueError(f"{src!r} is not a directory (the build context)")
    pairs = [("name", _name(name))]
    if dockerfile is not None:
        pairs.append(("dockerfile", dockerfile))
    if disk_mib is not None:
        pairs.append(("disk_mib", str(_disk_mib(disk_mib))))
    if build_net is not None:
        pairs.append(("build_net", _build_net(build_net)))
    if vcpus is not None:
        pairs.append(("vcpus", str(_bounded("vcpus", vcpus, 1, VCPUS_MAX, "vCPUs"))))
    if memory_mib is not None:
        pairs.append(("memory_mib", str(_bounded("memory_mib", memory_mib, MEMORY_MIN_MIB, MEMORY_MAX_MIB, "MiB"))))
    pairs += [("build_arg", f"{k}={v}") for k, v in (build_args or {}).items()]  # repeated
    path = "/v1/templates?" + urlencode(pairs)
    # What .dockerignore hides is never sent (a node_modules, a .git, an .env).
    files, _ = context_files(src, dockerfile)
    with tempfile.TemporaryFile(prefix="kiln-context-") as spool:
        with tarfile.open(fileobj=spool, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
            for rel in files:
                tf.add(os.path.join(src, rel), arcname=rel, recursive=False)
        size = spool.tell()
        spool.seek(0)
        r = t.request("POST", path, body=spool, ok=(202,),
                      headers={"Content-Type": "application/gzip", "Content-Length": str(size)})
    return dict(r.json())


def get(t: "Transport", name: str) -> Dict[str, Any]:
    """GET /v1/templates/{name}: status (building, ready, failed), error,
    version, versions, size_bytes, ..."""
    return dict(t.request("GET", "/v1/templates/" + _name(name)).json())


def logs(t: "Transport", name: str) -> str:
    """The build's log as text."""
    return t.request("GET", f"/v1/templates/{_name(name)}/logs").body.decode(errors="replace")


def follow_logs(t: "Transport", name: str) -> Iterator[Dict[str, Any]]:
    """Each line of the build's log as {"kind": "line", "text"}, then
    {"kind": "end", "status", "error"} when the build ends."""
    from .sandbox import sse_events
    with t.open("GET", f"/v1/templates/{_name(name)}/logs", query={"follow": "1"}, timeout=None, ok=(200,),
                headers={"Accept": "text/event-stream"}) as r:
        for event, data in sse_events(r.chunks()):
            if event in ("line", "end"):
                yield {"kind": event, **json.loads(data)}
            if event == "end":
                return


def delete(t: "Transport", name: str) -> None:
    """DELETE /v1/templates/{name} (409 while it builds or a sandbox of it exists)."""
    t.request("DELETE", "/v1/templates/" + _name(name), ok=(204,))
