"""Take one probe report in a VM's guest: open the way in, run the probe, close it."""

from __future__ import annotations

from pvefix.probe.report import Report
from pvefix.target.guest.access import GuestAccess
from pvefix.target.open import open_guest
from pvefix.target.settings import Connection
from pvefix.verify.channel import run_probe


def take_probe(conn: Connection | None, guest: GuestAccess, vmid: int, quick: bool,
               *, budget: float | None = None) -> Report:
    """Run the probe in VM `vmid`'s guest and return its report (validated by pydantic).

    `conn` is the node's connection (needed for the guest agent; may be None for SSH);
    `budget` is the probe's own time budget in seconds (default 28 quick, 600 full).
    """
    channel = open_guest(conn, guest, vmid)
    try:
        return run_probe(channel, quick=quick, python=guest.python, budget=budget)
    finally:
        channel.close()
