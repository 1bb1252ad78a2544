"""Every VM on the node a host reboot will stop: who runs, who is locked, what comes back.

A host reboot stops every VM on the node. pvefix lists them first (run state, lock, HA state,
onboot, the GPUs each holds) and refuses, before any write, while another VM runs or any VM is
locked, unless `--stop-others` is given: then each other running VM is shut down cleanly, in
reverse startup order (Proxmox's `startup: order=N`), each waited for. A VM under a backup or
migrate lock, and an HA-managed VM, are never stopped by pvefix. After the activation every VM
that ran before is started again in startup order and checked (`running-machine`).

A GPU can be held by one running VM only (qemu-server's PCI reservation): a start is refused
before any write when a device it needs is held by another running VM, and a host reboot when
an `onboot` VM would take, at boot, a device a VM that must come back needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pvefix.errors import RefusedError


@dataclass(frozen=True)
class NodeVm:
    vmid: int
    name: str
    status: str
    lock: str | None
    hastate: str | None
    onboot: bool
    order: int | None  # startup order=N (None: after the ordered ones)
    gpus: list[str] = field(default_factory=list)  # hostpci values
    devices: tuple[str, ...] = ()  # the PCI functions those entries name on this node

    def describe(self) -> str:
        parts = [f"VM {self.vmid} ({self.name or '-'})", self.status]
        if self.lock:
            parts.append(f"lock {self.lock}")
        if self.hastate:
            parts.append(f"HA {self.hastate}")
        parts.append("onboot" if self.onboot else "no onboot")
        if self.order is not None:
            parts.append(f"startup order {self.order}")
        if self.gpus:
            parts.append("passes " + "; ".join(self.gpus))
        return ", ".join(parts)


def startup_order(startup: str | None) -> int | None:
    m = re.search(r"(?:^|,)order=(\d+)", startup or "")
    return int(m.group(1)) if m else None


def gpu_conflicts(starting: list[NodeVm], running: list[NodeVm]) -> list[str]:
    """Devices a VM to start needs that another VM holds (or takes first, in start order)."""
    holders: dict[str, int] = {}
    for v in running:
        for dev in v.devices:
            holders.setdefault(dev, v.vmid)
    problems = []
    for v in starting:
        for dev in v.devices:
            holder = holders.setdefault(dev, v.vmid)
            if holder != v.vmid:
                problems.append(f"VM {v.vmid} needs {dev}, which VM {holder} holds")
    return problems


def check_start(vms: list[NodeVm], target: int) -> None:
    """Refuse (before any write) a start of `target` while another running VM holds a device
    it needs: Proxmox would refuse it (`PCI device ... already in use by VMID ...`)."""
    me = [v for v in vms if v.vmid == target]
    conflicts = gpu_conflicts(me, [v for v in vms if v.status == "running" and v.vmid != target])
    if conflicts:
        raise RefusedError(
            f"VM {target} could not start: " + "; ".join(conflicts) + " (Proxmox refuses the "
            "start: 'PCI device ... already in use by VMID ...'); nothing was written. Stop "
            "that VM first, or apply without --restart/--start", source=f"VM {target}")


def check_after_boot(vms: list[NodeVm], back: list[int]) -> None:
    """Refuse (before any write) a reboot after which a VM that must run again would find a
    device it needs taken by an `onboot` VM (Proxmox starts those at boot, first)."""
    coming = [v for v in vms if v.vmid in back]
    at_boot = [v for v in vms if v.onboot and v.vmid not in back]
    conflicts = gpu_conflicts(startup_sorted(coming), startup_sorted(at_boot))
    if conflicts:  # the node's VMs are listed above the refusal (pvefix/flow/guards.py)
        raise RefusedError(
            "after the reboot a VM could not start again: " + "; ".join(conflicts)
            + " (onboot VMs start at boot and hold their devices; the node's VMs are listed"
            " above); nothing was written.")


def startup_sorted(vms: list[NodeVm]) -> list[NodeVm]:
    """Proxmox's start order: by `order` ascending, unordered ones after, then by VMID."""
    return sorted(vms, key=lambda v: (v.order is None, v.order or 0, v.vmid))


def check_host_reboot(vms: list[NodeVm], target: int, stop_others: bool) -> list[NodeVm]:
    """The other VMs pvefix must stop before the reboot; RefusedError (before any write)
    when the reboot would stop a VM it may not stop."""
    locked = [v for v in vms if v.lock]
    others = [v for v in vms if v.vmid != target and v.status == "running"]
    # The node's VMs are listed once, above the refusal (pvefix/flow/guards.py), filled to the
    # terminal: the refusal names only those it is about.
    if locked:
        raise RefusedError(
            "a host reboot would stop locked VMs: "
            + ", ".join(f"VM {v.vmid} (lock {v.lock})" for v in locked)
            + "; nothing was written.")
    if others and not stop_others:
        raise RefusedError(
            "a host reboot stops every VM on the node, and other VMs run: "
            + ", ".join(f"VM {v.vmid}" for v in others)
            + "; nothing was written. Shut them down first, or add --stop-others (clean"
            " shutdown of each, started again afterwards).")
    ha = [v for v in others if v.hastate and v.hastate not in ("stopped", "ignored")]
    if ha:
        raise RefusedError(
            "HA-managed VMs run on the node: "
            + ", ".join(f"VM {v.vmid} (HA {v.hastate})" for v in ha)
            + "; pvefix does not stop them (the HA manager would act on it). Migrate them or"
            " set their HA state first; nothing was written.")
    return others
