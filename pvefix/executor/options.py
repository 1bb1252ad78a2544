"""What the admin asked apply and rollback for (`ApplyOptions`, `RollbackOptions`: the
command line, parsed by pvefix.commands), and the printed `pvefix rollback` of an apply."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pvefix.hints import Context
from pvefix.planner.model import PlanOptions


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
    context: Context = field(default_factory=Context)  # what printed commands carry
    verify: bool = False  # probe the guest before and after (needs guest access)
    verify_quick: bool = True  # the probe's quick mode
    guest_wait: float = 300.0  # how long the after-probe waits for a restarted guest
    plan_options: PlanOptions = field(default_factory=PlanOptions)  # --p2p, --clique-map


def rollback_command(vmid: int, snapshot_id: str, options: ApplyOptions, restart: bool,
                     reboot: bool = False) -> str:
    """The printed `pvefix rollback` of this apply: with --restart when the VM was restarted,
    with --reboot-host when the host was rebooted to run it (never --stop-others: stopping
    other VMs is asked again, docs/apply.md)."""
    words = ["rollback", str(vmid), "--snapshot", snapshot_id]
    if restart:
        words.append("--restart")
    if reboot:
        words.append("--reboot-host")
    return options.context.command(words)


@dataclass(frozen=True)
class RollbackOptions:
    yes: bool = False
    force: bool = False
    restart: bool = False
    start: bool = False  # with --restart: start the VM even if it was stopped
    force_stop: bool = False
    shutdown_timeout: float = 120.0
    task_timeout: float = 60.0
    reboot_host: bool = False  # reboot the node so the restored host cmdline runs
    stop_others: bool = False  # with reboot_host: shut other running VMs down cleanly first
    reboot_timeout: float = 900.0
    context: Context = field(default_factory=Context)  # what printed commands carry
