"""`pvefix desired VMID`: write the desired state that holds now, from the live target or a
bundle (edit it, keep it in plans/, check against it in CI)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from pvefix.commands.options import ConnectionOptions, connection_options, resolve_state


@connection_options
def desired_command(
    vmid: int = typer.Argument(..., help="The VM (its VMID)."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Write the file here instead of stdout.", show_default=False),
    record_it: bool = typer.Option(
        False, "--record", help="Record it in the state directory, where `pvefix check VMID` "
        "finds it without --desired."),
    state_dir: Path | None = typer.Option(
        None, "--state-dir", help="State directory for --record (env PVEFIX_STATE_DIR).",
        show_default=False),
    *,
    opts: ConnectionOptions,
) -> int:
    """Write the desired state of VM VMID and its node, as they are now (after [PENDING])."""
    from pvefix.desired import desired_from_state, dumps_desired, record
    from pvefix.store.statedir import resolve_state_dir

    state = resolve_state(opts, vmid)
    if record_it:
        from pvefix.commands.check_cmd import _cluster

        path = record(resolve_state_dir(state_dir), state, note="pvefix desired --record",
                      cluster=_cluster(opts))
        print(f"desired state recorded in {path}", file=sys.stderr)
        return 0
    desired = desired_from_state(state)
    header = (
        f"Desired state of VM {vmid} (node {state.vm.node}), written by `pvefix desired`.\n"
        "Check with: pvefix check --desired THIS_FILE " + str(vmid)
    )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dumps_desired(desired, header=header), encoding="utf-8")
        print(f"desired state written to {out}", file=sys.stderr)
    else:
        sys.stdout.write(dumps_desired(desired, header=header))
    for note in state.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0
