"""`pvefix verify VMID`: run the GPU probe in the VM's guest, keep the report, compare.

Exit 0: the probe measured the GPUs and P2P is not worse than the baseline (or there is none
yet); 2: P2P got worse; 1: error, or the probe measured nothing (no GPU in the guest).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import typer

from pvefix.commands.guest_options import GuestOptions, guest_options, resolve_guest_options
from pvefix.commands.options import ConnectionOptions, connection_options
from pvefix.commands.vmid import parse_vmid


@connection_options
@guest_options
def verify_command(
    vmid: int = typer.Argument(..., parser=parse_vmid, help="The VM whose guest to probe.",
                               show_default=False),
    quick: bool = typer.Option(False, "--quick", help="Fewer sizes and iterations (< 30 s)."),
    baseline: str | None = typer.Option(
        None, "--baseline", help="Compare with this kept report (its id, a unique prefix, or "
        "'latest'); default: the newest kept report of this VM.", show_default=False),
    before: Path | None = typer.Option(
        None, "--before", help="Compare with this saved report (JSON from `pvefix probe "
        "--format json`) instead.", show_default=False),
    format: Literal["text", "json"] = typer.Option("text", "--format", help="text or json."),
    probe_timeout: float | None = typer.Option(
        None, "--probe-timeout", help="The probe's time budget in the guest, seconds "
        "(default 28 with --quick, else 600).", show_default=False),
    workload: str | None = typer.Option(
        None, "--workload", help="Instead of the probe, run your own smoke test in the guest "
        "(e.g. your serving stack's one-request check) and record pass, fail or hang; split "
        "like a shell, no pipes (use sh -c '...'). Exit 0 pass, 2 fail or hang.",
        show_default=False),
    workload_timeout: float = typer.Option(
        300.0, "--workload-timeout", help="Seconds --workload may run; still running then "
        "counts as a hang."),
    state_dir: Path | None = typer.Option(
        None, "--state-dir", help="Where reports are kept, under probes/VMID/ (env "
        "PVEFIX_STATE_DIR; default $XDG_STATE_HOME/pvefix or ~/.local/state/pvefix).",
        show_default=False),
    *,
    opts: ConnectionOptions,
    guest: GuestOptions,
) -> int:
    """Probe the GPUs inside VM VMID's guest (SSH or guest agent), keep the report and show
    what changed since the last one: P2P cells, data delivered, latency, all-reduce. With
    --workload, run your own smoke test there instead, under a time limit (docs/p2p.md).
    Exit codes: 0 measured and not worse, 2 P2P got worse, 1 error or nothing measured (no GPU
    in the guest)."""
    from pvefix.commands.options import resolve_connection_options
    from pvefix.verify.command import execute_verify

    access = resolve_guest_options(guest, connect_timeout=opts.timeout)
    conn = resolve_connection_options(opts) if access.method == "agent" else None
    if workload is not None:
        from pvefix.verify.command import execute_workload

        return execute_workload(vmid, conn=conn, guest=access, command=workload,
                                timeout=workload_timeout, state_dir=state_dir,
                                fmt=format, stdout=sys.stdout)
    return execute_verify(
        vmid, conn=conn, guest=access, quick=quick, baseline=baseline, before=before,
        fmt=format, budget=probe_timeout, state_dir=state_dir, stdout=sys.stdout)
