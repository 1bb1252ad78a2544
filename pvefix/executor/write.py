"""The write stage of `pvefix apply`: one phase, already prepared (pvefix.flow.prepare), written
as a transaction under the VM lock the caller holds:

    (Proxmox snapshot) -> pvefix snapshot -> steps, each journaled before and after -> each
    step's own check -> (a restart: the VM shut down, still inside the transaction)

Any failure undoes the steps already done, in reverse, through the same guarded paths, and says
what was undone (pvefix.executor.transaction). What it returns (`Written`) is what activation,
verification and the way back need: the snapshot, its journal, what was done and left to the
admin, and the exact rollback command.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pvefix.errors import PvefixError
from pvefix.executor.console import Console
from pvefix.executor.journal import Hook, Journal
from pvefix.executor.options import ApplyOptions, rollback_command
from pvefix.executor.power import shutdown_vm
from pvefix.executor.restore import backup_stamp
from pvefix.executor.snapshot import Snapshot, take_snapshot
from pvefix.executor.steps import ManualStep, Step, StepContext, build_steps
from pvefix.executor.transaction import transaction
from pvefix.executor.vmwrite import ApiVmWriter, QmVmWriter, VmWriter
from pvefix.planner.model import Phase, Plan
from pvefix.state import HostState
from pvefix.target.guest.access import GuestAccess
from pvefix.target.guest.channel import GuestChannel
from pvefix.target.sessions import Sessions
from pvefix.target.settings import Connection
from pvefix.target.tasks import run_task


@dataclass(frozen=True)
class Written:
    """What the write stage did (the VM is shut down when `restarting`)."""

    snapshot: Snapshot
    journal: Journal
    done: list[str]
    manual: list[str]
    rollback_command: str
    restarting: bool  # --restart of a phase with VM changes: shut down, to be started


def write(sessions: Sessions, conn: Connection, live: HostState, plan: Plan, phase: Phase,
          options: ApplyOptions, console: Console, *, hook: Hook | None, use_qm: bool,
          channel: GuestChannel | None, guest: GuestAccess | None,
          reread: Callable[[], HostState]) -> Written:
    """Snapshot, then the phase's steps as one transaction (`reread`: the target read again,
    after a Proxmox snapshot moved its digest). Raises, after undoing, when a step fails."""
    vmid, node = live.vm.vmid, live.vm.node
    pve_snap = None
    if options.pve_snapshot:
        pve_snap = _take_pve_snapshot(sessions, node, vmid, options, console)
        live = reread()  # the Proxmox snapshot moved the digest: snapshot after it
    target_info: dict[str, str | int | None] = {
        "api": f"{conn.host}:{conn.port}", "user": conn.api_user, "ssh": conn.effective_ssh_host
        if conn.ssh else None, "guest": guest.method if guest else None,
        "guest_ssh": guest.ssh_host if guest and guest.method == "ssh" else None}
    snapshot = take_snapshot(options.state_dir, live, plan, phase.number, target_info, pve_snap,
                             cluster=sessions.identity(node))
    console.progress(f"snapshot {snapshot.id} in {snapshot.path}")
    journal = snapshot.journal(hook)
    host = sessions.at(node)
    writer: VmWriter = QmVmWriter(host, vmid) if use_qm else ApiVmWriter(
        sessions, node, vmid, options.task_timeout, console.progress)
    ctx = StepContext(sessions=sessions, vmid=vmid, writer=writer, vm_digest=live.vm.digest,
                      backup_suffix=backup_stamp(), node=host, guest=channel)
    steps = build_steps(plan, phase, snapshot, guest=channel is not None,
                        one_vm_write=not sessions.conn.reaches_node)
    restarting = options.restart and any(c.target == "vm-config" for c in phase.changes)
    journal.record("apply-start", phase=phase.number, vmid=vmid, writer=writer.name,
                   steps=[s.id for s in steps])
    shutdown = None
    if restarting:
        def shutdown() -> None:
            journal.record("activation-begin", kind="restart")
            shutdown_vm(sessions, node, vmid, timeout=options.shutdown_timeout,
                        force_stop=options.force_stop, task_timeout=options.task_timeout,
                        say=console.progress)
    done, manual = run_steps(ctx, journal, console, snapshot, steps, shutdown,
                             rollback_command(vmid, snapshot.id, options, False))
    undo = rollback_command(vmid, snapshot.id, options, restarting,
                            reboot=options.reboot_host and phase.reboot_activates)
    console.written(undo)  # from here on, a Ctrl-C leaves the changes in place
    return Written(snapshot=snapshot, journal=journal, done=done, manual=manual,
                   rollback_command=undo, restarting=restarting)


def run_steps(ctx: StepContext, journal: Journal, console: Console, snapshot: Snapshot,
              steps: list[Step], shutdown: Callable[[], None] | None,
              undo_command: str | None = None) -> tuple[list[str], list[str]]:
    """The steps, each journaled, then each one's check, then `shutdown` (a restart's), all
    inside the transaction; returns what was done and what is left to the admin
    (`undo_command`: what the report gives for what an interrupted undo left)."""
    done: list[str] = []
    manual: list[str] = []
    with transaction(ctx, journal, console, snapshot, undo_command) as started:
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
        if shutdown is not None:
            shutdown()
    return done, manual


def _take_pve_snapshot(sessions: Sessions, node: str, vmid: int, options: ApplyOptions,
                       console: Console) -> str:
    name = "pvefix_" + backup_stamp().replace("T", "_").rstrip("Z")
    console.progress(
        f"WARNING: taking Proxmox snapshot {name} (disk only, no RAM). Rolling THAT back also "
        "rolls back the disks: every write inside the guest since then is lost. pvefix's own "
        "rollback never uses it."
    )
    from pvefix.console.progress import waiting

    with waiting(f"VM {vmid}", f"the Proxmox snapshot task ({name})", console.progress):
        run_task(sessions.api(), node, f"/nodes/{node}/qemu/{vmid}/snapshot",
                 {"snapname": name, "vmstate": "0",
                  "description": "before pvefix apply (config fix)"},
                 options.task_timeout, console.progress)
    return name
