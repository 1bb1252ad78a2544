"""Node and cluster endpoints: version, nodes, status, PCI hardware, mappings, tasks, injection."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pvefix.errors import ParseError
from pvefix.hosttree.sysfs import PciDevice
from pvefix.sim.errors import ApiError, die, param_error
from pvefix.sim.faults import parse_inject
from pvefix.sim.state import NodeState

if TYPE_CHECKING:
    from pvefix.sim.api import Call

DEFAULT_CLASS_BLACKLIST = "05;06;0b"
VENDOR_NAMES = {
    "0x10de": "NVIDIA Corporation",
    "0x1002": "Advanced Micro Devices, Inc. [AMD/ATI]",
    "0x1022": "Advanced Micro Devices, Inc. [AMD]",
    "0x8086": "Intel Corporation",
    "0x15b3": "Mellanox Technologies",
    "0x144d": "Samsung Electronics Co Ltd",
}


def check_node(state: NodeState, node: str) -> None:
    """Unknown node names fail as pveproxy's lookup does."""
    if node not in state.tree.meta.cluster_nodes:
        raise die(
            f"hostname lookup '{node}' failed - failed to get address info for: {node}:"
            " Name or service not known"
        )


def version(call: Call) -> object:
    pve = call.state.tree.meta.versions.pve
    return {"version": pve, "release": ".".join(pve.split(".")[:2]), "repoid": "5e6a2d8c"}


def nodes(call: Call) -> object:
    meta = call.state.tree.meta
    return [
        {
            "node": name, "status": "online", "type": "node", "id": f"node/{name}",
            "level": "", "maxcpu": meta.cpu.threads, "maxmem": meta.memory_bytes,
            "cpu": 0.01, "mem": meta.memory_bytes // 8,
            "uptime": int(time.monotonic() - call.state.started) + 3600,
        }
        for name in meta.cluster_nodes
    ]


def cluster_status(call: Call) -> object:
    meta = call.state.tree.meta
    out: list[dict[str, object]] = []
    if len(meta.cluster_nodes) > 1:
        out.append({"type": "cluster", "id": "cluster", "name": meta.cluster_name or "pvefix-sim",
                    "nodes": len(meta.cluster_nodes), "quorate": 1, "version": 1})
    for i, name in enumerate(meta.cluster_nodes, start=1):
        out.append({"type": "node", "id": f"node/{name}", "name": name, "online": 1,
                    "local": 1 if name == meta.node else 0, "nodeid": i, "ip": "127.0.0.1",
                    "level": ""})
    return out


