"""`pvefix apply`, as a flow: read the target, refuse a stale plan (or plan afresh), refuse a
missing prerequisite, a write the credentials cannot make, a guest change without a way in, a
neighbour a restart or reboot would hurt; show the phase, confirm, (probe the guest), then let
the executor apply the phase under the VM lock and record the desired state it reached
(`pvefix check` uses it); (probe again, judge P2P).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import assert_never

from pydantic import BaseModel, ConfigDict

from pvefix.console.terminal import Terminal, on_tty, terminal
from pvefix.desired import record as record_desired
from pvefix.desired.derive import p2p_rule
from pvefix.errors import PvefixError
from pvefix.executor.activate import activate
from pvefix.executor.console import Console
from pvefix.executor.journal import Hook
from pvefix.executor.locks import vm_lock
from pvefix.executor.neighbours import (
    NodeVm,
    check_start,
)
from pvefix.executor.options import ApplyOptions, RollbackOptions
from pvefix.executor.transaction import ApplyFailed
from pvefix.executor.write import write
from pvefix.flow.guards import (
    confirm_reboot,
    guard_host_reboot,
    node_vms,
    phase_privileges,
    refuse_ha_restart,
    refuse_missing_privileges,
)
from pvefix.flow.guest_verify import probe_after, probe_before
from pvefix.flow.prepare import Asked, Prepared, Reviewed, prepare
from pvefix.flow.prepare import NothingToDo as NothingToDo  # where callers found it before
from pvefix.flow.reviewed import activates_saved_phase, stale_after_own_applies
from pvefix.flow.rollback import run_rollback
from pvefix.flow.verify_phase import verify_phase
from pvefix.hints import next_line
from pvefix.planner.model import Phase, Plan
from pvefix.probe.report import Report
from pvefix.rehearse.flow import Settings
from pvefix.state import HostState
from pvefix.store.statedir import check_state_tree
from pvefix.target.guest.access import GuestAccess
from pvefix.target.sessions import Sessions
from pvefix.target.settings import Connection
from pvefix.verify.p2p_verdict import judge as judge_p2p
from pvefix.vmconfig.args import clique_map

StateReader = Callable[[Connection, int], HostState]


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
    next_line: str = ""  # what to run next (pvefix/hints.py): the next phase, or check
    desired_path: str | None = None
    not_running: list[str] = []  # VMs that ran before a host reboot and are not up again
    verify_worse: bool | None = None  # --verify: P2P got worse (None: not verified)
    verify_reports: list[str] = []  # --verify: the kept reports, before then after


def wants_guest(phase: Phase) -> bool:
    return any(c.target == "guest-cmdline" for c in phase.changes)


def pending_text(phase: Phase, after: HostState, restarted: bool,
                  rebooted: bool) -> list[str]:
    out: list[str] = []
    vm_changes = [c for c in phase.changes if c.target == "vm-config"]
    vmid = after.vm.vmid
    if vm_changes and not restarted:
        if after.vm.status == "running":
            out.append(
                f"VM {vmid}: the changes wait in [PENDING] until its next cold start: shut it "
                f"down and start it (qm shutdown {vmid} && qm start {vmid}, or --restart); a "
                "reboot inside the guest does not apply them"
            )
        else:
            out.append(f"VM {vmid} is stopped: the new config takes effect when it starts")
    if phase.reboot_activates and not rebooted:
        out.append("host: the boot loader holds the new kernel cmdline; it takes effect at the "
                   "next host reboot (or --reboot-host)")
    if wants_guest(phase) and not restarted:
        out.append(f"guest: its boot loader holds the new kernel cmdline; it takes effect at "
                   f"the guest's next boot (reboot it, or restart VM {vmid})")
    return out


def render_phase(plan: Plan, phase: Phase, term: Terminal | None = None) -> list[str]:
    """The confirmation screen's phase: each change, its values whole (on a line of their own
    when they do not fit beside it), and the activation filled to the width of `term`
    (default 80 columns)."""
    term = term or Terminal()
    lines = [f"Phase {phase.number} for VM {plan.observed.vmid} on "
             f"{plan.observed.node} ({phase.disruption}):"]
    for c in phase.changes:
        if c.target == "vm-config":
            root = "  [root@pam]" if c.needs_root_pam else ""
            lines += term.change(f"  {c.id}: VM config {c.key}:", c.before or "(absent)",
                                 (c.after or "(deleted)") + root)
        elif c.target == "host-cmdline":
            lines += _file_change(term, c.id, c.file, c.before, c.after, c.refresh_command, "")
        elif c.target == "guest-cmdline":
            lines += _file_change(term, c.id, c.file, c.before, c.after, c.refresh_command,
                                  "in the guest")
        elif c.target == "host-boot":
            lines.append(term.wrap(f"{c.id}: {c.file}: configured, not yet booted: {c.after!r}"
                                   f" (booted: {c.before or '(none)'!r}); nothing to write",
                                   "  ", hang=4))
        elif c.target == "manual":
            lines.append(term.wrap(f"{c.id}: by hand ({c.target}): {c.key} -> {c.after} (best"
                                   " done before the activation below; otherwise reboot once"
                                   " more)", "  ", hang=4))
            lines += [term.step(cmd, "      ") for cmd in c.commands]
        else:
            assert_never(c)
    lines.append(term.wrap(f"Activation: {phase.activation}", ""))
    return lines


def _file_change(term: Terminal, cid: str, file: str | None, before: str | None,
                 after: str | None, refresh: list[str] | None, where: str) -> list[str]:
    """A file's line changed (`where`: "in the guest", or "" on the node), then its refresh."""
    lines = term.change(f"  {cid}: {where + ': ' if where else ''}{file}:", repr(before),
                        repr(after))
    if refresh:
        lines.append(f"      then{', ' + where if where else ''}: {shlex.join(refresh)}")
    return lines


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
    check_state_tree(options.state_dir)  # before anything is read from it or written
    with Sessions(conn) as sessions:
        return _apply_phase(conn, vmid, options, console, plan, hook, read, guest, sessions,
                            rehearse)


