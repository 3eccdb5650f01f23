"""The operator's client: kilnd's /v1/admin routes (docs/security.md, "Operators").

    from kiln import Admin

    with Admin("https://kiln.example.com", "kilnop_...") as admin:
        admin.create_workspace("acme", plan="pro")
        key = admin.create_key("acme", "ci")["key"]   # shown once
        for k in admin.keys("acme"):
            print(k["id"], k["prefix"], k["revoked"])
        admin.update_workspace("acme", suspended=True)

It takes an operator credential (``kilnd admin create`` prints one), never a
workspace's API key: kilnd answers a workspace's key there 403
(PermissionDenied), and an unknown, revoked or missing credential 401
(AuthError). Workspaces are named by their name (1 to 16 of a-z, 0-9, -).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional

from .client import Scope, When, _Connection, _id, _when, clean, key_body
from .errors import OPERATOR_KEY


class Admin(_Connection):
    """A kilnd and an operator credential. Arguments win over the
    environment (KILN_API_URL, KILN_ADMIN_KEY); the URL defaults to
    http://127.0.0.1:7070. ``timeout`` and ``max_retries`` as Client's.

    Each workspace is a dict: ``id``, ``name``, ``plan`` (its own, or the
    server's default), ``limits`` (its own over its plan's; {} when none),
    ``suspended``, ``created_at``, ``live_sandboxes`` (not deleted) and
    ``month_cost_microdollars`` (this UTC month's metered usage, priced).
    Each change is written to the workspace's audit log, with the operator
    credential as the actor.
    """

    def __init__(self, api_url: Optional[str] = None, admin_key: Optional[str] = None, *,
                 timeout: Optional[float] = 300.0, max_retries: int = 3) -> None:
        self.admin_key = admin_key if admin_key is not None else os.environ.get("KILN_ADMIN_KEY")
        super().__init__(api_url, self.admin_key, timeout, max_retries, OPERATOR_KEY)

    # ---- workspaces ---------------------------------------------------------------------------

    def workspaces(self) -> List[Dict[str, Any]]:
        """Every live workspace, by name (GET /v1/admin/workspaces)."""
        return list(self.transport.request("GET", "/v1/admin/workspaces").json()["workspaces"])

    def create_workspace(self, name: str, *, plan: Optional[str] = None,
                         limits: Optional[Mapping[str, int]] = None) -> Dict[str, Any]:
        """A new workspace (POST /v1/admin/workspaces), or one deleted before
        made live again (with no keys). ``plan``: a plan of this server
        (default: the server's default); ``limits``: its own limits over
        the plan's, e.g. {"running": 5} (docs/billing.md). InvalidRequest
        naming an unknown plan or limit or a bad name; Conflict when a live
        workspace has that name."""
        body = clean({"name": name, "plan": plan, "limits": _limits(limits)})
        return dict(self.transport.request("POST", "/v1/admin/workspaces", json_body=body).json())

    def get_workspace(self, name: str) -> Dict[str, Any]:
        """One workspace (GET /v1/admin/workspaces/{name}); NotFound if no
        live workspace has that name."""
        return dict(self.transport.request("GET", _path(name)).json())

    def update_workspace(self, name: str, *, plan: Optional[str] = None,
                         limits: Optional[Mapping[str, int]] = None,
                         suspended: Optional[bool] = None) -> Dict[str, Any]:
        """Change a workspace (PATCH /v1/admin/workspaces/{name}) and return
        it as it is now. ``plan`` alone keeps its own limits, ``limits``
        alone keeps its plan; ``limits`` replaces its own limits ({}: none).
        ``suspended=True``: its keys and dashboard sessions are answered
        403 workspace_suspended (PermissionDenied) on every route, its
        running sandboxes hibernated, its exposed ports refused;
        ``suspended=False`` lifts that. None leaves a field as it is."""
        body = clean({"plan": plan, "limits": _limits(limits), "suspended": suspended})
        return dict(self.transport.request("PATCH", _path(name), json_body=body).json())

    def delete_workspace(self, name: str) -> None:
        """Delete a workspace (DELETE /v1/admin/workspaces/{name}): its keys
        are revoked; its usage and audit log are kept. Conflict while any
        of its sandboxes is not deleted; NotFound if there is no such live
        workspace."""
        self.transport.request("DELETE", _path(name), ok=(204,))

    def create_key(self, workspace: str, name: Optional[str] = None, *, scope: Optional[Scope] = None,
                   expires_in_seconds: Optional[int] = None) -> Dict[str, Any]:
        """A new API key of ``workspace`` (POST
        /v1/admin/workspaces/{name}/keys), as Client.create_key: ``key`` is
        the secret, shown in this answer only."""
        return dict(self.transport.request("POST", _path(workspace) + "/keys",
                                           json_body=key_body(name, scope, expires_in_seconds)).json())

    def keys(self, workspace: str) -> List[Dict[str, Any]]:
        """``workspace``'s API keys, oldest first (GET
        /v1/admin/workspaces/{name}/keys), revoked ones too, as
        Client.keys: each ``id``, ``prefix``, ``name``, ``scope``,
        ``created_at``, ``revoked`` (and ``revoked_at``), ``expires_at``,
        ``last_used_at``; never a secret. NotFound if no live workspace
        has that name."""
        return list(self.transport.request("GET", _path(workspace) + "/keys").json()["keys"])

    def revoke_key(self, workspace: str, key_id: str) -> None:
        """Revoke one of ``workspace``'s keys (DELETE
        /v1/admin/workspaces/{name}/keys/{id}), as Client.revoke_key: it is
        refused (AuthError) from its next request on, and its dashboard
        sessions end; the workspace's audit log names it ("NAME/KEY_ID").
        Revoking a revoked key is no error; NotFound for a key that is not
        that workspace's, or no such live workspace."""
        self.transport.request("DELETE", _path(workspace) + "/keys/" + _id(key_id), ok=(204,))

    # ---- plans ------------------------------------------------------------------------------

    def plans(self) -> List[Dict[str, Any]]:
        """Every plan (GET /v1/admin/plans): the server's (shipped, plans
        file) first, then the operator's own. Each a dict: ``name``,
        ``limits`` (in force), ``operator_limits`` (what the operator set
        over it, or None), ``server_plan``, ``default`` and ``updated_at``
        (None when the operator set nothing)."""
        return list(self.transport.request("GET", "/v1/admin/plans").json()["plans"])

    def get_plan(self, name: str) -> Dict[str, Any]:
        """One plan (GET /v1/admin/plans/{name}); NotFound if there is none
        of that name."""
        return dict(self.transport.request("GET", _plan_path(name)).json())

    def set_plan(self, name: str, limits: Mapping[str, int]) -> Dict[str, Any]:
        """Set the operator's limits of plan ``name`` (PUT
        /v1/admin/plans/{name}) and return the plan as it is now. Over a
        server plan each named limit replaces the plan's and the rest stay
        ({}: the plan as shipped); another name makes a plan, its unnamed
        limits 0 (none). The limits replace what the operator set before,
        as a whole. Every workspace on the plan is held to them from its
        next request, on every API replica; the change is in the
        operator's audit log. InvalidRequest naming a bad limit."""
        body = {"limits": _limits(limits)}
        return dict(self.transport.request("PUT", _plan_path(name), json_body=body).json())

    def delete_plan(self, name: str) -> None:
        """Delete a plan the operator made (DELETE /v1/admin/plans/{name}).
        Conflict while live workspaces are on it (the message says how
        many) and for the server's plans (shipped, plans file, the
        default); NotFound if there is no plan of that name. The delete is
        in the operator's audit log."""
        self.transport.request("DELETE", _plan_path(name), ok=(204,))

    # ---- usage ------------------------------------------------------------------------------

    def usage(self, from_: Optional[When] = None, to: Optional[When] = None) -> Dict[str, Any]:
        """Metered usage of every live workspace over a range, priced (GET
        /v1/admin/usage): ``from``, ``to``, ``workspaces`` (each ``id``,
        ``name``, ``active_vcpu_seconds``, ``memory_gib_hours``,
        ``running_seconds``, ``cost_microdollars``) and their ``total``.
        ``from_`` and ``to`` as Client.usage's (a datetime, Unix seconds,
        or a string kilnd reads); default this month through the hour under
        way."""
        query = {"from": _when(from_), "to": _when(to)}
        return dict(self.transport.request("GET", "/v1/admin/usage", query=query).json())


def _path(name: str) -> str:
    """A workspace's path: a name is a-z, 0-9 and -; anything else cannot
    name one, and must not change the path."""
    if not isinstance(name, str) or not name or any(not (c.isascii() and (c.islower() or c.isdigit() or c == "-"))
                                                    for c in name):
        raise ValueError(f"not a workspace name: {name!r} (1 to 16 of a-z, 0-9 and -)")
    return "/v1/admin/workspaces/" + name


def _plan_path(name: str) -> str:
    """A plan's path: a name is a-z, 0-9, - and _; anything else cannot
    name one, and must not change the path."""
    if not isinstance(name, str) or not name or len(name) > 31 or \
            any(not (c.isascii() and (c.islower() or c.isdigit() or c in "-_")) for c in name):
        raise ValueError(f"not a plan name: {name!r} (1 to 31 of a-z, 0-9, - and _)")
    return "/v1/admin/plans/" + name


def _limits(limits: Optional[Mapping[str, int]]) -> Optional[Dict[str, int]]:
    if limits is None:
        return None
    if not isinstance(limits, Mapping):
        raise TypeError("limits must be a mapping of limit names to whole numbers")
    return dict(limits)