def node_status(call: Call) -> object:
    state = call.state
    check_node(state, call.parts["node"])
    meta = state.tree.meta
    kernel = meta.versions.kernel
    build = "#1 SMP PREEMPT_DYNAMIC PMX " + kernel.removesuffix("-pve")
    boot: dict[str, object] = {"mode": meta.boot.mode}
    if meta.boot.mode == "efi":
        boot["secureboot"] = 1 if meta.boot.secureboot else 0
    total = meta.memory_bytes
    return {
        "uptime": int(time.monotonic() - state.started) + 3600,
        "idle": 0,
        "loadavg": ["0.12", "0.10", "0.09"],
        "kversion": f"Linux {kernel} {build}",
        "current-kernel": {
            "sysname": "Linux", "release": kernel, "version": build, "machine": "x86_64",
        },
        "boot-info": boot,
        "cpuinfo": {
            "model": meta.cpu.model,
            "sockets": meta.cpu.sockets,
            "cores": max(1, meta.cpu.cores // meta.cpu.sockets),
            "cpus": meta.cpu.threads,
            "mhz": "3300.000",
            "hvm": "1",
            "user_hz": 100,
            **({"flags": " ".join(meta.cpu.flags)} if meta.cpu.flags is not None else {}),
        },
        "cpu": 0.01,
        "wait": 0,
        "memory": {"total": total, "used": total // 8, "free": total - total // 8,
                   "available": total - total // 8},
        "swap": {"total": 0, "used": 0, "free": 0},
        "ksm": {"shared": 0},
        "rootfs": {"total": 100 << 30, "used": 10 << 30, "avail": 90 << 30,
                   "free": 90 << 30},
        "pveversion": f"pve-manager/{meta.versions.pve}/5e6a2d8c0b1f4a7e",
    }


def _pci_item(dev: PciDevice) -> dict[str, object]:
    item: dict[str, object] = {
        "id": dev.address,
        "class": dev.class_,
        "vendor": dev.vendor,
        "device": dev.device,
        "iommugroup": dev.iommu_group if dev.iommu_group is not None else -1,
    }
    if dev.subsystem_vendor is not None:
        item["subsystem_vendor"] = dev.subsystem_vendor
    if dev.subsystem_device is not None:
        item["subsystem_device"] = dev.subsystem_device
    name = VENDOR_NAMES.get(dev.vendor)
    if name:
        item["vendor_name"] = name
    return item


def hardware_pci(call: Call) -> object:
    state = call.state
    check_node(state, call.parts["node"])
    if call.parts["node"] != state.node:
        return []  # the tree holds only the local node's sysfs
    blacklist = call.params.get("pci-class-blacklist", DEFAULT_CLASS_BLACKLIST)
    prefixes = tuple("0x" + c.lower() for c in blacklist.replace(",", ";").split(";") if c)
    return [
        _pci_item(dev) for dev in state.tree.pci_devices()
        if not (prefixes and dev.class_.lower().startswith(prefixes))
    ]


def mapping_pci(call: Call) -> object:
    mappings = call.state.tree.pci_mappings()
    if mappings is None:
        return []
    out: list[dict[str, object]] = []
    for mid, mapping in sorted(mappings.mappings.items()):
        entry: dict[str, object] = {"id": mid, "map": [m.raw for m in mapping.maps]}
        if mapping.description:
            entry["description"] = mapping.description
        if mapping.mdev is not None:
            entry["mdev"] = 1 if mapping.mdev else 0
        if mapping.live_migration_capable is not None:
            entry["live-migration-capable"] = 1 if mapping.live_migration_capable else 0
        out.append(entry)
    return out


def task_list(call: Call) -> object:
    check_node(call.state, call.parts["node"])
    now = time.monotonic()
    return [t.status(now) for t in call.state.tasks.all()]


def task_status(call: Call) -> object:
    return call.state.tasks.get(call.parts["upid"]).status(time.monotonic())


def task_log(call: Call) -> object:
    task = call.state.tasks.get(call.parts["upid"])
    lines = task.log_lines(time.monotonic())
    start = int(call.params.get("start", "0") or 0)
    limit = int(call.params.get("limit", "50") or 50)
    return [{"n": i + 1, "t": t} for i, t in enumerate(lines)][start:start + limit]


# -- the simulator's private injection endpoint -------------------------------------------------


def _require_root_ticket(call: Call) -> None:
    if not call.ident.is_root_pam:
        raise ApiError(403, "Permission check failed (/, Sys.Modify)")


def inject_get(call: Call) -> object:
    _require_root_ticket(call)
    return call.state.faults.settings.model_dump(mode="json")


def inject_set(call: Call) -> object:
    """Arm faults: `spec=latency=50` (repeatable as `spec=a;b`) or the settings' field names."""
    _require_root_ticket(call)
    params = dict(call.params)
    changes: dict[str, object] = {}
    try:
        if "spec" in params:
            changes.update(parse_inject([s for s in params.pop("spec").split(";") if s]))
        for key, value in params.items():
            changes.update(parse_inject([f"{key}={value}"]))
    except ParseError as exc:
        raise param_error({"spec": exc.message}) from None
    settings = call.state.faults.update(**changes)
    call.state.apply_injected_locks()
    return settings.model_dump(mode="json")


def inject_clear(call: Call) -> object:
    _require_root_ticket(call)
    call.state.faults.clear()
    return None
