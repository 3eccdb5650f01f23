"""HTTP to kilnd on http.client: kept-alive connections, bounded retries.

Connections are pooled and reused (HTTP/1.1 keep-alive). One that the
server closed while idle is noticed before it is used (its socket reads as
ready: EOF), so a request is never lost to a stale connection.

Retries: only idempotent methods (GET, PUT, DELETE) are retried, after a
connection failure, 429 (after Retry-After), 502, 503 or 504, a few times
with backoff. POST and PATCH are never sent twice: a create or an exec that
may have happened is not repeated behind the caller's back.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading
import time
import urllib.parse
from typing import IO, Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from .errors import API_KEY, ConnectionFailed, Credential, KilnError, RateLimited, Timeout, error_for

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
RETRY_STATUSES = frozenset({429, 502, 503, 504})
USER_AGENT = "kiln-python/0.1.0"

Body = Union[None, bytes, IO[bytes]]


class Response:
    """A response whose body has been read (or is being streamed)."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class Transport:
    def __init__(self, base_url: str, api_key: Optional[str], timeout: Optional[float],
                 max_retries: int, pool_size: int = 8, credential: Credential = API_KEY) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"api_url must be http(s)://HOST[:PORT], not {base_url!r}")
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.api_key = api_key
        self.credential = credential  # what api_key is, for AuthError's message
        self.timeout = timeout
        self.max_retries = max_retries
        self.pool_size = pool_size
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.connections_made = 0  # for tests and curiosity: keep-alive works if this stays low

    # ---- connections ------------------------------------------------------------------------

    def _connect(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=timeout)
        self.connections_made += 1
        return conn

    @staticmethod
    def _dropped(conn: http.client.HTTPConnection) -> bool:
        """An idle connection whose socket is readable was closed by the
        server (or holds garbage): either way it must not be reused."""
        sock = conn.sock
        if sock is None:
            return True
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def _take(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if self._dropped(conn):
                    conn.close()
                    continue
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                return conn
        return self._connect(timeout)

    def _give_back(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        if resp.will_close or conn.sock is None:
            conn.close()
            return
        with self._lock:
            if len(self._idle) < self.pool_size:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ---- requests ----------------------------------------------------------------------------

    def url(self, path: str, query: Optional[Mapping[str, Any]] = None) -> str:
        q = {k: _query_value(v) for k, v in (query or {}).items() if v is not None}
        return self.prefix + path + ("?" + urllib.parse.urlencode(q) if q else "")

    def _headers(self, extra: Optional[Mapping[str, str]]) -> Dict[str, str]:
        h = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.api_key:
            h["Authorization"] = "Bearer " + self.api_key
        h.update(extra or {})
        return h

    def _send(self, method: str, url: str, body: Body, headers: Dict[str, str],
              timeout: Optional[float]) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn = self._take(timeout)
        try:
            conn.request(method, url, body=body, headers=headers)
            return conn, conn.getresponse()
        except BaseException:
            conn.close()
            raise

    def open(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
             json_body: Any = None, body: Body = None, headers: Optional[Mapping[str, str]] = None,
             timeout: Optional[float] = -1.0, ok: Tuple[int, ...] = (200, 201, 204)
             ) -> "OpenResponse":
        """Send a request and return the response with its body unread
        (for streams and downloads). Errors are raised as KilnError."""
        if timeout is not None and timeout < 0:
            timeout = self.timeout
        hdrs = self._headers(headers)
        if json_body is not None:
            body = json.dumps(json_body).encode()
            hdrs["Content-Type"] = "application/json"
        url = self.url(path, query)
        retries = self.max_retries if method in IDEMPOTENT else 0
        start = body.tell() if body is not None and not isinstance(body, bytes) and _seekable(body) else None
        if body is not None and not isinstance(body, bytes) and start is None:
            retries = 0  # a stream read once cannot be sent again
        attempt = 0
        while True:
            if start is not None:
                body.seek(start)  # type: ignore[union-attr]
            try:
                conn, resp = self._send(method, url, body, hdrs, timeout)
            except socket.timeout as e:
                raise Timeout(f"{method} {url}: no answer from kilnd within {timeout} s",
                              "client_timeout") from e
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                if attempt < retries:
                    attempt += 1
                    time.sleep(_backoff(attempt))
                    continue
                raise ConnectionFailed(f"{method} {url}: cannot reach kilnd at "
                                       f"{self.scheme}://{self.host}:{self.port}: {e}",
                                       "connection_error") from e
            if resp.status in ok:
                return OpenResponse(self, conn, resp)
            try:
                data = resp.read()
            except (OSError, http.client.HTTPException):
                data = b""
            self._give_back(conn, resp)
            err = _error(resp, data, self.credential)
            if resp.status in RETRY_STATUSES and attempt < retries:
                attempt += 1
                wait = _backoff(attempt)
                if isinstance(err, RateLimited) and err.retry_after is not None:
                    wait = min(err.retry_after, 30.0)
                time.sleep(wait)
                continue
            raise err

    def request(self, method: str, path: str, **kw: Any) -> Response:
        """Send a request and read the whole answer."""
        r = self.open(method, path, **kw)
        try:
            data = r.read_all()
        finally:
            r.close()
        return Response(r.status, r.headers, data)


class OpenResponse:
    """A response being read. close() puts the connection back in the pool
    when the body was read to its end, else closes it."""

    def __init__(self, transport: Transport, conn: http.client.HTTPConnection,
                 resp: http.client.HTTPResponse) -> None:
        self._t = transport
        self._conn: Optional[http.client.HTTPConnection] = conn
        self.resp = resp
        self.status = resp.status
        self.headers = {k.lower(): v for k, v in resp.getheaders()}

    def read_all(self) -> bytes:
        try:
            return self.resp.read()
        except socket.timeout as e:
            raise Timeout("kilnd stopped answering in the middle of a response", "client_timeout") from e
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionFailed(f"the connection to kilnd broke: {e}", "connection_error") from e

    def chunks(self, size: int = 65536) -> Iterator[bytes]:
        """The body as it arrives (read1: whatever a chunk brings, without
        waiting for size bytes)."""
        while True:
            try:
                b = self.resp.read1(size)
            except socket.timeout as e:
                raise Timeout("kilnd stopped sending", "client_timeout") from e
            except (OSError, http.client.HTTPException) as e:
                raise ConnectionFailed(f"the connection to kilnd broke: {e}", "connection_error") from e
            if not b:
                return
            yield b

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self.resp.isclosed():
            self._t._give_back(conn, self.resp)
        else:
            conn.close()

    def __enter__(self) -> "OpenResponse":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _seekable(f: Any) -> bool:
    try:
        return bool(f.seekable())
    except (AttributeError, OSError):
        return False


def _backoff(attempt: int) -> float:
    return min(0.25 * (2 ** (attempt - 1)), 4.0)


def _error(resp: http.client.HTTPResponse, data: bytes, credential: Credential) -> KilnError:
    code, message = "http_%d" % resp.status, data.decode("utf-8", "replace").strip()
    details = {}
    try:
        e = json.loads(data)["error"]
        code, message = str(e["code"]), str(e["message"])
        details = dict(e)
    except (ValueError, KeyError, TypeError):
        message = message or resp.reason or "no message"
    err = error_for(resp.status, code, message, credential)
    err.details = details
    if isinstance(err, RateLimited):
        try:
            err.retry_after = float(resp.getheader("Retry-After") or "")
        except ValueError:
            err.retry_after = None
    return err
