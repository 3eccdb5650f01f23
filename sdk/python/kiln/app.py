"""Apps (docs/api.md "Apps"): a long-running service at a stable URL.

    app = App.create("web", port=8000, command="python3 -m http.server 8000")
    print(app.url)          # http://app-....DOMAIN/, no key needed
    app.deploy(command="python3 -m http.server 8000 --directory /srv")
    for entry in app.follow_logs():
        print(entry["text"])
    app.delete()

kiln keeps the app's sandbox: the command is restarted when it exits (the
restart policy), the sandbox remade when it ends, hibernated when idle and
woken by the next request; a deploy switches the URL once the new version
listens. The server needs --domain (InvalidRequest otherwise).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any, Dict, Iterator, List, Mapping, Optional

from .client import Client, clean, resolve, str_map

# kilnd waits for the command to listen (ready_timeout_seconds, 60 by
# default) after booting the sandbox: the request may take that and more.
_READY_DEFAULT_S = 60
_BOOT_SLACK_S = 120


def _key(app: str) -> str:
    """An app's name or id for a URL path: [a-z0-9_-], nothing that could
    change the path."""
    if not isinstance(app, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", app):
        raise ValueError(f"not an app's name or id: {app!r}")
    return urllib.parse.quote(app, safe="")


def _fields(port: Optional[int], command: Optional[str], template: Optional[str], from_snapshot: Optional[str],
            env: Optional[Mapping[str, str]], restart: Optional[str], idle_seconds: Optional[int],
            ready_timeout_seconds: Optional[int]) -> Dict[str, Any]:
    for name, v in (("port", port), ("idle_seconds", idle_seconds), ("ready_timeout_seconds", ready_timeout_seconds)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            raise TypeError(f"{name} must be an int")
    return clean({"port": port, "command": command, "template": template, "from_snapshot": from_snapshot,
                  "env": str_map("env", env), "restart": restart, "idle_seconds": idle_seconds,
                  "ready_timeout_seconds": ready_timeout_seconds})


class App:
    """An app of the workspace, as the server last said: ``id``, ``name``,
    ``url``, ``port``, ``status`` (its sandbox's: running, hibernated, ...;
    failed with ``reason``), ``version``, ``sandbox_id``; ``info`` has every
    field (command, template, from_snapshot, env, restart, idle_seconds,
    vm_restarts, created_at, updated_at)."""

    def __init__(self, client: Client, info: Mapping[str, Any]) -> None:
        self._client = client
        self._info: Dict[str, Any] = dict(info)

    @classmethod
    def create(cls, name: str, *, port: int, command: Optional[str] = None, template: Optional[str] = None,
               from_snapshot: Optional[str] = None, sandbox_id: Optional[str] = None,
               env: Optional[Mapping[str, str]] = None, restart: Optional[str] = None,
               idle_seconds: Optional[int] = None, ready_timeout_seconds: Optional[int] = None,
               api_url: Optional[str] = None, api_key: Optional[str] = None,
               client: Optional[Client] = None) -> "App":
        """Deploy an app called ``name`` (a-z, 0-9 and '-'): ``command``
        listening on ``port``, in a sandbox from ``template`` (default
        "base"), ``from_snapshot``, or the running sandbox ``sandbox_id``
        made an app. ``restart``: "always", "on-failure" (default) or
        "never"; ``idle_seconds``: hibernated after this idle (0: never).
        Returns once the command listens: Timeout (with the end of its
        log) if it did not within ``ready_timeout_seconds``, and nothing is
        left; Conflict for a name the workspace has."""
        c = resolve(client, api_url, api_key)
        body = _fields(port, command, template, from_snapshot, env, restart, idle_seconds, ready_timeout_seconds)
        body.update(clean({"name": name, "sandbox_id": sandbox_id}))
        return cls(c, c.transport.request("POST", "/v1/apps", json_body=body,
                                          timeout=_wait(c, ready_timeout_seconds)).json())

    @classmethod
    def list(cls, *, api_url: Optional[str] = None, api_key: Optional[str] = None,
             client: Optional[Client] = None) -> List["App"]:
        """The workspace's apps, oldest first."""
        c = resolve(client, api_url, api_key)
        return [cls(c, a) for a in c.transport.request("GET", "/v1/apps").json()["apps"]]

    @classmethod
    def get(cls, app: str, *, api_url: Optional[str] = None, api_key: Optional[str] = None,
            client: Optional[Client] = None) -> "App":
        """The app with this name or id (app_...); NotFound if none."""
        c = resolve(client, api_url, api_key)
        return cls(c, c.transport.request("GET", "/v1/apps/" + _key(app)).json())

    def refresh(self) -> "App":
        self._info = dict(self._client.transport.request("GET", self._path).json())
        return self

    def deploy(self, *, port: Optional[int] = None, command: Optional[str] = None, template: Optional[str] = None,
               from_snapshot: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
               restart: Optional[str] = None, idle_seconds: Optional[int] = None,
               ready_timeout_seconds: Optional[int] = None) -> "App":
        """A new version: the fields given replace the app's, the rest are
        kept. Its sandbox is made and the URL switched to it once it
        listens (version + 1); until then, and on if it never does
        (Timeout), the old version serves. Conflict when another deploy
        switched first."""
        body = _fields(port, command, template, from_snapshot, env, restart, idle_seconds, ready_timeout_seconds)
        self._info = dict(self._client.transport.request("POST", self._path + "/deploy", json_body=body,
                                                         timeout=_wait(self._client, ready_timeout_seconds)).json())
        return self

    def delete(self) -> None:
        """Delete the app, its sandboxes and its URL."""
        self._client.transport.request("DELETE", self._path, ok=(204,))

    def logs(self, tail: int = 100) -> Dict[str, Any]:
        """{"events": [{"at", "text"}], "lines": [...]}: what kiln did with
        the app (deployed, remade, ...) and the last ``tail`` lines (0 to
        10000) of its log (the command's output and the supervisor's
        "kiln: ..." lines). Reading the log wakes a hibernated app."""
        return dict(self._client.transport.request("GET", self._path + "/logs", query={"tail": tail}).json())

    def follow_logs(self, tail: int = 100) -> Iterator[Dict[str, Any]]:
        """The events, then the last ``tail`` lines of the log and each new
        one as it is written: {"kind": "event", "at", "text"} or {"kind":
        "line", "text"}, until the app's sandbox stops sending (deleted,
        replaced by a deploy); stop early by leaving the loop. A follower
        keeps the app from idling."""
        from .sandbox import STREAM_SILENCE_S, sse_events
        with self._client.transport.open("GET", self._path + "/logs", query={"tail": tail, "follow": "true"},
                                         timeout=STREAM_SILENCE_S, ok=(200,),
                                         headers={"Accept": "text/event-stream"}) as r:
            for event, data in sse_events(r.chunks()):
                if event in ("event", "line"):
                    yield {"kind": event, **json.loads(data)}
                elif event == "end":
                    return

    @property
    def _path(self) -> str:
        return "/v1/apps/" + _key(self.id)

    @property
    def info(self) -> Dict[str, Any]:
        return dict(self._info)

    @property
    def id(self) -> str:
        return str(self._info["id"])

    @property
    def name(self) -> str:
        return str(self._info.get("name", ""))

    @property
    def url(self) -> Optional[str]:
        return self._info.get("url")

    @property
    def port(self) -> int:
        return int(self._info.get("port", 0))

    @property
    def status(self) -> str:
        return str(self._info.get("status", ""))

    @property
    def version(self) -> int:
        return int(self._info.get("version", 0))

    @property
    def sandbox_id(self) -> Optional[str]:
        return self._info.get("sandbox_id")

    def __repr__(self) -> str:
        return f"App({self.id!r}, name={self.name!r}, url={self.url!r}, version={self.version})"


def _wait(c: Client, ready: Optional[int]) -> Optional[float]:
    """The request timeout of a create or deploy: the client's, or longer
    when the app may take longer to listen."""
    t = c.transport.timeout
    need = float((ready or _READY_DEFAULT_S) + _BOOT_SLACK_S)
    return None if t is None else max(t, need)
