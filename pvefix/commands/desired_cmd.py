"""`pvefix desired VMID`: write the desired state of a VM and its node: by default the goal,
what its plan reaches once every phase is applied (`--from current`: as it is now). Edit it,
keep it in plans/, check against it in CI."""

from __future__ import annotations

import sys
import textwrap
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from pvefix.commands.options import (
    ConnectionOptions,
    connection_options,
    read_path_note,
    resolve_state,
    resolve_states,
)
from pvefix.commands.p2p_options import P2PAsk, p2p_options, plan_options
from pvefix.commands.vmid import parse_vmid

if TYPE_CHECKING:
    from pvefix.desired.model import DesiredState, P2PRule
    from pvefix.state import HostState


class DesiredFrom(StrEnum):
    goal = "goal"
    current = "current"


@connection_options
@p2p_options
def desired_command(
    vmids: list[int] = typer.Argument(
        ..., parser=parse_vmid,
        help="The VM (its VMID); several VMIDs write one file with all of them (their "
        "nodes read once), or record one file each with --record.", metavar="VMID..."),
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
    from pvefix.desired import dumps_desired, record
    from pvefix.store.statedir import open_state_dir

    vmids = list(dict.fromkeys(vmids))
    if len(vmids) == 1:
        states = [resolve_state(opts, vmids[0])]
    else:
        states = resolve_states(opts, vmids)
        from pvefix.console.terminal import say_err

        say_err(f"note: {read_path_note(states)}")
    wanted = [_one(state, source, opts, p2p, state_dir) for state in states]
    for state, _, _ in wanted:
        prefix = f"VM {state.vm.vmid}: " if len(wanted) > 1 else ""
        for note in state.notes:
            print(f"note: {prefix}{note}", file=sys.stderr)
    if record_it:
        from pvefix.commands.check_cmd import _cluster

        cluster = _cluster(opts)
        for state, what, wants in wanted:
            path = record(open_state_dir(state_dir), state,
                          note=f"pvefix desired --record: {what}", cluster=cluster, p2p=wants)
            print(f"desired state recorded in {path}", file=sys.stderr)
        return 0
    desired, header = _merged(wanted)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dumps_desired(desired, header=header), encoding="utf-8")
        print(f"desired state written to {out}", file=sys.stderr)
    else:
        sys.stdout.write(dumps_desired(desired, header=header))
    return 0


def _merged(wanted: list[tuple[HostState, str, P2PRule | None]]) -> tuple[DesiredState, str]:
    """One desired state for every VM written, and the file's header that says what it
    holds and how to check it."""
    from pvefix.desired import desired_from_state
    from pvefix.errors import PvefixError

    desired = desired_from_state(wanted[0][0], wanted[0][2])
    for state, _, wants in wanted[1:]:
        try:
            desired = desired.merged(desired_from_state(state, wants))
        except ValueError as exc:  # two goals that disagree on a node's command line
            raise PvefixError(f"the VMs' desired states disagree: {exc}; write them one "
                              "VM at a time") from None
    if len(wanted) == 1:
        state, what, _ = wanted[0]
        header = (
            f"Desired state of VM {state.vm.vmid} (node {state.vm.node}), written by "
            f"`pvefix desired`:\n{textwrap.fill(what, 96)}\nCheck with: pvefix check "
            f"--desired THIS_FILE {state.vm.vmid}"
        )
    else:
        listed = " ".join(str(state.vm.vmid) for state, _, _ in wanted)
        header = "\n".join([
            "Desired state of several VMs, written by `pvefix desired`:",
            *(textwrap.fill(f"VM {state.vm.vmid} (node {state.vm.node}): {what}", 96)
              for state, what, _ in wanted),
            f"Check with: pvefix check --desired THIS_FILE {listed}"])
    return desired, header


def _one(state: HostState, source: DesiredFrom, opts: ConnectionOptions, p2p: P2PAsk,
         state_dir: Path | None) -> tuple[HostState, str, P2PRule | None]:
    """One VM's desired state (the goal, or as it is), what it is, and its P2P request."""
    from pvefix.desired.derive import goal_state, p2p_rule
    from pvefix.planner import plan as make_plan

    vmid = state.vm.vmid
    options = plan_options(p2p, opts, vmid, state_dir)
    wants = p2p_rule(options)
    if source is not DesiredFrom.goal:
        return state, "the state as it is now (after [PENDING]), not what the plan would reach.", \
            wants
    plan = make_plan(state, options)
    changes = sum(len(p.changes) for p in plan.phases)
    what = (f"the goal: the state the plan reaches after all its phases ({changes} change(s)"
            f" in {len(plan.phases)} phase(s); `pvefix plan {vmid}` lists them). Until they"
            " are applied, `pvefix check` reports drift.") if changes else (
            "the goal, which holds now: the plan has nothing to change.")
    return goal_state(state, plan), what, wants
