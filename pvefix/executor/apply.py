"""What the stages of `pvefix apply` share: the admin's options (ApplyOptions), the printed
rollback command, what a phase reached (PhaseReached) and what still waits for activation.

The stages themselves (docs/architecture.md, "Stages of apply"): prepare (pvefix.flow.prepare,
pure refusals), write (pvefix.executor.write, the transaction), activate
(pvefix.executor.activate: restart, host reboot, neighbours), restore (pvefix.executor.restore,
the one rollback body) and verify (pvefix.flow.verify_phase); pvefix.flow.apply composes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pvefix.hints import Context
from pvefix.planner.model import Phase, PlanOptions
from pvefix.state import HostState
from pvefix.target.settings import Connection

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