def _apply_phase(conn: Connection, vmid: int, options: ApplyOptions, console: Console,
                 plan: Plan | None, hook: Hook | None, read: StateReader | None,
                 guest: GuestAccess | None, sessions: Sessions,
                 rehearse: Settings | None = None) -> ApplyResult:
    """The stages: read, prepare (pure refusals), the node's refusals, (rehearse), show and
    confirm, then write, activate and verify under the VM lock; (--verify: probe around)."""
    from pvefix.sources.live import read_live

    reader: StateReader = read or (
        lambda c, v: read_live(c, v, guest=guest, sessions=sessions))
    live = reader(conn, vmid)
    conn = conn.model_copy(update={"node": live.vm.node})
    prepared = prepare(live, plan, _asked(options, guest, conn), console.progress,
                       _reviewed(options, sessions, console))
    plan, phase = prepared.plan, prepared.phase
    wants = phase_privileges(vmid, phase, api_keys=not prepared.use_qm, starts=prepared.starts,
                             agent=guest is not None and guest.method == "agent")
    refuse_missing_privileges(sessions.api().get, live, wants, f"phase {phase.number}")
    others = _refuse_for_activation(conn, sessions, live, prepared, options, console)
    if rehearse is not None:
        _rehearse_phase(conn, sessions, live, plan, phase, rehearse, console)
    for line in render_phase(plan, phase, terminal(console.out)):
        console.say(line)  # its before/after values stay whole, to be read as they are
    if not options.yes:
        confirm_reboot(console, f"Apply phase {phase.number} to VM {vmid}?", live.vm.node,
                       others)

    baseline = None
    if options.verify and guest is not None:
        baseline = probe_before(conn, guest, vmid, options.state_dir, options.verify_quick,
                                console)
    result = _stages(conn, live, prepared, options, console, hook, reader, guest, sessions,
                     others)
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


def _asked(options: ApplyOptions, guest: GuestAccess | None, conn: Connection) -> Asked:
    return Asked(phase=options.phase, replan=options.replan, qm_set=options.qm_set,
                 restart=options.restart, start=options.start, reboot_host=options.reboot_host,
                 pve_snapshot=options.pve_snapshot, plan_options=options.plan_options,
                 guest=guest is not None, on_this_host=conn.on_this_host,
                 context=options.context)


