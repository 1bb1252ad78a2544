"""`pvefix verify VMID`: probe the guest, keep the report, compare with the one before."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, TextIO

from pvefix.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, PvefixError
from pvefix.probe.report import Report
from pvefix.store.statedir import open_state_dir
from pvefix.target.guest.access import GuestAccess
from pvefix.target.settings import Connection
from pvefix.verify.outcome import build_outcome, render_outcome
from pvefix.verify.store import (
    find_report,
    probe_owner,
    read_report,
    store_report,
    stored_reports,
)
from pvefix.verify.take import take_probe

#: Exit status when P2P got worse against the baseline (as `check` reports drift).
EXIT_P2P_WORSE = EXIT_CHANGES


def choose_baseline(state_dir: Path, vmid: int, baseline: str | None,
                    before: Path | None, owner: str | None = None) -> tuple[str, Report] | None:
    """The report to compare with: `--before FILE`, `--baseline ID`, else the newest kept."""
    if baseline is not None and before is not None:
        raise PvefixError("give --baseline ID or --before FILE, not both")
    if before is not None:
        return str(before), read_report(before)
    if baseline is not None:
        path = find_report(state_dir, vmid, baseline, owner)
        return path.stem, read_report(path)
    kept = stored_reports(state_dir, vmid, owner)
    return (kept[-1].stem, read_report(kept[-1])) if kept else None


def execute_verify(vmid: int, *, conn: Connection | None, guest: GuestAccess, quick: bool,
                   baseline: str | None, before: Path | None, fmt: Literal["text", "json"],
                   budget: float | None, state_dir: Path | None, stdout: TextIO) -> int:
    """Probe, keep, compare, print. 0: measured and P2P is not worse; 2: P2P got worse; 1:
    the probe measured nothing (no GPU in the guest), which proves nothing."""
    state = open_state_dir(state_dir)
    owner = probe_owner(guest, conn)  # two hosts' VM 100 keep apart baselines
    chosen = choose_baseline(state, vmid, baseline, before, owner)  # fail before the probe
    report = take_probe(conn, guest, vmid, quick, budget=budget)
    stored = store_report(state, vmid, report, owner)
    outcome = build_outcome(vmid, guest.where, stored, report, chosen)
    if fmt == "json":
        stdout.write(outcome.model_dump_json(by_alias=True, indent=2) + "\n")
    else:
        stdout.write(render_outcome(outcome))
    if outcome.worse:
        return EXIT_P2P_WORSE
    return EXIT_OK if outcome.measured else EXIT_ERROR


def execute_workload(vmid: int, *, conn: Connection | None, guest: GuestAccess, command: str,
                     timeout: float, state_dir: Path | None, fmt: Literal["text", "json"],
                     stdout: TextIO) -> int:
    """`verify --workload`: run it, keep the result, print it. 0 pass; 2 fail or hang."""
    from pvefix.target.open import open_guest
    from pvefix.verify.workload import run_workload, store_workload

    state = open_state_dir(state_dir)
    channel = open_guest(conn, guest, vmid)
    try:
        result = run_workload(channel, vmid, command, timeout)
    finally:
        channel.close()
    stored = store_workload(state, result)
    if fmt == "json":
        stdout.write(result.model_dump_json(indent=2) + "\n")
    else:
        stdout.write(result.render() + f"kept: {stored}\n")
    return EXIT_OK if result.status == "pass" else EXIT_P2P_WORSE
