"""`pvefix desired VMID`: write the desired state of a VM and its node: by default the goal,
what its plan reaches once every phase is applied (`--from current`: as it is now). Edit it,
keep it in plans/, check against it in CI."""

from __future__ import annotations

import sys
import textwrap
from enum import StrEnum
from pathlib import Path

import typer

from pvefix.commands.options import ConnectionOptions, connection_options, resolve_state
from pvefix.commands.p2p_options import P2PAsk, p2p_options, plan_options


class DesiredFrom(StrEnum):
    goal = "goal"
    current = "current"


@connection_options
@p2p_options
def desired_command(
    vmid: int = typer.Argument(..., help="The VM (its VMID)."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Write the file here instead of stdout.", show_default=False),
    source: DesiredFrom = typer.Option(
        DesiredFrom.goal, "--from", help="goal: the state the plan reaches after all its phases "
        "(what CI should guard); current: the state as it is now (after [PENDING])."),
    record_it: bool = typer.Option(
        False, "--record", help="Record it in the state directory, where `pvefix check VMID` "
        "finds it without --desired."),
    state_dir: Path | None = typer.Option(
        None, "--state-dir", help="State directory for --record, and where a recorded desired"
        " state's P2P request is read (env PVEFIX_STATE_DIR).",
        show_default=False),
    *,
    opts: ConnectionOptions,
    p2p: P2PAsk,
) -> int:
    """Write the desired state of VM VMID and its node: by default the goal, what `pvefix
    plan` reaches once every phase is applied; --from current for the state as it is now.
    With --p2p the goal includes the P2P phase and the file records that the VM wants it
    (`[vms.VMID.p2p]`), so `plan` and `apply` plan phase 3 for it without the flag."""
    from pvefix.desired import desired_from_state, dumps_desired, record
    from pvefix.desired.derive import goal_state, p2p_rule
    from pvefix.planner import plan as make_plan
    from pvefix.store.statedir import resolve_state_dir

    options = plan_options(p2p, opts, vmid, state_dir)
    wants = p2p_rule(options)
    state = resolve_state(opts, vmid)
    if source is DesiredFrom.goal:
        plan = make_plan(state, options)
        changes = sum(len(p.changes) for p in plan.phases)
        state = goal_state(state, plan)
        what = (f"the goal: the state the plan reaches after all its phases ({changes} change(s)"
                f" in {len(plan.phases)} phase(s); `pvefix plan {vmid}` lists them). Until they"
                " are applied, `pvefix check` reports drift.") if changes else (
                "the goal, which holds now: the plan has nothing to change.")
    else:
        what = "the state as it is now (after [PENDING]), not what the plan would reach."
    if record_it:
        from pvefix.commands.check_cmd import _cluster

        path = record(resolve_state_dir(state_dir), state, note=f"pvefix desired --record: {what}",
                      cluster=_cluster(opts), p2p=wants)
        print(f"desired state recorded in {path}", file=sys.stderr)
        return 0
    desired = desired_from_state(state, wants)
    header = (
        f"Desired state of VM {vmid} (node {state.vm.node}), written by `pvefix desired`:\n"
        f"{textwrap.fill(what, 96)}\nCheck with: pvefix check --desired THIS_FILE {vmid}"
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
