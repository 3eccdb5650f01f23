"""The exceptions of the kiln SDK.

Every error the server answers is ``{"error": {"code", "message"}}`` with an
HTTP status (docs/api.md); the SDK raises the exception class for it, which
carries the server's ``code``, ``message`` and ``status``. Failures on the
client's side (no connection, no answer in time) raise the same classes
with codes of their own: ``connection_error``, ``client_timeout``.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Type


class Credential(NamedTuple):
    """What a client sends as its bearer credential, for the messages of
    AuthError: what it is, the argument and the variable it comes from."""

    what: str
    arg: str
    env: str


API_KEY = Credential("API key", "api_key=", "KILN_API_KEY")
OPERATOR_KEY = Credential("operator credential", "admin_key=", "KILN_ADMIN_KEY")


class KilnError(Exception):
    """Base class: something kiln (or the way to it) refused or failed."""

    def __init__(self, message: str, code: str = "error", status: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        # The server's whole error object: fields beyond code and message,
        # e.g. "ended" and "ended_at" (sandbox_ended), "templates"
        # (template_not_found). Empty for failures on this side.
        self.details: Dict[str, Any] = {}

    def __str__(self) -> str:
        where = f" (HTTP {self.status})" if self.status else ""
        return f"{self.code}{where}: {self.message}"


class InvalidRequest(KilnError):
    """400, 405, 413: the request is malformed, a field is wrong, or too large."""


class AuthError(KilnError):
    """401: no API key, or a malformed, unknown or revoked one."""


class PermissionDenied(KilnError):
    """403: the guest refused a file operation."""


class NotFound(KilnError):
    """404: no such sandbox, snapshot or guest file."""


class Conflict(KilnError):
    """409: the sandbox is in the wrong state for this."""


class RateLimited(KilnError):
    """429: too many requests for the workspace; retry_after says when to return."""

    def __init__(self, message: str, code: str = "rate_limited", status: Optional[int] = 429,
                 retry_after: Optional[float] = None) -> None:
        super().__init__(message, code, status)
        self.retry_after = retry_after


class LimitExceeded(RateLimited):
    """429 limit_exceeded: a create or fork over a limit of the workspace's
    plan (docs/billing.md). ``limit`` names it (running, creates_per_hour,
    vcpus, memory_mib), ``value`` is its value, ``plan`` the plan;
    ``retry_after`` is set for the creates window."""

    @property
    def limit(self) -> Optional[str]:
        return (getattr(self, "details", None) or {}).get("limit")

    @property
    def value(self) -> Optional[int]:
        return (getattr(self, "details", None) or {}).get("value")

    @property
    def plan(self) -> Optional[str]:
        return (getattr(self, "details", None) or {}).get("plan")


class ServerError(KilnError):
    """5xx: kilnd, a VMM or a guest failed, or there is no capacity (503)."""


class Timeout(KilnError):
    """504 from the server (the guest did not answer), or no answer in time here."""


class ConnectionFailed(KilnError):
    """kilnd could not be reached (connection refused, reset, DNS)."""


class ForkError(ServerError):
    """Some children of a fork were made and some were not: the ones made
    are in ``sandboxes`` (delete them, or use them)."""

    def __init__(self, message: str, sandboxes: List[Any], failed: int) -> None:
        super().__init__(message, "fork_incomplete", 201)
        self.sandboxes = sandboxes
        self.failed = failed


_BY_STATUS: Dict[int, Type[KilnError]] = {
    400: InvalidRequest, 401: AuthError, 403: PermissionDenied, 404: NotFound,
    405: InvalidRequest, 409: Conflict, 413: InvalidRequest, 429: RateLimited,
    504: Timeout,
}

_BY_CODE: Dict[str, Type[KilnError]] = {
    "invalid_json": InvalidRequest, "invalid_request": InvalidRequest,
    "method_not_allowed": InvalidRequest, "payload_too_large": InvalidRequest,
    "unauthorized": AuthError, "forbidden": PermissionDenied, "not_found": NotFound,
    "conflict": Conflict, "rate_limited": RateLimited, "limit_exceeded": LimitExceeded,
    "timeout": Timeout,
}


def error_for(status: Optional[int], code: str, message: str,
              credential: Credential = API_KEY) -> KilnError:
    """The exception for an error answer (status None: an SSE error event);
    an AuthError's message says where ``credential`` comes from."""
    cls = (LimitExceeded if code == "limit_exceeded" else None) or _BY_STATUS.get(status or 0) \
        or _BY_CODE.get(code)
    if cls is None:
        cls = ServerError if status is None or status >= 500 else KilnError
    if cls is AuthError:
        message = _auth_hint(message, credential)
    return cls(message, code, status)


def _auth_hint(message: str, c: Credential) -> str:
    """Say where the key comes from: kilnd only knows it got none or a bad one."""
    if message.startswith("missing " + c.what):
        return "no %s: set %s or pass %s (kilnd said: %s)" % (c.what, c.env, c.arg, message)
    return "%s (the %s comes from %s or %s)" % (message, c.what, c.arg, c.env)
