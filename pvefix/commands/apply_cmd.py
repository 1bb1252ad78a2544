"""`pvefix apply PLAN_FILE|VMID --phase N`: apply one phase, snapshotted, journaled, verified.

Dry run is the default posture: the phase is shown and nothing is written without a yes (a
terminal's answer, or --yes). Exit 0 applied, 1 failed (and undone), 3 refused for safety.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pvefix.commands.guest_options import GuestOptions, guest_options, optional_guest
from pvefix.commands.optgroup import SAFETY, in_panel
from pvefix.commands.options import ConnectionOptions, connection_options
from pvefix.commands.p2p_options import P2PAsk, p2p_options, plan_options
from pvefix.commands.rehearse_options import RehearseAsk, rehearse_options
from pvefix.commands.vmid import not_a_vmid
from pvefix.errors import EXIT_ERROR, EXIT_OK, PvefixError, ValidationError
from pvefix.paths import is_vmid

if TYPE_CHECKING:
    from pvefix.executor.console import Console
    from pvefix.flow.apply import ApplyResult


def stop_others_option() -> Any:
    """--stop-others, as apply and rollback --reboot-host both take it."""
    return typer.Option(False, "--stop-others", help="With --reboot-host: stop the other"
                        " VMs first, start them after.")


def reboot_timeout_option() -> Any:
    """--reboot-timeout, as apply and rollback --reboot-host both take it."""
    return typer.Option(900.0, "--reboot-timeout", help="Seconds for the host to come back.")


def state_dir_option() -> Any:
    return typer.Option(
        None, "--state-dir",
        help="Where snapshots live (env PVEFIX_STATE_DIR; default $XDG_STATE_HOME/pvefix).",
        show_default=False)


@in_panel(SAFETY, "yes", "replan", "restart", "force_stop", "reboot_host", "stop_others", "start",
          "auto_rollback", "pve_snapshot", "shutdown_timeout", "task_timeout", "reboot_timeout")
@connection_options
@guest_options
@p2p_options
@rehearse_options
def apply_command(
    target: str = typer.Argument(
        ..., help="A plan file (from `pvefix plan --out`), or a VMID to plan afresh"
        " from the live target.", show_default=False),
    phase: int = typer.Option(..., "--phase", "-p", help="The phase to apply (see the plan).",
                              show_default=False),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask (without it, only a "
                             "terminal may confirm)."),
    replan: bool = typer.Option(False, "--replan", help="A stale plan file: plan afresh "
                                "instead of refusing."),
    restart: bool = typer.Option(False, "--restart", help="Activate VM changes: a clean "
                                 "shutdown, a start, checked."),
    force_stop: bool = typer.Option(False, "--force-stop", help="With --restart: stop the VM "
                                    "hard if its shutdown times out."),
    reboot_host: bool = typer.Option(False, "--reboot-host", help="Activate host changes: reboot, "
                                     "check the cmdline, start VMs again."),
    stop_others: bool = stop_others_option(),
    start: bool = typer.Option(False, "--start", help="With --restart: also start the VM if "
                               "it was stopped."),
    auto_rollback: bool = typer.Option(False, "--auto-rollback", help="A VM that fails to "
                                       "start: roll back, start it again."),
    pve_snapshot: bool = typer.Option(False, "--pve-snapshot", help="Also a Proxmox disk snapshot "
                                      "first (its rollback: disks too)."),
    qm_set: bool = typer.Option(False, "--qm-set", help="On a token: root@pam's changes "
                                "with `qm set` over SSH."),
    shutdown_timeout: float = typer.Option(120.0, "--shutdown-timeout", help="Seconds for a "
                                           "clean shutdown."),
    task_timeout: float = typer.Option(60.0, "--task-timeout", help="Seconds for a "
                                       "Proxmox task."),
    reboot_timeout: float = reboot_timeout_option(),
    verify: bool = typer.Option(False, "--verify", help="Probe the guest's P2P before and "
                                "after, and compare."),
    full_probe: bool = typer.Option(False, "--full-probe", help="With --verify: the full "
                                    "probe (minutes), not the quick one."),
    guest_wait: float = typer.Option(300.0, "--guest-wait", help="With --verify: seconds for "
                                     "the restarted guest to answer."),
    state_dir: Path | None = state_dir_option(),
    *,
    opts: ConnectionOptions,
    guest: GuestOptions,
    p2p: P2PAsk,
    rehearsal: RehearseAsk,
) -> int:
    """Apply phase N of a plan to a live target: snapshot, write, verify, (activate).

    Refuses (exit 3) what is stale, out of order, beyond the credentials or not confirmed; a
    failure undoes what was done (docs/apply.md).
    """
    from pvefix.commands.options import hint_context, resolve_connection_options
    from pvefix.executor.console import Console
    from pvefix.executor.options import ApplyOptions
    from pvefix.flow.apply import apply_phase
    from pvefix.flow.planfile import load_plan_file
    from pvefix.flow.prepare import NothingToDo
    from pvefix.store.statedir import open_state_dir

    if opts.bundle is not None:
        raise PvefixError("apply writes to a live target: a bundle (--bundle) is read-only")
    plan = None
    if target.isdigit():  # any digits ('²' too): meant as a VMID, checked as Proxmox does
        if not is_vmid(target):
            raise ValidationError(not_a_vmid(target), source="TARGET")
        vmid = int(target)
    else:
        plan = load_plan_file(Path(target))
        vmid = plan.observed.vmid
    # A plan file carries the options it was made with; by VMID they are resolved afresh.
    asked = plan_options(p2p, opts, vmid, state_dir) if plan is None else plan.options
    conn = resolve_connection_options(opts)
    access = optional_guest(guest)
    options = ApplyOptions(
        phase=phase, state_dir=open_state_dir(state_dir), yes=yes, replan=replan,
        restart=restart, force_stop=force_stop, reboot_host=reboot_host,
        stop_others=stop_others, start=start,
        auto_rollback=auto_rollback, pve_snapshot=pve_snapshot, qm_set=qm_set,
        shutdown_timeout=shutdown_timeout, task_timeout=task_timeout, reboot_timeout=reboot_timeout,
        # From a plan file, the next phase's apply names the same reviewed file.
        context=hint_context(opts, state_dir, guest)._replace(
            plan_file=None if plan is None else target),
        verify=verify, verify_quick=not full_probe, guest_wait=guest_wait, plan_options=asked)
    console = Console()
    try:
        result = apply_phase(conn, vmid, options, console, plan=plan, guest=access,
                             rehearse=rehearsal.settings())
    except NothingToDo as done:
        console.say(done.message)
        return EXIT_OK
    except KeyboardInterrupt:
        if console.undo is not None:  # written, and left in place: say how to put it back
            console.progress("interrupted (Ctrl-C) after the changes were written: they stay"
                             f" in place; to undo: {console.undo}")
        raise
    return _report(console, result)


def _report(console: Console, result: ApplyResult) -> int:
    """What the apply did, what is left to do, and how to undo it; exit 1 where VMs that ran
    before a host reboot are not running again."""
    console.say(f"applied phase {result.phase} to VM {result.vmid} (snapshot "
                f"{result.snapshot_id})")
    for line in result.activated:
        console.say_wrapped(f"activated: {line}")
    for line in result.pending:
        console.say_wrapped(f"pending: {line}")
    if result.manual:
        console.say_wrapped("left to you (pvefix has no way into the guest; give --guest-agent or"
                    " --guest-ssh-host to let it): do this in the guest, then reboot the guest"
                    " once more if the VM was already restarted:")
        for line in result.manual:
            console.say_step(line, "    ")
    if result.desired_path:
        console.say_wrapped(f"desired state recorded: {result.desired_path} (used by pvefix"
                            " check)")
    console.say(f"to undo: {result.rollback_command}")
    if result.next_line:
        console.say(result.next_line)
    if result.verify_worse:
        console.say("P2P GOT WORSE (see the comparison above); the apply itself succeeded")
    if result.not_running:
        console.say_wrapped("some VMs that ran before the host reboot are not running (NOT up "
                            "above): start them once the cause is fixed (qm start VMID)")
        return EXIT_ERROR
    return EXIT_OK
