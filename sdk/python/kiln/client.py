"""The connection to a kilnd: where it is, the API key, the HTTP transport."""

from __future__ import annotations

import datetime
import os
import threading
import urllib.parse
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Literal, Mapping, Optional, Sequence, TypeVar, Union

from ._transport import Transport
from .errors import API_KEY, Credential
from .types import AuditPage, Snapshot

if TYPE_CHECKING:  # pragma: no cover
    from .events import EventStream
    from .sandbox import Sandbox

DEFAULT_URL = "http://127.0.0.1:7070"

# A time in a usage query: a datetime, Unix seconds, or a string kilnd reads.
When = Union[datetime.datetime, int, str]

# A key's scope: "full" (every route) or "read" (GET routes only, not the PTY).
Scope = Literal["full", "read"]

_Self = TypeVar("_Self", bound="_Connection")


class _Connection:
    """A kilnd, a bearer credential and the HTTP transport to them: what the
    workspace's Client and the operator's Admin have in common."""

    def __init__(self, api_url: Optional[str], key: Optional[str], timeout: Optional[float],
                 max_retries: int, credential: Credential) -> None:
        self.api_url = (api_url or os.environ.get("KILN_API_URL") or DEFAULT_URL).rstrip("/")
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self.transport = Transport(self.api_url, key, timeout, max_retries, credential=credential)

    def close(self) -> None:
        """Close the idle connections (the client stays usable)."""
        self.transport.close()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.api_url!r})"


