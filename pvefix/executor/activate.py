"""The activate stage of `pvefix apply`: what makes a written phase take effect, under the VM
lock the caller holds. A restart starts the VM the write stage shut down (its running machine
checked); a VM that fails to start is put back by the restore stage with --auto-rollback
(pvefix.executor.restore), else the exact rollback command is given. A host reboot shuts the
other running VMs down first (--stop-others), reboots the node, waits for its API and SSH, and
starts every VM that ran before, in startup order; `rollback --reboot-host` runs the same
reboot (`reboot_to_activate`) and checks the booted cmdline afterwards. What it returns
(`Activated`) is what the report says of each, and whether the VM was restarted. The VM and
host power itself (start, shutdown, reboot) is pvefix.executor.power.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pvefix.cmdline.relevant import relevant_differ, relevant_parameters
from pvefix.errors import PvefixError
from pvefix.executor.console import Console
from pvefix.executor.journal import Journal
from pvefix.executor.neighbours import NodeVm, startup_sorted
from pvefix.executor.options import ApplyOptions, rollback_command
from pvefix.executor.power import StartFailed, reboot_host, shutdown_vm, start_vm, vm_run
from pvefix.executor.restore import restart_outlook, restore
from pvefix.executor.snapshot import Snapshot
from pvefix.executor.transaction import ApplyFailed
from pvefix.executor.vmwrite import ApiVmWriter, read_vm
from pvefix.executor.write import Written
from pvefix.observed import node_from_state
from pvefix.planner.model import Phase
from pvefix.state import HostState
from pvefix.target.sessions import Sessions
from pvefix.vmconfig.nextstart import NextStart


@dataclass(frozen=True)
class Activated:
    """What activation did: a line for each VM and the host, and whether the VM restarted."""

    activated: list[str]
    restarted: bool


def activate(sessions: Sessions, node: str, written: Written, phase: Phase, options: ApplyOptions,
             console: Console, *, was_running: bool, others: list[NodeVm],
             reread: Callable[[], HostState]) -> Activated:
    """Start the VM the write stage shut down (--restart), reboot the host (--reboot-host);
    `reread`: the target read again for an --auto-rollback (the host only: a guest is down
    with its VM)."""
    vmid = written.snapshot.meta.vmid
    journal = written.journal
    restarting = written.restarting
    activated: list[str] = []
    if restarting and not was_running and not options.start:
        console.progress(f"VM {vmid} was stopped: the config is applied and it stays stopped"
                         " (add --start to start it)")
        restarting = False
    elif restarting:
        try:
            start_vm(sessions, node, vmid, task_timeout=options.task_timeout, say=console.progress,
                     machine=_machine_now(sessions, node, vmid))
        except StartFailed as exc:
            journal.record("activation-failed", kind="restart", error=exc.exitstatus)
            _after_start_failure(sessions, node, written, options, console, exc, reread)
        journal.record("activation-end", kind="restart")
        activated.append(f"VM {vmid} restarted")
    if options.reboot_host and phase.reboot_activates:
        activated += _reboot_cycle(sessions, node, vmid, others, options, console, journal)
    return Activated(activated=activated, restarted=restarting)


def _reboot_cycle(sessions: Sessions, node: str, vmid: int, others: list[NodeVm],
                  options: ApplyOptions, console: Console, journal: Journal,
                  **marks: object) -> list[str]:
    """The other running VMs shut down (--stop-others), the node rebooted and waited for,
    every VM that ran started again; journaled (`marks`: what each record adds, a rollback's
    `rollback=True`). Returns what the report says of the host and each VM."""
    journal.record("activation-begin", kind="reboot-host", **marks)
    stopped = _stop_others(sessions, node, others, options, console, journal)
    target_ran = vm_run(sessions, node, vmid).status == "running"
    seconds = reboot_host(sessions, node, timeout=options.reboot_timeout, say=console.progress)
    journal.record("activation-end", kind="reboot-host", seconds=round(seconds, 2), **marks)
    ran_before = [*stopped, *([vmid] if target_ran else [])]
    return [f"host {node} rebooted ({seconds:.1f} s)",
            *_start_again(sessions, node, ran_before, others, options, console, journal)]


def boot_pending(live: HostState) -> bool:
    """Does the node run another passthrough-relevant cmdline than the one configured?"""
    booted = node_from_state(live)
    configured, running = booted.configured_cmdline(), booted.running_cmdline()
    return configured is not None and running is not None and relevant_differ(configured,
                                                                                running)


def reboot_to_activate(sessions: Sessions, node: str, snapshot: Snapshot, others: list[NodeVm],
                       options: ApplyOptions, console: Console,
                       reread: Callable[[], HostState]) -> list[str]:
    """`rollback --reboot-host`: reboot the VM's node and start again what ran (`reread`: the
    target read afresh after it), journaled in the snapshot as apply's activation is; returns
    what the report says of each. Raises when the booted cmdline is not the configured one
    afterwards (its passthrough-relevant parameters, pvefix/cmdline/relevant.py)."""
    journal = snapshot.journal()
    activated = _reboot_cycle(sessions, node, snapshot.meta.vmid, others, options, console, journal,
                              rollback=True)
    after = reread()
    if not boot_pending(after):
        return activated
    booted = node_from_state(after)
    configured, running = booted.configured_cmdline(), booted.running_cmdline()
    assert configured is not None and running is not None  # boot_pending says so
    journal.record("activation-failed", kind="reboot-host",
                   booted=running.render(), configured=configured.render())
    raise PvefixError(
        "after the reboot the host runs another kernel cmdline than the one configured"
        f" (booted: {' '.join(relevant_parameters(running)) or '(none of them)'};"
        f" configured in {booted.configured_source}:"
        f" {' '.join(relevant_parameters(configured)) or '(none of them)'}): the boot loader"
        " may not hold the file (run its refresh), look before rebooting again",
        source=f"node {node}")


def _stop_others(sessions: Sessions, node: str, others: list[NodeVm], options: ApplyOptions,
                 console: Console, journal: Journal) -> list[int]:
    """Shut the other running VMs down cleanly, in reverse startup order, each waited for."""
    stopped: list[int] = []
    for v in reversed(startup_sorted(others)):
        journal.record("activation-begin", kind="stop-other", vmid=v.vmid)
        if shutdown_vm(sessions, node, v.vmid, timeout=options.shutdown_timeout,
                       force_stop=options.force_stop, task_timeout=options.task_timeout,
                       say=console.progress):
            stopped.append(v.vmid)
        journal.record("activation-end", kind="stop-other", vmid=v.vmid)
    return stopped


def _start_again(sessions: Sessions, node: str, ran_before: list[int], others: list[NodeVm],
                 options: ApplyOptions, console: Console, journal: Journal) -> list[str]:
    """Every VM that ran before the reboot runs again (onboot ones may already), in startup
    order, each checked; returns what the report says of each."""
    order = {v.vmid: v for v in others}
    wanted = sorted(ran_before, key=lambda i: (
        order[i].order is None if i in order else True,
        (order[i].order or 0) if i in order else 0, i))
    report: list[str] = []
    for vmid in wanted:
        run = vm_run(sessions, node, vmid)
        if run.status == "running":
            report.append(f"VM {vmid} up ({run.running_machine or 'running'})")
            continue
        journal.record("activation-begin", kind="start-again", vmid=vmid)
        try:
            machine = _machine_now(sessions, node, vmid)
            run = start_vm(sessions, node, vmid, task_timeout=options.task_timeout,
                           say=console.progress, machine=machine)
            report.append(f"VM {vmid} up again ({run.running_machine})")
        except PvefixError as exc:
            report.append(f"VM {vmid} NOT up: {exc}")
        journal.record("activation-end", kind="start-again", vmid=vmid)
    return report


def _machine_now(sessions: Sessions, node: str, vmid: int) -> str | None:
    return read_vm(sessions, node, vmid).value("machine")



def _after_start_failure(sessions: Sessions, node: str, written: Written, options: ApplyOptions,
                         console: Console, exc: StartFailed,
                         reread: Callable[[], HostState]) -> None:
    """--auto-rollback: the restore stage, then the VM started again on the old config when
    it ran and can; else the exact rollback command. Always raises ApplyFailed."""
    snapshot, journal, rollback_cmd = written.snapshot, written.journal, written.rollback_command
    vmid = snapshot.meta.vmid
    if not options.auto_rollback:
        journal.record("apply-end", status="start-failed", error=exc.exitstatus)
        raise ApplyFailed(
            f"{exc}\nthe changes are in place and the VM is stopped. To put the old config back "
            f"and start it: {rollback_cmd}"
        )
    console.progress(f"{exc}; rolling back to snapshot {snapshot.id} (--auto-rollback)")
    live = reread()
    writer = ApiVmWriter(sessions, node, vmid, options.task_timeout, console.progress)
    journal.record("rollback-begin", automatic=True)
    # The start failed: the VM is stopped, so nothing reaches its guest now.
    undo = rollback_command(vmid, snapshot.id, options, False)
    done = restore(sessions, node, snapshot, live, journal, writer, None,
                   unreachable=f"the guest is down (its start failed); once it runs: {undo}")
    restored = list(done.restored)
    outlook = restart_outlook(snapshot)
    if snapshot.meta.vm.status == "running" and outlook.cannot_start:
        restored.append(outlook.held_back(running=False))
    elif snapshot.meta.vm.status == "running":
        start_vm(sessions, node, vmid, task_timeout=options.task_timeout, say=console.progress,
                 machine=NextStart.from_text(snapshot.vm_config_text()).value("machine"))
        restored.append(f"VM {vmid} started again on the old config")
    journal.record("rollback-end", restored=restored, skipped=done.skipped, automatic=True)
    raise ApplyFailed(f"{exc}\nrolled back (--auto-rollback): " + "; ".join(restored)
                      + "".join(f"\nNOT restored: {line}" for line in done.skipped))
