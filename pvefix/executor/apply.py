"""The executor's half of `pvefix apply`: one phase, already refused or allowed by the flow
(pvefix.flow.apply), applied as a transaction under the VM lock:

    (Proxmox snapshot) -> pvefix snapshot -> steps, each journaled before and after -> verify
    -> activate (restart / host reboot) -> verify again -> what it reached (PhaseReached)

With a way into the guest, guest-cmdline changes are steps too (the guest's /etc/default/grub
and update-grub: FileStep and RefreshStep over the guest channel).

Any failure before activation undoes the steps already done, in reverse, through the same
guarded paths, and says what was undone (pvefix.executor.transaction). A VM that fails to start
after the change is rolled back and started again with --auto-rollback; otherwise the exact
rollback command is given.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pvefix.errors import PvefixError
from pvefix.executor import checks
from pvefix.executor.activation import (
    StartFailed,
    cmdline_problems,
    reboot_host,
    shutdown_vm,
    start_vm,
    vm_run,
)
from pvefix.executor.console import Console
from pvefix.executor.filetarget import GuestFiles, NodeFiles
from pvefix.executor.journal import Hook, Journal
from pvefix.executor.neighbours import NodeVm, startup_sorted
from pvefix.executor.remote import Remote
from pvefix.executor.restore import backup_stamp, restore
from pvefix.executor.rollback import restart_outlook
from pvefix.executor.snapshot import Snapshot, take_snapshot
from pvefix.executor.steps import ManualStep, StepContext, build_steps
from pvefix.executor.transaction import ApplyFailed, transaction
from pvefix.executor.vmwrite import ApiVmWriter, QmVmWriter, VmWriter, read_vm
from pvefix.paths import PROC_CMDLINE
from pvefix.planner.model import Phase, Plan, PlanOptions
from pvefix.state import HostState
from pvefix.target.guest.access import GuestAccess
from pvefix.target.guest.channel import GuestChannel
from pvefix.target.settings import Connection
from pvefix.verify.qemu_proof import prove as prove_cmdline
from pvefix.vmconfig.nextstart import NextStart

StateReader = Callable[[Connection, int], HostState]


@dataclass(frozen=True)
class ApplyOptions:
    """What the admin asked for on the command line."""

    phase: int
    state_dir: Path
    yes: bool = False
    replan: bool = False
    restart: bool = False
    force_stop: bool = False
    reboot_host: bool = False
    stop_others: bool = False  # with reboot_host: shut other running VMs down cleanly first
    start: bool = False  # with restart: also start a VM that was stopped
    auto_rollback: bool = False
    pve_snapshot: bool = False
    qm_set: bool = False
    shutdown_timeout: float = 120.0
    task_timeout: float = 60.0
    reboot_timeout: float = 900.0
    rollback_hint: str = ""  # extra options for the printed rollback command
    verify: bool = False  # probe the guest before and after (needs guest access)
    verify_quick: bool = True  # the probe's quick mode
    guest_wait: float = 300.0  # how long the after-probe waits for a restarted guest
    plan_options: PlanOptions = field(default_factory=PlanOptions)  # --p2p, --clique-map



def rollback_command(vmid: int, snapshot_id: str, options: ApplyOptions, restart: bool) -> str:
    parts = ["pvefix", "rollback", str(vmid), "--snapshot", snapshot_id]
    if restart:
        parts.append("--restart")
    command = shlex.join(parts)
    return f"{command} {options.rollback_hint}".strip()



class PhaseReached(BaseModel):
    """What `apply_steps` reached (frozen): the steps done, what is left to the admin, what was
    activated and what still waits, the way back, and the target as read afterwards."""

    model_config = ConfigDict(frozen=True)

    snapshot_id: str
    done: list[str]
    manual: list[str]
    activated: list[str]
    pending: list[str]
    rollback_command: str
    after: HostState

    @property
    def not_running(self) -> list[str]:
        """VMs that ran before a host reboot and are not up again."""
        return [line for line in self.activated if " NOT up: " in line]


def wants_guest(phase: Phase) -> bool:
    return any(c.target == "guest-cmdline" for c in phase.changes)



def _take_pve_snapshot(remote: Remote, vmid: int, options: ApplyOptions,
                       console: Console) -> str:
    name = "pvefix_" + backup_stamp().replace("T", "_").rstrip("Z")
    console.progress(
        f"WARNING: taking Proxmox snapshot {name} (disk only, no RAM). Rolling THAT back also "
        "rolls back the disks: every write inside the guest since then is lost. pvefix's own "
        "rollback never uses it."
    )
    from pvefix.console.progress import waiting

    with waiting(f"VM {vmid}", f"the Proxmox snapshot task ({name})", console.progress):
        remote.run_task(f"/nodes/{remote.node}/qemu/{vmid}/snapshot",
                        {"snapname": name, "vmstate": "0",
                         "description": "before pvefix apply (config fix)"},
                        options.task_timeout)
    return name



def apply_steps(remote: Remote, conn: Connection, live: HostState, plan: Plan, phase: Phase,
                options: ApplyOptions, console: Console, hook: Hook | None,
                reader: StateReader, use_qm: bool, channel: GuestChannel | None,
                guest: GuestAccess | None, others: list[NodeVm] | None = None) -> PhaseReached:
    """Apply one phase whose refusals are already passed, under the VM lock the caller holds:
    (Proxmox snapshot) -> pvefix snapshot -> steps, journaled -> verify -> activate -> verify
    again. Returns what it reached; raises (after undoing what it did) when it fails.
    """
    vmid = live.vm.vmid
    was_running = live.vm.status == "running"
    pve_snap = None
    if options.pve_snapshot:
        pve_snap = _take_pve_snapshot(remote, vmid, options, console)
        live = reader(conn, vmid)  # the Proxmox snapshot moved the digest: snapshot after it
    target_info: dict[str, str | int | None] = {
        "api": f"{conn.host}:{conn.port}", "user": conn.api_user, "ssh": conn.effective_ssh_host
        if conn.ssh else None, "guest": guest.method if guest else None,
        "guest_ssh": guest.ssh_host if guest and guest.method == "ssh" else None,
    }
    snapshot = take_snapshot(options.state_dir, live, plan, phase.number, target_info, pve_snap,
                             cluster=remote.identity())
    console.progress(f"snapshot {snapshot.id} in {snapshot.path}")
    journal = snapshot.journal(hook)
    writer: VmWriter = QmVmWriter(remote, vmid) if use_qm else ApiVmWriter(
        remote, vmid, options.task_timeout)
    ctx = StepContext(remote=remote, vmid=vmid, writer=writer, vm_digest=live.vm.digest,
                      backup_suffix=backup_stamp(), node=NodeFiles(remote.host),
                      guest=None if channel is None else GuestFiles(channel))
    steps = build_steps(plan, phase, snapshot, guest=channel is not None,
                        one_vm_write=not remote.has_ssh)
    restarting = options.restart and any(c.target == "vm-config" for c in phase.changes)
    rollback_cmd = rollback_command(vmid, snapshot.id, options, restarting)
    journal.record("apply-start", phase=phase.number, vmid=vmid, writer=writer.name,
                   steps=[s.id for s in steps])
    done: list[str] = []
    manual: list[str] = []
    activated: list[str] = []
    with transaction(ctx, journal, console, snapshot) as started:
        for step in steps:
            if isinstance(step, ManualStep):
                manual += step.change.commands or [step.summary()]
                continue
            journal.record("step-begin", step=step.id, **step.intent(ctx))
            started.append(step)
            result = step.do(ctx)
            journal.record("step-end", step=step.id, **result)
            done.append(step.summary())
            console.progress(f"done: {step.summary()}")
        problems = [p for s in started if (p := s.verify(ctx))]
        if problems:
            raise PvefixError("verification failed: " + "; ".join(problems))
        journal.record("verified", stage="written")
        if restarting:
            journal.record("activation-begin", kind="restart")
            shutdown_vm(remote, vmid, timeout=options.shutdown_timeout,
                        force_stop=options.force_stop, task_timeout=options.task_timeout,
                        say=console.progress)
    if restarting and not was_running and not options.start:
        console.progress(f"VM {vmid} was stopped: the config is applied and it stays stopped"
                         " (add --start to start it)")
        restarting = False
    elif restarting:
        machine = _machine_now(remote, vmid)
        try:
            start_vm(remote, vmid, task_timeout=options.task_timeout, say=console.progress,
                     machine=machine)
        except StartFailed as exc:
            journal.record("activation-failed", kind="restart", error=exc.exitstatus)
            # The guest is down with its VM: the target is read without it.
            host_reader: StateReader = reader if channel is None else (
                lambda c, v: _read_host_only(remote, c, v))
            _after_start_failure(remote, conn, snapshot, journal, options, console, exc,
                                 host_reader, rollback_cmd)
        journal.record("activation-end", kind="restart")
        activated.append(f"VM {vmid} restarted")
    if options.reboot_host and any(c.target == "host-cmdline" for c in phase.changes):
        journal.record("activation-begin", kind="reboot-host")
        stopped = _stop_others(remote, others or [], options, console, journal)
        target_ran = vm_run(remote, vmid).status == "running"
        seconds = reboot_host(remote, timeout=options.reboot_timeout, say=console.progress)
        journal.record("activation-end", kind="reboot-host", seconds=round(seconds, 2))
        activated.append(f"host {remote.node} rebooted ({seconds:.1f} s)")
        ran_before = [*stopped, *([vmid] if target_ran else [])]
        activated += _start_again(remote, ran_before, others or [], options, console, journal)
    # The guest's files were verified before activation; a restarted guest may not answer yet.
    after = reader(conn, vmid) if channel is None else _read_host_only(remote, conn, vmid)
    problems = checks.verify_live(phase, plan, after, restarted=restarting)
    clique = next((c for c in phase.changes if c.rule == "p2p" and c.key == "args"), None)
    if restarting and clique is not None:
        proof = prove_cmdline(remote, vmid, clique.after)
        journal.record("qemu-cmdline", pid=proof.pid, problems=proof.problems, note=proof.note)
        if proof.note:
            console.progress(f"the running QEMU's cliques are not proven: {proof.note}")
        elif not proof.problems:
            console.progress(f"/proc/{proof.pid}/cmdline on {remote.node}: every clique is there,"
                             " no kvm=off")
        problems += proof.problems
    if options.reboot_host:
        proc = after.file(PROC_CMDLINE).text or ""
        problems += cmdline_problems(proc, [(c.before, c.after) for c in phase.changes
                                            if c.target == "host-cmdline"])
    if problems:
        journal.record("apply-end", status="verify-failed", problems=problems)
        raise PvefixError(
            "verification after the phase failed:\n  " + "\n  ".join(problems)
            + f"\nto put everything back: {rollback_cmd}"
        )
    journal.record("apply-end", status="applied")
    return PhaseReached(
        snapshot_id=snapshot.id, done=done, manual=manual, activated=activated,
        pending=_pending_text(phase, after, restarting, options.reboot_host),
        rollback_command=rollback_cmd, after=after,
    )


def _stop_others(remote: Remote, others: list[NodeVm], options: ApplyOptions,
                 console: Console, journal: Journal) -> list[int]:
    """Shut the other running VMs down cleanly, in reverse startup order, each waited for."""
    stopped: list[int] = []
    for v in reversed(startup_sorted(others)):
        journal.record("activation-begin", kind="stop-other", vmid=v.vmid)
        if shutdown_vm(remote, v.vmid, timeout=options.shutdown_timeout,
                       force_stop=options.force_stop, task_timeout=options.task_timeout,
                       say=console.progress):
            stopped.append(v.vmid)
        journal.record("activation-end", kind="stop-other", vmid=v.vmid)
    return stopped


def _start_again(remote: Remote, ran_before: list[int], others: list[NodeVm],
                 options: ApplyOptions, console: Console, journal: Journal) -> list[str]:
    """Every VM that ran before the reboot runs again (onboot ones may already), in startup
    order, each checked; returns what the report says of each."""
    order = {v.vmid: v for v in others}
    wanted = sorted(ran_before, key=lambda i: (
        order[i].order is None if i in order else True,
        (order[i].order or 0) if i in order else 0, i))
    report: list[str] = []
    for vmid in wanted:
        run = vm_run(remote, vmid)
        if run.status == "running":
            report.append(f"VM {vmid} up ({run.running_machine or 'running'})")
            continue
        journal.record("activation-begin", kind="start-again", vmid=vmid)
        try:
            machine = _machine_now(remote, vmid)
            run = start_vm(remote, vmid, task_timeout=options.task_timeout,
                           say=console.progress, machine=machine)
            report.append(f"VM {vmid} up again ({run.running_machine})")
        except PvefixError as exc:
            report.append(f"VM {vmid} NOT up: {exc}")
        journal.record("activation-end", kind="start-again", vmid=vmid)
    return report


def _read_host_only(remote: Remote, conn: Connection, vmid: int) -> HostState:
    from pvefix.sources.live import read_live

    return read_live(conn, vmid, sessions=remote.sessions)


def _machine_now(remote: Remote, vmid: int) -> str | None:
    return read_vm(remote, vmid).value("machine")



def _after_start_failure(remote: Remote, conn: Connection, snapshot: Snapshot,
                         journal: Journal, options: ApplyOptions, console: Console,
                         exc: StartFailed, reader: StateReader, rollback_cmd: str) -> None:
    vmid = snapshot.meta.vmid
    if not options.auto_rollback:
        journal.record("apply-end", status="start-failed", error=exc.exitstatus)
        raise ApplyFailed(
            f"{exc}\nthe changes are in place and the VM is stopped. To put the old config back "
            f"and start it: {rollback_cmd}"
        )
    console.progress(f"{exc}; rolling back to snapshot {snapshot.id} (--auto-rollback)")
    live = reader(conn, vmid)
    writer = ApiVmWriter(remote, vmid, options.task_timeout)
    journal.record("rollback-begin", automatic=True)
    # The start failed: the VM is stopped, so nothing reaches its guest now.
    undo = rollback_command(vmid, snapshot.id, options, False)
    done = restore(remote, snapshot, live, journal, writer, None,
                   unreachable=f"the guest is down (its start failed); once it runs: {undo}")
    restored = list(done.restored)
    outlook = restart_outlook(snapshot)
    if snapshot.meta.vm.status == "running" and outlook.cannot_start:
        restored.append(outlook.held_back(running=False))
    elif snapshot.meta.vm.status == "running":
        start_vm(remote, vmid, task_timeout=options.task_timeout, say=console.progress,
                 machine=NextStart.from_text(snapshot.vm_config_text()).value("machine"))
        restored.append(f"VM {vmid} started again on the old config")
    journal.record("rollback-end", restored=restored, skipped=done.skipped, automatic=True)
    raise ApplyFailed(f"{exc}\nrolled back (--auto-rollback): " + "; ".join(restored)
                      + "".join(f"\nNOT restored: {line}" for line in done.skipped))


def _pending_text(phase: Phase, after: HostState, restarted: bool,
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
    if any(c.target == "host-cmdline" for c in phase.changes) and not rebooted:
        out.append("host: the boot loader holds the new kernel cmdline; it takes effect at the "
                   "next host reboot (or --reboot-host)")
    if wants_guest(phase) and not restarted:
        out.append(f"guest: its boot loader holds the new kernel cmdline; it takes effect at "
                   f"the guest's next boot (reboot it, or restart VM {vmid})")
    return out

