"""Read a VM's guest for the planner: its running kernel cmdline, its GRUB defaults and the
PCI/BAR placement errors of its kernel log, through the guest channel (SSH or the agent).

    cat /proc/cmdline; cat /etc/default/grub; dmesg   (filtered with the probe's patterns)

`dmesg` may need root (`kernel.dmesg_restrict`); when it fails the facts say so in a note and
carry no BAR errors, which the planner treats as "none seen", not "none there".
"""

from __future__ import annotations

from collections.abc import Callable

from pvefix.errors import PvefixError
from pvefix.paths import GRUB_DEFAULT, PROC_CMDLINE
from pvefix.probe.kernel import scan_kernel_log
from pvefix.state import FileFact, GuestFacts
from pvefix.target.guest.access import GuestAccess
from pvefix.target.guest.channel import GuestChannel
from pvefix.target.sessions import Sessions
from pvefix.target.settings import Connection

GUEST_FILES = (PROC_CMDLINE, GRUB_DEFAULT)  # the guest's own (pvefix.paths)
DMESG_TIMEOUT_S = 30.0


def read_guest_facts(channel: GuestChannel, notes: list[str]) -> GuestFacts:
    """The guest facts the planner uses, read through `channel`."""
    files = {path: FileFact.of(path, channel.read_file(path)) for path in GUEST_FILES}
    proc = files[PROC_CMDLINE].text
    if proc is None:
        raise PvefixError("the guest has no /proc/cmdline (not a Linux guest?)",
                          source=channel.where)
    if files[GRUB_DEFAULT].text is None:
        notes.append(f"guest: no {GRUB_DEFAULT} (not a GRUB guest): pvefix can plan its cmdline "
                     "but not edit it")
    bar_errors: list[str] = []
    dmesg = channel.run(["dmesg"], DMESG_TIMEOUT_S)
    if dmesg.ok:
        _, findings = scan_kernel_log(dmesg.stdout.splitlines())
        bar_errors = [f.line for f in findings]
    else:
        why = dmesg.stderr.strip().splitlines()[-1:] or [f"exit {dmesg.exit_code}"]
        notes.append(f"guest: `dmesg` failed ({why[0][:200]}): its BAR errors are unknown "
                     "(dmesg may need root or kernel.dmesg_restrict=0)")
    return GuestFacts(cmdline=proc.replace("\0", " ").strip(), bar_errors=bar_errors,
                      files=files, where=channel.where)


def guest_reader(conn: Connection | None, guest: GuestAccess, vmid: int,
                 notes: list[str], sessions: Sessions | None = None,
                 ) -> Callable[[str], GuestFacts]:
    """A function of the node's name that opens the channel, reads the facts and closes it
    (with `sessions`: borrows the command's channel and leaves it open)."""

    def read(node: str) -> GuestFacts:
        from pvefix.target.open import open_guest

        if sessions is not None:
            return read_guest_facts(sessions.guest(guest, vmid, node), notes)

        target = conn.model_copy(update={"node": node}) if conn is not None else None
        channel = open_guest(target, guest, vmid)
        try:
            return read_guest_facts(channel, notes)
        finally:
            channel.close()

    return read
