"""`pvefix apply`, as a flow: read the target, refuse a stale plan (or plan afresh), refuse a
missing prerequisite, a write the credentials cannot make, a guest change without a way in, a
neighbour a restart or reboot would hurt; show the phase, confirm, (probe the guest), then let
the executor apply the phase under the VM lock and record the desired state it reached
(`pvefix check` uses it); (probe again, judge P2P).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import assert_never

from pydantic import BaseModel, ConfigDict

from pvefix.desired import record as record_desired
from pvefix.desired.derive import p2p_rule
from pvefix.errors import PvefixError, RefusedError
from pvefix.executor import checks
from pvefix.executor.apply import ApplyOptions, StateReader, apply_steps, wants_guest
from pvefix.executor.console import Console
from pvefix.executor.journal import Hook
from pvefix.executor.locks import vm_lock
from pvefix.executor.neighbours import (
    NodeVm,
    check_after_boot,
    check_host_reboot,
    check_start,
    node_vms,
)
from pvefix.executor.remote import Remote
from pvefix.executor.rollback import RollbackOptions
from pvefix.executor.transaction import ApplyFailed
from pvefix.executor.vmwrite import qm_set_command
from pvefix.flow.guards import refuse_ha_restart, refuse_missing_privileges
from pvefix.flow.guest_verify import probe_after, probe_before
from pvefix.flow.rollback import run_rollback
from pvefix.paths import GRUB_DEFAULT
from pvefix.planner.model import Phase, Plan
from pvefix.probe.report import Report
from pvefix.rehearse.flow import Settings
from pvefix.state import HostState
from pvefix.target.guest.access import GuestAccess
from pvefix.target.sessions import Sessions
from pvefix.target.settings import Connection
from pvefix.verify.p2p_verdict import judge as judge_p2p
from pvefix.vmconfig.args import clique_map


class NothingToDo(PvefixError):
    """The plan is empty: there is no phase to apply (exit 0)."""

    exit_code = 0



class ApplyResult(BaseModel):
    """What an apply did (frozen; rendered by the command)."""

    model_config = ConfigDict(frozen=True)

    vmid: int
    phase: int
    snapshot_id: str
    done: list[str]
    manual: list[str]
    activated: list[str]
    pending: list[str]
    rollback_command: str
    desired_path: str | None = None
    not_running: list[str] = []  # VMs that ran before a host reboot and are not up again
    verify_worse: bool | None = None  # --verify: P2P got worse (None: not verified)
    verify_reports: list[str] = []  # --verify: the kept reports, before then after



def render_phase(plan: Plan, phase: Phase) -> list[str]:
    lines = [f"Phase {phase.number} for VM {plan.observed.vmid} on "
             f"{plan.observed.node} ({phase.disruption}):"]
    for c in phase.changes:
        if c.target == "vm-config":
            lines.append(f"  {c.id}: VM config {c.key}: {c.before or '(absent)'} -> "
                         f"{c.after or '(deleted)'}" + ("  [root@pam]" if c.needs_root_pam
                                                        else ""))
        elif c.target == "host-cmdline":
            lines.append(f"  {c.id}: {c.file}: {c.before!r} -> {c.after!r}")
            if c.refresh_command:
                lines.append(f"      then: {shlex.join(c.refresh_command)}")
        elif c.target == "guest-cmdline":
            lines.append(f"  {c.id}: in the guest: {c.file}: {c.before!r} -> {c.after!r}")
            if c.refresh_command:
                lines.append(f"      then, in the guest: {shlex.join(c.refresh_command)}")
        elif c.target == "manual":
            lines.append(f"  {c.id}: by hand ({c.target}): {c.key} -> {c.after}"
                         " (best done before the activation below; otherwise reboot once more)")
            lines += [f"      {cmd}" for cmd in c.commands]
        else:
            assert_never(c)
    lines.append(f"Activation: {phase.activation}")
    return lines



def _refuse_root_only(phase: Phase, live: HostState, options: ApplyOptions) -> bool:
    """True when `qm set` over SSH is to be used; raises before any write when nothing can."""
    needing = checks.root_only(phase)
    access = live.access
    if not needing or access.method != "api" or access.is_root_pam_ticket:
        return False
    if options.qm_set and access.ssh:
        return True
    commands = [qm_set_command(live.vm.vmid, {c.key: c.after} if c.after else
                               {"delete": c.key}) for c in needing]
    paths = ["log in as root@pam with a password (a ticket): --user root@pam --auth password"]
    if access.ssh:
        paths.append("or let pvefix run `qm set` as root over SSH: --qm-set; it runs:\n    "
                     + "\n    ".join(commands))
    else:
        paths.append("or, as root on the node:\n    " + "\n    ".join(commands))
    raise RefusedError(
        f"{', '.join(c.key for c in needing)}: only root@pam with a password ticket may make"
        " these changes (qemu-server keeps raw host devices, `romfile` and `args` to root@pam),"
        f" and this connection is {access.user} ({access.auth}); nothing was written. Ways"
        " that work: " + "; ".join(paths),
        source=f"VM {live.vm.vmid}",
    )



def apply_phase(
    conn: Connection,
    vmid: int,
    options: ApplyOptions,
    console: Console,
    *,
    plan: Plan | None = None,
    hook: Hook | None = None,
    read: StateReader | None = None,
    guest: GuestAccess | None = None,
    rehearse: Settings | None = None,
) -> ApplyResult:
    """Apply phase `options.phase` of `plan` (or of a fresh plan) to VM `vmid`; `guest` is
    the way into its guest (for guest-cmdline changes and --verify), if any. One API session,
    one SSH session to the node and one guest channel serve the whole command (reads, lock,
    writes, checks); the guest probe of --verify opens its own, across the restart."""
    if options.verify and guest is None:
        raise PvefixError("--verify runs the probe inside the guest: give a way into it "
                          "(--guest-agent, or --guest-ssh-host HOST); nothing was written")
    with Sessions(conn) as sessions:
        return _apply_phase(conn, vmid, options, console, plan, hook, read, guest, sessions,
                            rehearse)


def _apply_phase(
    conn: Connection, vmid: int, options: ApplyOptions, console: Console, plan: Plan | None,
    hook: Hook | None, read: StateReader | None, guest: GuestAccess | None,
    sessions: Sessions, rehearse: Settings | None = None,
) -> ApplyResult:
    from pvefix.planner import plan as make_plan
    from pvefix.sources.live import read_live

    reader: StateReader = read or (
        lambda c, v: read_live(c, v, guest=guest, sessions=sessions))
    live = reader(conn, vmid)
    conn = conn.model_copy(update={"node": live.vm.node})
    planned_with = plan
    if plan is not None:
        stale = checks.stale_reasons(plan, live, plan.phase(options.phase))
        if stale and not options.replan:
            raise RefusedError(
                "the plan is stale: the target changed since it was made:\n  "
                + "\n  ".join(stale)
                + "\nnothing was written; re-run with --replan to plan afresh (and review it)",
                source=f"VM {vmid}",
            )
        if stale:
            console.progress("the plan was stale (" + "; ".join(stale) + "): planning afresh")
            plan = None
    asked = planned_with.options if planned_with is not None else options.plan_options
    fresh = make_plan(live, asked)
    saved_phase = plan.phase(options.phase) if plan is not None else None
    if saved_phase is not None:
        # A guest change needs the way into the guest it was planned with: say that first.
        _refuse_guest_without_access(saved_phase, live, guest)
    if plan is not None:
        # A plan file is data, never authority: what runs is derived here from the live
        # target, and the file must say exactly that.
        differs = checks.plan_differences(plan, fresh, options.phase)
        if differs:
            raise RefusedError(
                "the saved plan does not match what pvefix derives from the target now:\n  "
                + "\n  ".join(differs)
                + "\nnothing was written; plan again (pvefix plan) and review it",
                source=f"VM {vmid}",
            )
    plan = fresh
    if not plan.has_changes:
        raise NothingToDo(f"VM {vmid}: the plan has nothing to change; nothing was written")
    phase = plan.phase(options.phase)
    if phase is None:
        have = ", ".join(str(p.number) for p in plan.phases) or "none"
        raise PvefixError(f"the plan has no phase {options.phase} (phases: {have})",
                          source=f"VM {vmid}")
    missing = checks.missing_prerequisites(plan, phase, live)
    if missing:
        raise RefusedError(
            "a prerequisite phase is not in effect:\n  " + "\n  ".join(missing)
            + "\napply (and activate) the earlier phase first; nothing was written",
            source=f"VM {vmid}",
        )
    use_qm = _refuse_root_only(phase, live, options)
    if live.vm.lock:
        raise RefusedError(f"VM {vmid} is locked ({live.vm.lock}); nothing was written")
    wants_host = any(c.target == "host-cmdline" for c in phase.changes)
    if wants_host and not live.access.ssh:
        raise RefusedError("this phase changes host files, which needs SSH to the node")
    _refuse_guest_without_access(phase, live, guest)
    others: list[NodeVm] = []
    reboots = options.reboot_host and wants_host
    starts = options.start or (options.restart and live.vm.status == "running" and any(
        c.target == "vm-config" for c in phase.changes))
    if reboots and conn.on_this_host:
        raise RefusedError(
            "--reboot-host with --local would reboot the host pvefix runs on, in the middle of"
            " its own run; nothing was written. Apply without --reboot-host, reboot the node"
            f" yourself, then check it: pvefix check {vmid} --local",
            source=f"node {live.vm.node}",
        )
    if reboots or starts:
        refuse_ha_restart(live, "a host reboot" if reboots else "--restart/--start")
        if starts:
            refuse_missing_privileges(sessions.api().get, live,
                                      {f"/vms/{vmid}": ["VM.PowerMgmt"]}, "--restart/--start")
        probe = Remote(conn, live.vm.node, sessions)
        try:
            vms = node_vms(probe)
        finally:
            probe.close()
        if starts:
            check_start(vms, vmid)
    if reboots:
        console.say(f"A host reboot stops every VM on {live.vm.node}:")
        for v in vms:
            console.say(f"  {v.describe()}")
        others = check_host_reboot(vms, vmid, options.stop_others)
        back = [v.vmid for v in others]
        if live.vm.status == "running" or options.start:
            back.append(vmid)
        check_after_boot(vms, back)
    if rehearse is not None:
        _rehearse_phase(conn, sessions, live, plan, phase, rehearse, console)
    for line in render_phase(plan, phase):
        console.say(line)
    if not options.yes and not console.confirm(f"Apply phase {phase.number} to VM {vmid}?"):
        raise RefusedError("not confirmed: nothing was written (dry run; --yes to apply)")

    baseline = None
    if options.verify and guest is not None:
        baseline = probe_before(conn, guest, vmid, options.state_dir, options.verify_quick,
                                console)
    remote = Remote(conn, live.vm.node, sessions)
    remote.on_warning = console.progress
    channel = sessions.guest(guest, vmid, live.vm.node) if guest is not None and wants_guest(
        phase) else None
    try:
        with vm_lock(options.state_dir, remote, vmid, f"apply phase {phase.number}",
                     console.progress):
            reached = apply_steps(remote, conn, live, plan, phase, options, console, hook,
                                  reader, use_qm, channel, guest, others)
            desired = record_desired(options.state_dir, reached.after,
                                     note=f"apply phase {phase.number}",
                                     cluster=remote.identity(),
                                     p2p=p2p_rule(plan.options))
            console.progress(f"desired state recorded in {desired} (pvefix check {vmid} uses it)")
    finally:
        remote.close()
    result = ApplyResult(
        vmid=vmid, phase=phase.number, snapshot_id=reached.snapshot_id, done=reached.done,
        manual=reached.manual, activated=reached.activated, pending=reached.pending,
        rollback_command=reached.rollback_command, desired_path=str(desired),
        not_running=reached.not_running,
    )
    if baseline is None or guest is None:
        return result
    outcome = probe_after(conn, guest, vmid, options.state_dir, options.verify_quick, console,
                          baseline, wait_s=options.guest_wait,
                          rollback_cmd=result.rollback_command)
    clique = next((c for c in phase.changes if c.rule == "p2p" and c.key == "args"), None)
    if clique is not None and options.restart:
        _p2p_verdict(conn, vmid, options, console, baseline[1], outcome.report, clique.after,
                     result)
    return result.model_copy(update={"verify_worse": outcome.worse,
                                     "verify_reports": [baseline[0], Path(outcome.stored).stem]})



def _refuse_guest_without_access(phase: Phase, live: HostState,
                                 guest: GuestAccess | None) -> None:
    """A guest-cmdline change is applied through the guest channel: refuse, before any write,
    when there is none or the guest has no GRUB defaults file to edit."""
    ids = ", ".join(c.id for c in phase.changes if c.target == "guest-cmdline")
    if not ids:
        return
    if guest is None:
        raise RefusedError(
            f"phase {phase.number} changes the guest's kernel cmdline ({ids}), which pvefix "
            "does through a way into the guest: give --guest-agent or --guest-ssh-host HOST "
            "(the plan was made with one), or plan again without guest access to get the "
            "steps to run by hand; nothing was written", source=f"VM {live.vm.vmid}")
    grub = live.guest.files.get(GRUB_DEFAULT) if live.guest is not None else None
    if grub is None or grub.text is None:
        raise RefusedError(
            f"the guest has no {GRUB_DEFAULT}, so pvefix cannot change its kernel cmdline "
            f"({ids}); plan again without guest access to get the steps to run by hand; "
            "nothing was written", source=f"VM {live.vm.vmid}")



def _p2p_verdict(conn: Connection, vmid: int, options: ApplyOptions, console: Console,
                 before: Report, after: Report, args: str | None, result: ApplyResult) -> None:
    """The P2P phase proven by moving data, or failed (and, with --auto-rollback, reverted
    alone: the snapshot taken for this phase)."""
    verdict = judge_p2p(before, after, clique_map(args))
    for line in verdict.unmeasured:
        console.say(f"P2P phase, not measured (not counted as a pass): {line}")
    if not verdict.failed:
        console.say("P2P phase proven in the guest: every granted pair reports OK"
                    + ("" if verdict.unmeasured else ", data delivered, no slowdown, no hang"))
        return
    why = "\n  ".join(verdict.failures)
    if not options.auto_rollback:
        raise ApplyFailed(f"the P2P phase failed in the guest:\n  {why}\nthe clique is in "
                          f"place; to put it back: {result.rollback_command}")
    console.progress("the P2P phase failed in the guest; rolling this phase back "
                     f"(--auto-rollback, snapshot {result.snapshot_id})")
    undone = run_rollback(conn, options.state_dir, vmid, result.snapshot_id,
                          RollbackOptions(yes=True, restart=True, force_stop=options.force_stop,
                                          shutdown_timeout=options.shutdown_timeout,
                                          task_timeout=options.task_timeout), console)
    raise ApplyFailed(f"the P2P phase failed in the guest:\n  {why}\nrolled back "
                      f"(--auto-rollback): " + "; ".join(undone.restored))




def _rehearse_phase(conn: Connection, sessions: Sessions, live: HostState, plan: Plan,
                    phase: Phase, settings: Settings, console: Console) -> None:
    """apply --rehearse: rehearse the config phases 1..N lead to, before anything is written;
    a phase whose rehearsal does not place every BAR is refused (docs/rehearse.md)."""
    from pvefix.flow.rehearsal import refuse_failed, rehearse_live
    from pvefix.rehearse.verdict import render_text

    if not any(c.target == "vm-config" for c in phase.changes):
        console.progress(f"phase {phase.number} changes no VM key: nothing to rehearse")
        return
    console.progress(f"rehearsing phase {phase.number} on node {live.vm.node} "
                     "(firmware only, stand-in BARs)")
    verdict, _ = rehearse_live(conn, sessions, live, plan, phase.number, settings)
    for line in render_text(verdict).splitlines():
        console.say(line)
    refuse_failed(verdict, phase.number)
