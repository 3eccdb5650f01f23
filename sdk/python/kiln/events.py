"""The workspace's event stream (docs/api.md "Events"): ``client.events()``
iterates what happens to the sandboxes as it happens (no polling). A
connection that breaks is opened again with the last event's id, so no
event in kilnd's window (its last 8192 events, an hour at most) is
missed; one that cannot be resumed yields a ``resync`` event (list the
sandboxes again)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Tuple

from .errors import ConnectionFailed, Timeout

if TYPE_CHECKING:  # pragma: no cover
    from ._transport import OpenResponse, Transport

#: kilnd sends a comment every 15 s; this much silence means it is gone.
EVENTS_SILENCE_S = 60.0


@dataclass(frozen=True)
class Event:
    """One event: ``kind`` is sandbox (its lifecycle), exec, ttl, usage or
    resync; ``type`` what happened (created, ready, paused, resumed,
    hibernated, woken, forked, failed, deleting, deleted, exec_started,
    exec_ended, ttl_warning; "usage" and "resync" for those kinds);
    ``data`` the whole JSON object (state, error, parent_id, child, exec,
    exit_code, cmd, due_at...); ``id`` the event's id (None for usage and
    resync)."""
    kind: str
    type: str
    sandbox_id: str
    id: Optional[str] = None
    data: Dict[str, Any] = field(default_factory=dict)


def sse_records(chunks: Iterable[bytes]) -> Iterator[Tuple[Optional[str], str, str]]:
    """(id, event, data) of each Server-Sent Event, the id as the event
    carries it (None when it has none)."""
    buf, ev, eid = b"", "message", None
    data: List[str] = []
    for chunk in chunks:
        buf += chunk
        while True:
            i = buf.find(b"\n")
            if i < 0:
                break
            line, buf = buf[:i].rstrip(b"\r"), buf[i + 1:]
            if not line:
                if data:
                    yield eid, ev, "\n".join(data)
                ev, eid, data = "message", None, []
            elif not line.startswith(b":"):
                name, _, value = line.partition(b":")
                value = value[1:] if value.startswith(b" ") else value
                text = value.decode("utf-8", "replace")
                if name == b"event":
                    ev = text
                elif name == b"data":
                    data.append(text)
                elif name == b"id":
                    eid = text


class EventStream:
    """An open event stream: iterate it for Events; close() ends it (also
    from another thread). ``last_event_id`` is the id of the last event
    yielded, to resume from later (``client.events(last_event_id=...)``)."""

    def __init__(self, transport: "Transport", sandbox: Optional[str], last_event_id: Optional[str],
                 reconnects: int) -> None:
        self._t = transport
        self._sandbox = sandbox
        self.last_event_id = last_event_id
        self._reconnects = reconnects
        self._resp: Optional["OpenResponse"] = None
        self._closed = False
        self._open()

    def _open(self) -> None:
        headers = {"Accept": "text/event-stream"}
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        query = {"sandbox": self._sandbox} if self._sandbox else None
        self._resp = self._t.open("GET", "/v1/events", query=query, timeout=EVENTS_SILENCE_S, ok=(200,),
                                  headers=headers)

    def __iter__(self) -> Iterator[Event]:
        left = self._reconnects
        while not self._closed:
            resp = self._resp
            try:
                for eid, ev, text in sse_records(resp.chunks()):  # type: ignore[union-attr]
                    try:
                        d = json.loads(text)
                    except ValueError:
                        continue
                    if eid:
                        self.last_event_id = eid
                    left = self._reconnects
                    if ev == "resync":
                        yield Event("resync", "resync", "")
                    elif ev == "usage":
                        yield Event("usage", "usage", str(d.get("id", "")), None, d)
                    else:
                        yield Event(ev, str(d.get("type", "")), str(d.get("id", "")), eid, d)
            except (ConnectionFailed, Timeout):
                if self._closed:
                    return
            if self._closed or left <= 0:
                return
            left -= 1
            if resp is not None:
                resp.close()
            self._open()  # with Last-Event-ID: what was missed comes first

    def close(self) -> None:
        self._closed = True
        resp, self._resp = self._resp, None
        if resp is not None:
            resp.close()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
