"""`pvefix verify`: run the GPU probe inside a VM's guest (SSH or the QEMU guest agent), keep
its report in the state directory, and compare it with the one taken before.

For `pvefix apply --verify`: `take_probe(conn, guest, vmid, quick)` returns the report and
`store_report(state_dir, vmid, report)` keeps it. Heavy modules (paramiko, proxmoxer) load
only when a probe is taken.
"""

from __future__ import annotations

from pvefix.probe.report import Report as ProbeReport
from pvefix.target.guest.access import GuestAccess, resolve_guest_access
from pvefix.verify.store import store_report
from pvefix.verify.take import take_probe

__all__ = ["GuestAccess", "ProbeReport", "resolve_guest_access", "store_report", "take_probe"]
