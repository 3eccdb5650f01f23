"""Named volumes (docs/api.md "Volumes"): storage that outlives sandboxes.

    vol = Volume.create("data", size_mib=1024)
    with Sandbox.create("base", volumes=[{"name": "data", "path": "/data"}]) as sb:
        sb.exec("echo kept > /data/f && sync")
    vol.delete()

A volume attached read-write belongs to one sandbox at a time (Conflict
naming it otherwise); read-only attachments share. What the guest syncs
survives its VMM's death.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from .client import Client, _id, resolve


class Volume:
    """A named volume of the workspace: ``id``, ``name``, ``size_mib``,
    ``created_at`` and ``attached_to`` (a list of {sandbox_id, path,
    read_only, slot}), as the server last said."""

    def __init__(self, client: Client, info: Mapping[str, Any]) -> None:
        self._client = client
        self._info: Dict[str, Any] = dict(info)

    @classmethod
    def create(cls, name: str, size_mib: int, *, api_url: Optional[str] = None, api_key: Optional[str] = None,
               client: Optional[Client] = None) -> "Volume":
        """Make a volume (an ext4 disk of size_mib, 1 to 65536) called name
        (a-z, 0-9 and '-'). Conflict if the workspace has one of that name;
        LimitExceeded past the plan's volumes, volume_mib or storage_mib."""
        if not isinstance(size_mib, int) or isinstance(size_mib, bool):
            raise TypeError("size_mib must be an int")
        c = resolve(client, api_url, api_key)
        return cls(c, c.transport.request("POST", "/v1/volumes", json_body={"name": name, "size_mib": size_mib}).json())

    @classmethod
    def list(cls, *, api_url: Optional[str] = None, api_key: Optional[str] = None,
             client: Optional[Client] = None) -> List["Volume"]:
        """The workspace's volumes, oldest first."""
        c = resolve(client, api_url, api_key)
        return [cls(c, v) for v in c.transport.request("GET", "/v1/volumes").json()["volumes"]]

    @classmethod
    def get(cls, volume_id: str, *, api_url: Optional[str] = None, api_key: Optional[str] = None,
            client: Optional[Client] = None) -> "Volume":
        """The volume with this id (vol_...; NotFound if there is none)."""
        c = resolve(client, api_url, api_key)
        return cls(c, c.transport.request("GET", "/v1/volumes/" + _id(volume_id)).json())

    def refresh(self) -> "Volume":
        self._info = dict(self._client.transport.request("GET", "/v1/volumes/" + _id(self.id)).json())
        return self

    def delete(self) -> None:
        """Delete it and its data; Conflict (naming the sandbox) while attached."""
        self._client.transport.request("DELETE", "/v1/volumes/" + _id(self.id), ok=(204,))

    @property
    def id(self) -> str:
        return str(self._info["id"])

    @property
    def name(self) -> str:
        return str(self._info.get("name", ""))

    @property
    def size_mib(self) -> int:
        return int(self._info.get("size_mib", 0))

    @property
    def created_at(self) -> Optional[str]:
        return self._info.get("created_at")

    @property
    def attached_to(self) -> List[Dict[str, Any]]:
        return [dict(a) for a in self._info.get("attached_to", [])]

    def __repr__(self) -> str:
        return f"Volume({self.id!r}, name={self.name!r}, size_mib={self.size_mib})"
