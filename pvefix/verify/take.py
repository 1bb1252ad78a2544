"""Take one probe report in a VM's guest: open the way in, run the probe, close it."""

from __future__ import annotations

from pvefix.connection.settings import Connection
from pvefix.errors import PvefixError
from pvefix.probe.report import Report
from pvefix.verify.channel import GuestChannel, run_probe
from pvefix.verify.guest import GuestAccess


def open_channel(conn: Connection | None, guest: GuestAccess, vmid: int) -> GuestChannel:
    """SSH to the guest, or the guest agent of VM `vmid` (checked with a ping first)."""
    if guest.method == "ssh":
        from pvefix.verify.ssh_guest import SshChannel

        return SshChannel(guest)
    if conn is None:
        raise PvefixError("the guest agent is reached through the Proxmox API: give the "
                          "node's connection settings (--host, --connection, a profile)")
    if conn.backend == "local":
        raise PvefixError("the guest agent is reached through the Proxmox API over HTTPS, which"
                          " --local does not use: reach the guest over SSH (--guest-ssh-host),"
                          " or run pvefix with the API backend (--host)")
    from pvefix.connection.api import ApiClient
    from pvefix.verify.agent import AgentChannel, find_node

    api = ApiClient(conn)
    try:
        node = conn.node or find_node(api, vmid)
        channel = AgentChannel(api, node, vmid, python=guest.python)
        channel.ping()
    except BaseException:
        api.close()
        raise
    return channel


def take_probe(conn: Connection | None, guest: GuestAccess, vmid: int, quick: bool,
               *, budget: float | None = None) -> Report:
    """Run the probe in VM `vmid`'s guest and return its report (validated by pydantic).

    `conn` is the node's connection (needed for the guest agent; may be None for SSH);
    `budget` is the probe's own time budget in seconds (default 28 quick, 600 full).
    """
    channel = open_channel(conn, guest, vmid)
    try:
        return run_probe(channel, quick=quick, python=guest.python, budget=budget)
    finally:
        channel.close()