class Client(_Connection):
    """A kilnd and an API key. Arguments win over the environment
    (KILN_API_URL, KILN_API_KEY); the URL defaults to http://127.0.0.1:7070.

    ``timeout`` bounds each request in seconds (None: no bound), except
    exec, which waits for its command. ``max_retries`` applies to idempotent
    requests only (GET, PUT, DELETE).
    """

    def __init__(self, api_url: Optional[str] = None, api_key: Optional[str] = None, *,
                 timeout: Optional[float] = 300.0, max_retries: int = 3) -> None:
        self.api_key = api_key if api_key is not None else os.environ.get("KILN_API_KEY")
        super().__init__(api_url, self.api_key, timeout, max_retries, API_KEY)

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

    def build_template(self, context_dir: Any, name: str, *, dockerfile: Optional[str] = None,
                       build_args: Optional[Mapping[str, str]] = None, disk_mib: Optional[int] = None,
                       build_net: Optional[str] = None, vcpus: Optional[int] = None,
                       memory_mib: Optional[int] = None) -> Dict[str, Any]:
        """Build the workspace's own template ``name`` from the Dockerfile
        in context_dir (kiln.templates.build: disk_mib, the root's size;
        build_net, what its RUN steps reach; vcpus and memory_mib, its
        sandboxes' shape); returns once kilnd runs it."""
        from . import templates
        return templates.build(self.transport, context_dir, name, dockerfile=dockerfile, build_args=build_args,
                               disk_mib=disk_mib, build_net=build_net, vcpus=vcpus, memory_mib=memory_mib)

    def template(self, name: str) -> Dict[str, Any]:
        """One template: status (building, ready, failed), error, versions, size."""
        from . import templates
        return templates.get(self.transport, name)

    def template_logs(self, name: str, follow: bool = False) -> Any:
        """The build's log as text; with follow, an iterator of {"kind":
        "line", "text"} until {"kind": "end", "status", "error"}."""
        from . import templates
        return templates.follow_logs(self.transport, name) if follow else templates.logs(self.transport, name)

    def delete_template(self, name: str) -> None:
        from . import templates
        templates.delete(self.transport, name)

    def usage(self, granularity: Optional[str] = None, from_: Optional[When] = None, to: Optional[When] = None,
              sandbox: Optional[str] = None) -> Dict[str, Any]:
        """The workspace's usage (GET /v1/usage, docs/billing.md). With no
        argument: totals over its sandboxes. With any: the metered hours
        by ``granularity`` "hour" (default) or "day", each priced, in
        ``buckets``, and their ``total``; ``from_`` and ``to`` bound them
        (a datetime, Unix seconds, or a string kilnd reads: "2026-12-01",
        "2026-12-01T05:00:00Z"; default this month), ``sandbox`` keeps one
        sandbox's hours. Money is in integer micro-dollars."""
        if granularity is None and from_ is None and to is None and sandbox is None:
            return dict(self.transport.request("GET", "/v1/usage").json())
        query = {"granularity": granularity or "hour", "from": _when(from_), "to": _when(to), "sandbox": sandbox}
        return dict(self.transport.request("GET", "/v1/usage", query=query).json())

    def billing(self) -> Dict[str, Any]:
        """This UTC month so far (GET /v1/billing): plan, prices, usage,
        cost, the cost projected to the month's end, the credit left."""
        return dict(self.transport.request("GET", "/v1/billing").json())

    def statements(self) -> List[Dict[str, Any]]:
        """The monthly statements, newest first (GET /v1/statements): the
        month under way "open", the closed ones never changing."""
        return list(self.transport.request("GET", "/v1/statements").json()["statements"])

    def statement(self, month: str) -> Dict[str, Any]:
        """One month's statement, ``month`` as "2026-11" (GET
        /v1/statements/{month}). NotFound for a month that has not begun
        or had no usage; InvalidRequest for a malformed month."""
        if not isinstance(month, str) or not month:
            raise ValueError(f"not a month: {month!r} (want 'YYYY-MM')")
        return dict(self.transport.request("GET", "/v1/statements/" + urllib.parse.quote(month, safe="")).json())

    def events(self, sandbox: Optional[str] = None, *, last_event_id: Optional[str] = None,
               reconnects: int = 3) -> "EventStream":
        """The workspace's events as they happen (GET /v1/events; one
        sandbox's with ``sandbox``): iterate the result for Events, close()
        it to stop. Opened with ``last_event_id``, the events after it come
        first; a broken connection is opened again (up to ``reconnects``
        times in a row) from the last event seen."""
        from .events import EventStream
        return EventStream(self.transport, _id(sandbox) if sandbox else None, last_event_id, reconnects)

    def limits(self) -> Dict[str, Any]:
        """The workspace's plan, its limits and what is in use (GET /v1/limits)."""
        return dict(self.transport.request("GET", "/v1/limits").json())

    # ---- API keys, audit log ----------------------------------------------------------------

    def keys(self) -> List[Dict[str, Any]]:
        """The workspace's API keys, oldest first (GET /v1/keys), revoked
        ones too: each ``id``, ``prefix`` (its first 13 characters; kilnd
        keeps only the key's hash), ``name``, ``scope``, ``created_at``,
        ``revoked`` (and ``revoked_at``), ``expires_at`` and
        ``last_used_at`` (to the minute; None when never)."""
        return list(self.transport.request("GET", "/v1/keys").json()["keys"])

    def create_key(self, name: Optional[str] = None, *, scope: Optional[Scope] = None,
                   expires_in_seconds: Optional[int] = None) -> Dict[str, Any]:
        """A new API key of the workspace (POST /v1/keys): ``id``, ``key``
        (the secret, shown in this answer only: keep it), ``prefix``,
        ``name``, ``scope`` and ``expires_at``. ``scope`` "full" (default)
        or "read" (GET routes only, not the PTY); ``expires_in_seconds``
        from 1 to about ten years, None: it never expires. A read key
        cannot make keys (PermissionDenied)."""
        return dict(self.transport.request("POST", "/v1/keys",
                                           json_body=key_body(name, scope, expires_in_seconds)).json())

    def revoke_key(self, key_id: str) -> None:
        """Revoke one of the workspace's keys (DELETE /v1/keys/{id}): it is
        refused (AuthError) from its next request on, and its dashboard
        sessions end. Revoking a revoked key is no error; NotFound for a
        key that is not the workspace's."""
        self.transport.request("DELETE", "/v1/keys/" + _id(key_id), ok=(204,))

    def audit(self, limit: Optional[int] = None, *, cursor: Optional[str] = None,
              key: Optional[str] = None) -> AuditPage:
        """The workspace's audit log, newest first (GET /v1/audit): every
        call by one of its keys (or an operator, on the workspace) of a
        route that is not a GET, refused ones too. Each entry: ``id``,
        ``time``, ``key_id``, ``key_prefix``, ``method``, ``route`` (the
        pattern, "/v1/sandboxes/{id}/exec"), ``target`` (the ids the path
        names, or the id a 201 made; an operator's: the workspace's id for
        its creation, the key's id for a key made, "NAME/KEY_ID" for a key
        revoked; None when none) and ``status``. ``limit``: the newest 1
        to 1000 (default 100); ``cursor``: a page's ``next_cursor``, for
        the entries after it (older); ``key``: only this key's (or
        operator credential's) entries, by its id or its shown prefix.

        The answer is a list of the entries, as it always was, an AuditPage
        whose ``next_cursor`` is the next page's cursor (None when this page
        was the last); iter_audit follows them. An entry is written once its
        request is answered, so it may show a few milliseconds after."""
        j = self.transport.request("GET", "/v1/audit", query={"limit": limit, "cursor": cursor, "key": key}).json()
        return AuditPage(j["entries"], j.get("next_cursor"))

    def iter_audit(self, *, key: Optional[str] = None, cursor: Optional[str] = None,
                   page_size: int = 1000) -> Iterator[Dict[str, Any]]:
        """Every entry of the audit log, newest first, as audit's, the
        pages (of ``page_size``, 1 to 1000) fetched as the iteration needs
        them, following next_cursor to the last. ``key`` as audit's;
        ``cursor`` starts after that page's entries. Entries written while
        it runs are newer than its first page: they are not among them."""
        while True:
            page = self.audit(page_size, cursor=cursor, key=key)
            yield from page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

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


def _when(t: Optional[When]) -> Optional[str]:
    """A usage query's time as kilnd reads it: a datetime in UTC as RFC 3339
    (a naive one is taken as UTC), Unix seconds, or a string as given."""
    if t is None or isinstance(t, str):
        return t
    if isinstance(t, datetime.datetime):
        if t.tzinfo is not None:
            t = t.astimezone(datetime.timezone.utc)
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(t, int) and not isinstance(t, bool):
        return str(t)
    raise TypeError(f"a time is a datetime, Unix seconds or a string, not {type(t).__name__}")


def key_body(name: Optional[str], scope: Optional[Scope], expires_in_seconds: Optional[int]) -> Dict[str, Any]:
    """The body of POST /v1/keys (and of an operator's key for a workspace)."""
    return clean({"name": name, "scope": scope, "expires_in_seconds": expires_in_seconds})


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
