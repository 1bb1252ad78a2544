"""The refusals before a host reboot that `rollback --reboot-host` makes, the same as `apply
--reboot-host`'s (docs/apply.md, step 4), before anything is written: not the host pvefix runs
on (--local), no HA-managed target, every VM of the node listed, a running or locked VM refused
unless --stop-others (HA-managed and backup/migrate-locked ones never stopped), and no VM that
must come back finding its GPU taken by an onboot VM after the boot."""

from __future__ import annotations

from pvefix.errors import RefusedError
from pvefix.executor.console import Console
from pvefix.executor.neighbours import NodeVm, check_after_boot, check_host_reboot
from pvefix.flow.guards import refuse_ha_restart
from pvefix.flow.neighbours import node_vms
from pvefix.state import HostState
from pvefix.target.sessions import Sessions
from pvefix.target.settings import Connection


def guard_host_reboot(conn: Connection, sessions: Sessions, live: HostState, *,
                      stop_others: bool, start: bool, console: Console,
                      command: str, vms: list[NodeVm] | None = None) -> list[NodeVm]:
    """Refuse a host reboot that would hurt (RefusedError, nothing written); list the node's
    VMs (`vms`: already read); return the other running VMs pvefix stops first
    (--stop-others) and starts again."""
    vmid, node = live.vm.vmid, live.vm.node
    if conn.on_this_host:
        raise RefusedError(
            "--reboot-host with --local would reboot the host pvefix runs on, in the middle of"
            f" its own run; nothing was written. Run {command} without --reboot-host, reboot"
            f" the node yourself, then check it: pvefix check {vmid} --local",
            source=f"node {node}")
    refuse_ha_restart(live, "a host reboot")
    if vms is None:
        vms = node_vms(sessions.api().get, node)
    console.say(f"A host reboot stops every VM on {node}:")
    for v in vms:
        console.say_wrapped(f"  {v.describe()}", hang=4)  # under the VM, not a new one
    others = check_host_reboot(vms, vmid, stop_others)
    back = [v.vmid for v in others]
    if live.vm.status == "running" or start:
        back.append(vmid)
    check_after_boot(vms, back)
    return others


def confirm_reboot(console: Console, question: str, node: str, others: list[NodeVm],
                   refused: str = "dry run; --yes to apply", yes: str = "apply") -> None:
    """The admin's yes; when a host reboot stops other running VMs, the node's name typed in
    full (a `y` typed out of habit does not stop a whole node). `refused`: what a refusal adds
    in parentheses; `yes`: what --yes does (`--yes to apply`)."""
    if not others:
        if not console.confirm(question):
            raise RefusedError(f"not confirmed: nothing was written ({refused})")
        return
    stops = ", ".join(f"VM {v.vmid}" for v in others)
    typed = console.confirm_typed(
        f"{question} The host reboot also stops {stops} on node {node} (shut down cleanly,"
        " started again afterwards).", node)
    if typed is None:
        raise RefusedError(
            f"not confirmed: a host reboot that stops other VMs ({stops}) is confirmed by typing"
            f" the node's name at a terminal, and there is none (stdin is not a terminal); "
            f"nothing was written (--yes to {yes} without asking)", source=f"node {node}")
    if not typed:
        raise RefusedError(f"not confirmed: the node's name ({node}) was not typed; nothing "
                           f"was written ({refused})", source=f"node {node}")
