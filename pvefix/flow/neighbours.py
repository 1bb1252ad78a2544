"""Every VM on a node, read from the API for the activation's refusals, before anything is
written (pvefix.executor.neighbours judges them; the executor reads no target itself): run
state, lock, HA state, onboot, startup order, the GPUs each holds and the PCI functions those
name on the node."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from pvefix.errors import PvefixError
from pvefix.executor.neighbours import NodeVm, startup_order
from pvefix.facts.api import MAPPINGS, NODE_VMS, VM_CONFIG
from pvefix.hosttree.mapping import PciMapping
from pvefix.sources.common import vm_device_addresses
from pvefix.sources.remote_facts import mappings_from_api
from pvefix.target.nodes import RESOURCES, RESOURCES_PARAMS, listed_vms
from pvefix.vmconfig.config import VMConfig
from pvefix.vmconfig.hostpci import HOSTPCI_KEY

Get = Callable[[str, Mapping[str, str] | None], Any]


def node_vms(get: Get, node: str) -> list[NodeVm]:
    """The VMs of `node`, from the API (list, HA state, each config); `get`: an API GET."""
    items = get(*NODE_VMS.at(node)) or []
    ha: dict[int, str] = {}
    with contextlib.suppress(PvefixError):  # no right to the listing: HA states unknown
        listed = listed_vms(get(RESOURCES, RESOURCES_PARAMS))
        ha = {vmid: vm.hastate for vmid, vm in listed.items() if vm.hastate}
    try:
        mappings = mappings_from_api(get(*MAPPINGS.at()) or [])
    except PvefixError:
        mappings = []
    out: list[NodeVm] = []
    for item in sorted(items, key=lambda i: int(i.get("vmid", 0))):
        vmid = int(item["vmid"])
        cfg = get(*VM_CONFIG.at(node, vmid)) or {}
        gpus = [f"{k}: {v}" for k, v in sorted(cfg.items()) if HOSTPCI_KEY.match(str(k))]
        out.append(NodeVm(
            vmid=vmid, name=str(cfg.get("name") or item.get("name") or ""),
            status=str(item.get("status", "unknown")),
            lock=str(cfg["lock"]) if cfg.get("lock") else (
                str(item["lock"]) if item.get("lock") else None),
            hastate=ha.get(vmid), onboot=str(cfg.get("onboot", "0")) == "1",
            order=startup_order(cfg.get("startup")), gpus=gpus,
            devices=_devices(cfg, node, mappings),
        ))
    return out


def _devices(cfg: dict[str, Any], node: str, mappings: list[PciMapping]) -> tuple[str, ...]:
    values = {str(k): str(v) for k, v in cfg.items() if HOSTPCI_KEY.match(str(k))}
    return tuple(vm_device_addresses(VMConfig.from_dicts(values), node, mappings, []))