def _refuse_for_activation(conn: Connection, sessions: Sessions, live: HostState,
                           prepared: Prepared, options: ApplyOptions,
                           console: Console) -> list[NodeVm]:
    """What the activation would hurt, refused before anything is written (HA, the power
    privilege, the node's other VMs); returns the VMs a host reboot shuts down first."""
    vmid = live.vm.vmid
    reboots, starts = prepared.reboots, prepared.starts
    if not (reboots or starts):
        return []
    refuse_ha_restart(live, "a host reboot" if reboots else "--restart/--start")
    vms = node_vms(sessions.api().get, live.vm.node)
    if starts:
        check_start(vms, vmid)
    if not reboots:
        return []
    return guard_host_reboot(conn, sessions, live, stop_others=options.stop_others,
                             start=options.start, console=console,
                             command=f"apply --phase {prepared.phase.number}", vms=vms)


def _reviewed(options: ApplyOptions, sessions: Sessions, console: Console) -> Reviewed:
    """How prepare tells pvefix's own earlier applies of a saved plan (their journals in the
    state directory) from anyone else's change (pvefix.flow.reviewed)."""
    cluster = sessions.cluster_identity()
    return Reviewed(
        explain_stale=lambda saved, live, number, stale: stale_after_own_applies(
            saved, live, number, stale, options.state_dir, cluster, console),
        activates=lambda saved, fresh, number, live: activates_saved_phase(
            saved, fresh, number, live, options.state_dir, cluster, console))


def _stages(conn: Connection, live: HostState, prepared: Prepared, options: ApplyOptions,
            console: Console, hook: Hook | None, reader: StateReader,
            guest: GuestAccess | None, sessions: Sessions,
            others: list[NodeVm]) -> ApplyResult:
    """Write, activate, verify under the VM lock; record the desired state reached."""
    from pvefix.sources.live import read_live

    vmid, plan, phase = live.vm.vmid, prepared.plan, prepared.phase
    node = live.vm.node
    sessions.claim(node)  # --local: this host must be the VM's node, checked now
    channel = sessions.guest(guest, vmid, live.vm.node) if guest is not None and wants_guest(
        phase) else None
    # The guest's files were verified before activation; a guest down with its VM, or
    # restarted and not answering yet, is left out of the reads after it.
    host_only: StateReader = reader if channel is None else (
        lambda c, v: read_live(c, v, sessions=sessions))
    with vm_lock(options.state_dir, sessions, node, vmid, f"apply phase {phase.number}",
                 console.progress):
        written = write(sessions, conn, live, plan, phase, options, console, hook=hook,
                        use_qm=prepared.use_qm, channel=channel, guest=guest,
                        reread=lambda: reader(conn, vmid))
        activated = activate(sessions, node, written, phase, options, console,
                             was_running=live.vm.status == "running", others=others,
                             reread=lambda: host_only(conn, vmid))
        after = verify_phase(sessions, node, written, activated, plan, phase, options, console,
                             reread=lambda: host_only(conn, vmid))
        # Said once, by the command, with the rest of the result.
        desired = record_desired(options.state_dir, after, note=f"apply phase {phase.number}",
                                 cluster=sessions.identity(node), p2p=p2p_rule(plan.options))
    return ApplyResult(
        vmid=vmid, phase=phase.number, snapshot_id=written.snapshot.id, done=written.done,
        manual=written.manual, activated=activated.activated,
        pending=pending_text(phase, after, activated.restarted, options.reboot_host),
        rollback_command=written.rollback_command, desired_path=str(desired),
        not_running=[line for line in activated.activated if " NOT up: " in line],
        next_line=next_line(plan, phase.number, prepared.context,
                            unbooted=phase.reboot_activates and not options.reboot_host))


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
    for line in render_text(verdict, on_tty(console.out)).splitlines():
        console.say(line)
    refuse_failed(verdict, phase.number)
