"""A host reboot that activates what is configured, for `rollback --reboot-host`: the other
running VMs shut down first (--stop-others), the reboot waited for, every VM that ran started
again, then the booted cmdline checked against the configured one (its passthrough-relevant
parameters, pvefix/cmdline/relevant.py), journaled in the snapshot as apply's activation is."""

from __future__ import annotations

from collections.abc import Callable

from pvefix.cmdline.relevant import relevant_differ, relevant_parameters
from pvefix.errors import PvefixError
from pvefix.executor.activate import _start_again, _stop_others
from pvefix.executor.activation import reboot_host, vm_run
from pvefix.executor.apply import ApplyOptions
from pvefix.executor.console import Console
from pvefix.executor.neighbours import NodeVm
from pvefix.executor.remote import Remote
from pvefix.executor.snapshot import Snapshot
from pvefix.observed import node_from_state
from pvefix.state import HostState


def boot_pending(live: HostState) -> bool:
    """Does the node run another passthrough-relevant cmdline than the one configured?"""
    node = node_from_state(live)
    configured, running = node.configured_cmdline(), node.running_cmdline()
    return configured is not None and running is not None and relevant_differ(configured,
                                                                                running)


def reboot_to_activate(remote: Remote, snapshot: Snapshot, others: list[NodeVm],
                       options: ApplyOptions, console: Console,
                       reread: Callable[[], HostState]) -> list[str]:
    """Reboot the VM's node and start again what ran (`reread`: the target read afresh after
    it); returns what the report says of each. Raises when the booted cmdline is not the
    configured one afterwards."""
    vmid = snapshot.meta.vmid
    journal = snapshot.journal()
    journal.record("activation-begin", kind="reboot-host", rollback=True)
    stopped = _stop_others(remote, others, options, console, journal)
    target_ran = vm_run(remote, vmid).status == "running"
    seconds = reboot_host(remote, timeout=options.reboot_timeout, say=console.progress)
    journal.record("activation-end", kind="reboot-host", seconds=round(seconds, 2),
                   rollback=True)
    activated = [f"host {remote.node} rebooted ({seconds:.1f} s)"]
    ran_before = [*stopped, *([vmid] if target_ran else [])]
    activated += _start_again(remote, ran_before, others, options, console, journal)
    node = node_from_state(reread())
    configured, running = node.configured_cmdline(), node.running_cmdline()
    if configured is not None and running is not None and relevant_differ(configured,
                                                                           running):
        journal.record("activation-failed", kind="reboot-host",
                       booted=running.render(), configured=configured.render())
        raise PvefixError(
            "after the reboot the host runs another kernel cmdline than the one configured"
            f" (booted: {' '.join(relevant_parameters(running)) or '(none of them)'};"
            f" configured in {node.configured_source}:"
            f" {' '.join(relevant_parameters(configured)) or '(none of them)'}): the boot loader"
            " may not hold the file (run its refresh), look before rebooting again",
            source=f"node {remote.node}")
    return activated
