"""`pvefix plan VMID`: read the target, plan, show the dry run. Exit 0 nothing to do, 2 changes,
1 error or nothing planned while a claim is not established."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from pvefix.commands.guest_options import GuestOptions, guest_options, optional_guest
from pvefix.commands.options import (
    ConnectionOptions,
    connection_options,
    hint_context,
    read_path_note,
    resolve_state,
    resolve_states,
)
from pvefix.commands.p2p_options import P2PAsk, p2p_options, plan_options
from pvefix.commands.rehearse_options import RehearseAsk, rehearse_options
from pvefix.commands.vmid import parse_vmid
from pvefix.console.terminal import ColorChoice, on_tty, say_err, terminal
from pvefix.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, PvefixError
from pvefix.render.inert import inert_json, inert_text

if TYPE_CHECKING:
    from pvefix.hints import Context
    from pvefix.planner.model import Plan
    from pvefix.rehearse.flow import Settings


class PlanFormat(StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


def emit_plan(plan: object, fmt: PlanFormat, out: str | None,
              color: ColorChoice = "auto", context: Context | None = None,
              verbose: bool = False) -> int:
    from pvefix.planner.model import Plan

    assert isinstance(plan, Plan)
    saved = None
    if out:  # saved first: the ticket names the file and its hash
        import hashlib

        from pvefix.flow.planfile import save_plan

        path = save_plan(plan.to_json_dict(), out)
        saved = (str(path), hashlib.sha256(path.read_bytes()).hexdigest())
        print(f"plan saved to {path} (sha256 {saved[1]})", file=sys.stderr)
    return emit_plans([plan], fmt, color, context, saved, verbose)


@connection_options
@guest_options
@p2p_options
@rehearse_options
def plan_command(
    vmids: list[int] = typer.Argument(
        ..., parser=parse_vmid,
        help="The VM to plan for (its VMID); several VMIDs plan each of them, their nodes"
        " read once (one API session, one SSH session per node).", metavar="VMID..."),
    fmt: PlanFormat = typer.Option(
        PlanFormat.text,
        "--format",
        "-f",
        help="text: terminal view with diffs; json: {schema: pvefix.plans/v1, plans: [plan"
        " file, ...]} for one VM or several; markdown: for change tickets."),
    out: str | None = typer.Option(
        None,
        "--out",
        help="Save the plan file (JSON, whatever --format shows) here; a bare name goes into "
        "plans/."),
    state_dir: Path | None = typer.Option(
        None, "--state-dir", help="Where recorded desired states are read (a VM's may ask for"
        " the P2P phase) (env PVEFIX_STATE_DIR; default $XDG_STATE_HOME/pvefix).",
        show_default=False),
    color: ColorChoice = typer.Option(
        "auto", "--color", help="auto: colour on a terminal unless NO_COLOR is set or TERM is"
        " dumb; always; never. Text is wrapped to the terminal's width (COLUMNS)."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="text: also each change's effect and evidence, the"
        " info findings' detail and the diffs."),
    *,
    opts: ConnectionOptions,
    guest: GuestOptions,
    p2p: P2PAsk,
    rehearsal: RehearseAsk,
) -> int:
    """Plan the changes that make GPU passthrough right for VM VMID (or each of several), as a
    dry run.

    Reads a live host (API + SSH), the local host (--local) or a host tree (--bundle), and
    changes nothing. With a way into the guest (--guest-agent, --guest-ssh-host) it reads the
    guest's cmdline, GRUB defaults and BAR errors too, and plans guest changes pvefix can
    apply. With --p2p (or `p2p` in the VM's desired state or the profile) it also plans the
    P2P clique phase (phase 3, docs/p2p.md). With --rehearse it also boots the planned
    config's firmware on the node (pvefix rehearse, docs/rehearse.md) and shows where each BAR
    lands. Exit codes: 0 nothing to do, 2 changes planned, 1 error or nothing planned while
    some claim is not established (the findings say which).
    """
    vmids = list(dict.fromkeys(vmids))  # a VMID named twice is planned once
    settings = rehearsal.settings()
    if settings is not None and (opts.bundle is not None or len(vmids) > 1):
        raise PvefixError("--rehearse boots the firmware on the VM's node: one VM, read live "
                          "(not --bundle); or run `pvefix rehearse VMID` for each")
    if len(vmids) == 1:
        return _plan_one(vmids[0], opts, guest, p2p, settings, state_dir, fmt, out, color,
                         verbose)
    if out:
        raise PvefixError("--out saves one plan file, for one VM (apply takes one plan): run "
                          f"`pvefix plan VMID --out FILE` for each of {_listed(vmids)}")
    if optional_guest(guest) is not None:
        raise PvefixError("guest access (--guest-agent, --guest-ssh-host) reaches one guest: "
                          "plan one VM at a time with it")
    return _plan_many(vmids, opts, p2p, state_dir, fmt, color, verbose)


def _plan_many(vmids: list[int], opts: ConnectionOptions, p2p: P2PAsk, state_dir: Path | None,
               fmt: PlanFormat, color: ColorChoice, verbose: bool) -> int:
    """Several VMs' plans, their nodes read once, shown together."""
    from pvefix.planner import plan as make_plan

    plans = []
    states = resolve_states(opts, vmids)
    say_err(inert_text(f"note: {read_path_note(states)}"))
    for state in states:
        for note in state.notes:
            say_err(inert_text(f"note: VM {state.vm.vmid}: {note}"))
        plans.append(make_plan(state, plan_options(p2p, opts, state.vm.vmid, state_dir)))
    return emit_plans(plans, fmt, color, hint_context(opts, state_dir), verbose=verbose)


def _plan_one(vmid: int, opts: ConnectionOptions, guest: GuestOptions, p2p: P2PAsk,
              settings: Settings | None, state_dir: Path | None, fmt: PlanFormat,
              out: str | None, color: ColorChoice, verbose: bool) -> int:
    """One VM's plan, shown (and saved with --out), then its rehearsal where asked."""
    from pvefix.planner import plan as make_plan

    options = plan_options(p2p, opts, vmid, state_dir)
    state = resolve_state(opts, vmid, optional_guest(guest))
    for note in state.notes:
        say_err(inert_text(f"note: {note}"))
    made = make_plan(state, options)
    context = hint_context(opts, state_dir, guest)
    if out:  # the Next line applies the file reviewed, as `terraform apply FILE` does
        from pvefix.flow.planfile import plan_file_path

        context = context._replace(plan_file=str(plan_file_path(out)))
    code = emit_plan(made, fmt, out, color, context, verbose)
    if settings is not None:
        _rehearse(opts, state, made, settings, fmt)
    return code


def _listed(vmids: list[int]) -> str:
    return ", ".join(str(v) for v in vmids)


def emit_plans(plans: Sequence[object], fmt: PlanFormat, color: ColorChoice = "auto",
               context: Context | None = None, saved: tuple[str, str] | None = None,
               verbose: bool = False) -> int:
    """Plans, in the order asked: JSON as one pvefix.plans/v1 document (whatever the count),
    text and markdown one after the other. Exit 2 when any of them has changes. `context`
    (pvefix/hints.py): the options the text's `Next:` line carries; `saved`: the one plan's
    file and its SHA-256, which the Markdown ticket names; `verbose`: the text's details
    (pvefix/render/plan_text.py)."""
    from pvefix.planner.model import Plan, plans_document
    from pvefix.render.plan_markdown import render_plan_markdown
    from pvefix.render.plan_text import render_plan_text

    typed = [p for p in plans if isinstance(p, Plan)]
    assert len(typed) == len(plans)
    term = terminal(sys.stdout, color) if fmt is PlanFormat.text else None
    if fmt is PlanFormat.json:
        print(inert_json(json.dumps(plans_document(typed), indent=2)))
    else:
        for k, plan in enumerate(typed):
            if k:
                sys.stdout.write("\n")
            if fmt is PlanFormat.markdown:
                sys.stdout.write(render_plan_markdown(plan, saved=saved))
            else:
                sys.stdout.write(render_plan_text(plan, term=term, context=context,
                                                  verbose=verbose))
    return plans_exit_code(typed)


def plans_exit_code(plans: list[Plan]) -> int:
    """2 when any plan changes something; else 1 when any rests on what pvefix did not read
    or does not model (nothing planned, but not because all is right: a script must not read
    that as "nothing to do"); else 0."""
    if any(p.has_changes for p in plans):
        return EXIT_CHANGES
    return EXIT_ERROR if any(p.unsettled for p in plans) else EXIT_OK


def _rehearse(opts: ConnectionOptions, state: object, plan: object, settings: object,
              fmt: PlanFormat) -> None:
    """plan --rehearse: the rehearsal of the plan's end (the next start when the plan changes
    no VM key), after the plan; a rehearsal that cannot run is a note, not the plan's error."""
    from pvefix.commands.options import resolve_connection_options
    from pvefix.flow.rehearsal import rehearse_live
    from pvefix.planner.model import Plan
    from pvefix.rehearse.flow import Settings
    from pvefix.rehearse.verdict import render_text
    from pvefix.state import HostState
    from pvefix.target.sessions import Sessions

    assert isinstance(state, HostState) and isinstance(plan, Plan)
    assert isinstance(settings, Settings)
    changes = any(c.target == "vm-config" for p in plan.phases for c in p.changes)
    conn = resolve_connection_options(opts)
    try:
        with Sessions(conn) as sessions:
            verdict, _ = rehearse_live(conn, sessions, state, plan if changes else None, None,
                                       settings)
    except PvefixError as exc:
        print(f"note: rehearsal not run: {exc}", file=sys.stderr)
        return
    if fmt is PlanFormat.json:
        print(f"note: rehearsal ({verdict.config}): {verdict.outcome}: {verdict.message}",
              file=sys.stderr)
        return
    sys.stdout.write("\nRehearsal (pvefix rehearse, docs/rehearse.md)\n"
                     + render_text(verdict, on_tty(sys.stdout)))
