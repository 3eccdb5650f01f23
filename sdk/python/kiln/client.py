"""The connection to a kilnd: where it is, the API key, the HTTP transport."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence

from ._transport import Transport
from .types import Snapshot

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Sandbox

DEFAULT_URL = "http://127.0.0.1:7070"


class Client:
    """A kilnd and an API key. Arguments win over the environment
    (KILN_API_URL, KILN_API_KEY); the URL defaults to http://127.0.0.1:7070.

    ``timeout`` bounds each request in seconds (None: no bound), except
    exec, which waits for its command. ``max_retries`` applies to idempotent
    requests only (GET, PUT, DELETE).
    """

    def __init__(self, api_url: Optional[str] = None, api_key: Optional[str] = None, *,
                 timeout: Optional[float] = 300.0, max_retries: int = 3) -> None:
        self.api_url = (api_url or os.environ.get("KILN_API_URL") or DEFAULT_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("KILN_API_KEY")
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self.transport = Transport(self.api_url, self.api_key, timeout, max_retries)

    def close(self) -> None:
        """Close the idle connections (the client stays usable)."""
        self.transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.api_url!r})"

    # ---- sandboxes ------------------------------------------------------------------------------

    def create(self, template: Optional[str] = None, **kw: Any) -> "Sandbox":
        """Sandbox.create with this client."""
        from .sandbox import Sandbox
        return Sandbox.create(template, client=self, **kw)

    def get(self, sandbox_id: str) -> "Sandbox":
        from .sandbox import Sandbox
        return Sandbox.get(sandbox_id, client=self)

    def list(self, status: Optional[str] = None, *, template: Optional[str] = None,
             metadata: Optional[Dict[str, str]] = None, limit: Optional[int] = None) -> List["Sandbox"]:
        from .sandbox import Sandbox
        return Sandbox.list(status=status, template=template, metadata=metadata, limit=limit, client=self)

    # ---- snapshots, templates, usage ---------------------------------------------------------------

    def snapshots(self) -> List[Snapshot]:
        j = self.transport.request("GET", "/v1/snapshots").json()
        return [Snapshot.from_json(s) for s in j["snapshots"]]

    def get_snapshot(self, snapshot_id: str) -> Snapshot:
        return Snapshot.from_json(self.transport.request("GET", "/v1/snapshots/" + _id(snapshot_id)).json())

    def delete_snapshot(self, snapshot_id: str) -> None:
        self.transport.request("DELETE", "/v1/snapshots/" + _id(snapshot_id), ok=(204,))

    def templates(self) -> List[Dict[str, Any]]:
        return list(self.transport.request("GET", "/v1/templates").json()["templates"])

    def usage(self) -> Dict[str, Any]:
        return dict(self.transport.request("GET", "/v1/usage").json())

    def limits(self) -> Dict[str, Any]:
        """The workspace's plan, its limits and what is in use (GET /v1/limits)."""
        return dict(self.transport.request("GET", "/v1/limits").json())


_default: Optional[Client] = None
_default_lock = threading.Lock()


def default_client() -> Client:
    """The client made from the environment, shared (made on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default


def resolve(client: Optional[Client], api_url: Optional[str], api_key: Optional[str]) -> Client:
    if client is not None:
        if api_url is not None or api_key is not None:
            raise ValueError("give either client or api_url/api_key, not both")
        return client
    if api_url is not None or api_key is not None:
        return Client(api_url, api_key)
    return default_client()


def _id(s: str) -> str:
    """An id for a URL path: ids are [a-z0-9_]; anything else cannot name
    a resource, and must not change the path."""
    if not isinstance(s, str) or not s or any(not (c.isascii() and (c.isalnum() or c == "_")) for c in s):
        raise ValueError(f"not a kiln id: {s!r}")
    return s


def clean(d: Mapping[str, Any]) -> Dict[str, Any]:
    """A request body without its absent (None) fields."""
    return {k: v for k, v in d.items() if v is not None}


def str_map(name: str, m: Optional[Mapping[str, str]]) -> Optional[Dict[str, str]]:
    if m is None:
        return None
    if not isinstance(m, Mapping):
        raise TypeError(f"{name} must be a mapping of strings")
    return {str(k): str(v) for k, v in m.items()}


def argv_or_cmd(cmd: "str | Sequence[str]") -> Dict[str, Any]:
    if isinstance(cmd, str):
        return {"cmd": cmd}
    argv = [str(a) for a in cmd]
    if not argv:
        raise ValueError("the command is empty")
    return {"argv": argv}
