"""What a reader needs of an API session: reads, and who is asking.

`ApiClient` (HTTPS) and `LocalApi` (pvesh on this node) both are one; readers (sources/live.py,
sources/cluster.py) and the simulator's tests type against this, not against either class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class ApiReader(Protocol):
    def get(self, path: str, params: Mapping[str, str] | None = None) -> Any: ...

    def close(self) -> None: ...

    @property
    def api_user(self) -> str | None:
        """Who the API sees (user@realm!name for a token); None where it is root on the node
        itself (`--local`: pvesh runs as root@pam)."""
        ...
