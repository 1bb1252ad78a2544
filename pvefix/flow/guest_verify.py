"""`pvefix apply --verify`: a probe in the guest before the first write and one after the
phase is activated, both kept in the state directory, and the comparison printed.

Only errors fail an apply. A worse P2P figure after the change does not (the change is in
place and verified); it is said loudly, with the rollback command, instead.
"""

from __future__ import annotations

import time
from pathlib import Path

from pvefix.errors import PvefixError
from pvefix.executor.console import Console
from pvefix.probe.report import Report
from pvefix.target.guest.access import GuestAccess
from pvefix.target.settings import Connection
from pvefix.verify.outcome import VerifyOutcome, build_outcome, render_outcome
from pvefix.verify.store import probe_owner, store_report
from pvefix.verify.take import take_probe

#: How long to wait for the guest to answer after a VM restart (boot, agent or sshd start).
GUEST_WAIT_S = 300.0
RETRY_S = 5.0


def probe_before(conn: Connection, guest: GuestAccess, vmid: int, state_dir: Path,
                 quick: bool, console: Console) -> tuple[str, Report]:
    """The baseline probe (before any write); an error here stops the apply unwritten."""
    console.progress(f"--verify: probing the guest before the change ({guest.where})")
    try:
        report = take_probe(conn, guest, vmid, quick)
    except PvefixError as exc:
        raise PvefixError(f"--verify: the probe before the change failed, nothing was "
                          f"written: {exc}") from None
    stored = store_report(state_dir, vmid, report, probe_owner(guest, conn))
    console.progress(f"--verify: report before the change kept in {stored}")
    return stored.stem, report


def probe_after(conn: Connection, guest: GuestAccess, vmid: int, state_dir: Path,
                quick: bool, console: Console, before: tuple[str, Report], *,
                wait_s: float = GUEST_WAIT_S, rollback_cmd: str = "") -> VerifyOutcome:
    """The probe after activation (retried while the guest boots), kept and compared."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            report = take_probe(conn, guest, vmid, quick)
            break
        except PvefixError as exc:
            if time.monotonic() >= deadline:
                raise PvefixError(
                    f"--verify: the change is applied, but the probe after it failed: {exc}"
                    + (f"\nto put everything back: {rollback_cmd}" if rollback_cmd else "")
                ) from None
            console.progress(f"--verify: the guest does not answer yet ({exc}); retrying")
            time.sleep(RETRY_S)
    stored = store_report(state_dir, vmid, report, probe_owner(guest, conn))
    outcome = build_outcome(vmid, guest.where, stored, report, before)
    console.say(render_outcome(outcome).rstrip("\n"))
    if outcome.worse:
        console.say("!" * 72)
        console.say(f"WARNING: P2P GOT WORSE after this change ({len(outcome.p2p_regressions)} "
                    "regression(s) above). The change is applied and verified; if this is not "
                    "what you want, put it back with:")
        console.say(f"    {rollback_cmd}" if rollback_cmd else "    pvefix rollback")
        console.say("!" * 72)
    return outcome
