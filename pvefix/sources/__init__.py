"""Sources: read a target (a bundle, a live node, the local node) into a HostState.

Heavy modules (proxmoxer, paramiko) load only when a live read is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pvefix.lazy import lazy_names

if TYPE_CHECKING:
    from pvefix.sources.bundle import read_bundle
    from pvefix.sources.live import LiveTrace
    from pvefix.state import HostState
    from pvefix.target.guest.access import GuestAccess
    from pvefix.target.settings import Connection


def read_live(connection: Connection, vmid: int, *, trace: LiveTrace | None = None,
              guest: GuestAccess | None = None) -> HostState:
    """Read a live node (API + SSH, or local), and the guest when `guest` is given; see
    pvefix.sources.live."""
    from pvefix.sources import live

    return live.read_live(connection, vmid, trace=trace, guest=guest)


# The bundle reader (and the host tree it walks) loads on first use: the live check imports
# pvefix.sources.remote_facts and need not pay for it.
__getattr__ = lazy_names(__name__, {"read_bundle": "bundle"})

__all__ = ["read_bundle", "read_live"]
