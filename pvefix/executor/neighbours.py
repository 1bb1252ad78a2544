"""Every VM on the node a host reboot will stop: who runs, who is locked, what comes back.

A host reboot stops every VM on the node. pvefix lists them first (run state, lock, HA state,
onboot, the GPUs each holds) and refuses, before any write, while another VM runs or any VM is
locked, unless `--stop-others` is given: then each other running VM is shut down cleanly, in
reverse startup order (Proxmox's `startup: order=N`), each waited for. A VM under a backup or
migrate lock, and an HA-managed VM, are never stopped by pvefix. After the activation every VM
that ran before is started again in startup order and checked (`running-machine`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pvefix.errors import PvefixError, RefusedError
from pvefix.executor.remote import Remote
from pvefix.vmconfig.hostpci import HOSTPCI_KEY

NEVER_STOP_LOCKS = frozenset({"backup", "migrate"})


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


def _order(startup: str | None) -> int | None:
    m = re.search(r"(?:^|,)order=(\d+)", startup or "")
    return int(m.group(1)) if m else None


def node_vms(remote: Remote) -> list[NodeVm]:
    """The VMs of the node, from the API (list, HA state, each config)."""
    items = remote.get(f"/nodes/{remote.node}/qemu", {"full": "1"}) or []
    ha: dict[int, str] = {}
    try:
        for item in remote.get("/cluster/resources", {"type": "vm"}) or []:
            if item.get("hastate"):
                ha[int(item["vmid"])] = str(item["hastate"])
    except PvefixError:
        pass
    out: list[NodeVm] = []
    for item in sorted(items, key=lambda i: int(i.get("vmid", 0))):
        vmid = int(item["vmid"])
        cfg = remote.get(f"/nodes/{remote.node}/qemu/{vmid}/config") or {}
        gpus = [f"{k}: {v}" for k, v in sorted(cfg.items()) if HOSTPCI_KEY.match(str(k))]
        out.append(NodeVm(
            vmid=vmid, name=str(cfg.get("name") or item.get("name") or ""),
            status=str(item.get("status", "unknown")),
            lock=str(cfg["lock"]) if cfg.get("lock") else (
                str(item["lock"]) if item.get("lock") else None),
            hastate=ha.get(vmid), onboot=str(cfg.get("onboot", "0")) == "1",
            order=_order(cfg.get("startup")), gpus=gpus,
        ))
    return out


def startup_sorted(vms: list[NodeVm]) -> list[NodeVm]:
    """Proxmox's start order: by `order` ascending, unordered ones after, then by VMID."""
    return sorted(vms, key=lambda v: (v.order is None, v.order or 0, v.vmid))


def check_host_reboot(vms: list[NodeVm], target: int, stop_others: bool) -> list[NodeVm]:
    """The other VMs pvefix must stop before the reboot; RefusedError (before any write)
    when the reboot would stop a VM it may not stop."""
    locked = [v for v in vms if v.lock]
    others = [v for v in vms if v.vmid != target and v.status == "running"]
    listing = "\n  ".join(v.describe() for v in vms)
    if locked:
        raise RefusedError(
            "a host reboot would stop locked VMs: "
            + ", ".join(f"VM {v.vmid} (lock {v.lock})" for v in locked)
            + f"; nothing was written.\nVMs on the node:\n  {listing}",
        )
    if others and not stop_others:
        raise RefusedError(
            "a host reboot stops every VM on the node, and other VMs run: "
            + ", ".join(f"VM {v.vmid}" for v in others)
            + "; nothing was written. Shut them down first, or add --stop-others (clean"
            " shutdown of each, started again afterwards)."
            + f"\nVMs on the node:\n  {listing}",
        )
    ha = [v for v in others if v.hastate and v.hastate not in ("stopped", "ignored")]
    if ha:
        raise RefusedError(
            "HA-managed VMs run on the node: "
            + ", ".join(f"VM {v.vmid} (HA {v.hastate})" for v in ha)
            + "; pvefix does not stop them (the HA manager would act on it). Migrate them or"
            " set their HA state first; nothing was written.",
        )
    return others
