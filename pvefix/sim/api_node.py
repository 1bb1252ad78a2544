"""Node and cluster endpoints: version, nodes, status, PCI hardware, mappings, tasks, injection."""

from __future__ import annotations

import json
import re
import time
from importlib import resources
from typing import TYPE_CHECKING

from pvefix.digest import sha1_text
from pvefix.errors import ParseError
from pvefix.hosttree.sysfs import PciDevice
from pvefix.paths import MAPPING_FILE
from pvefix.sim.errors import ApiError, Enveloped, die, param_error
from pvefix.sim.faults import parse_inject
from pvefix.sim.state import NodeState
from pvefix.sim.tasks import Task

if TYPE_CHECKING:
    from pvefix.sim.api import Call

DEFAULT_CLASS_BLACKLIST = "05;06;0b"
ROOTFS_BYTES = 100 << 30


def cpu_family(vendor: str, model: str) -> str:
    """/proc/cpuinfo's `cpu family`: 6 for Intel's server parts, 0x1A (26) for AMD Zen 5
    (EPYC 9xx5/4xx5), 0x19 (25) for the Zen 3/4 EPYCs the scenarios hold."""
    if vendor == "GenuineIntel":
        return "6"
    zen5 = re.search(r"EPYC [49]\d\d5", model) is not None
    return "26" if zen5 else "25"


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
            "cpu": 0.01, "mem": meta.memory_bytes // 8, "maxdisk": ROOTFS_BYTES,
            "disk": ROOTFS_BYTES // 10, "ssl_fingerprint": call.state.keys.fingerprint(),
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
                    "local": 1 if name == meta.node else 0, "ip": "127.0.0.1",
                    # a standalone node has no corosync node id: pmxcfs says 0
                    "nodeid": i if len(meta.cluster_nodes) > 1 else 0,
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
            "cores": meta.cpu.cores,  # ProcFSTools::read_cpuinfo: all sockets' cores
            "vendor": meta.cpu.vendor,
            "family": cpu_family(meta.cpu.vendor, meta.cpu.model),
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
        "rootfs": {"total": ROOTFS_BYTES, "used": ROOTFS_BYTES // 10,
                   "avail": ROOTFS_BYTES - ROOTFS_BYTES // 10,
                   "free": ROOTFS_BYTES - ROOTFS_BYTES // 10},
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
    # No vendor_name/device_name: Proxmox adds them from pci.ids, which a host tree does not
    # carry (pve-api's stand-in host has none either).
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


_SEE_MAPPING = ("Mapping.Modify", "Mapping.Use", "Mapping.Audit")


def mapping_pci(call: Call) -> object:
    """Each mapping with the file's digest (SHA-1 of mapping/pci.cfg, as every cfs file's) and
    `type: pci`, as pve-cluster's PCI mapping index lists them."""
    text = call.state.tree.read_text(MAPPING_FILE)
    mappings = call.state.tree.pci_mappings()
    if mappings is None or text is None:
        return []
    out: list[dict[str, object]] = []
    for mid, mapping in sorted(mappings.mappings.items()):
        if not call.state.access.allowed(call.ident.authuser, f"/mapping/pci/{mid}",
                                         _SEE_MAPPING, any_=True):
            continue
        entry: dict[str, object] = {"id": mid, "map": [m.raw for m in mapping.maps],
                                    "type": "pci", "digest": sha1_text(text)}
        if mapping.description:
            entry["description"] = mapping.description
        if mapping.mdev is not None:
            entry["mdev"] = 1 if mapping.mdev else 0
        if mapping.live_migration_capable is not None:
            entry["live-migration-capable"] = 1 if mapping.live_migration_capable else 0
        out.append(entry)
    return out


def task_list(call: Call) -> object:
    """Newest first; others' tasks only with Sys.Audit on /nodes/NODE; `total` (the count
    before `start`/`limit`) in the envelope, as the task index sets it."""
    check_node(call.state, call.parts["node"])
    node, who = call.parts["node"], call.ident.authuser
    auditor = call.state.access.allowed(who, f"/nodes/{node}", ["Sys.Audit"])
    now = time.monotonic()
    vmid = call.params.get("vmid")
    tasks = [t for t in call.state.tasks.all()
             if (auditor or _owns(who, t.user)) and (not vmid or t.id == vmid)]
    start = _int_param(call, "start", 0)
    limit = _int_param(call, "limit", 50)
    items = [t.list_item(now) for t in tasks[start:start + limit]]
    return Enveloped(items, {"total": len(tasks)})


def _owns(who: str, task_user: str) -> bool:
    """A token sees its own tasks; a user its own and its tokens' (Tasks.pm)."""
    return who == task_user or who == task_user.split("!")[0]


def _int_param(call: Call, name: str, default: int) -> int:
    raw = call.params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit():
        raise param_error({name: f"type check ('integer') failed - got '{raw}'"})
    return int(raw)


def _own_task(call: Call) -> Task:
    task = call.state.tasks.get(call.parts["upid"])
    if not _owns(call.ident.authuser, task.user):
        call.state.access.check(call.ident.authuser, f"/nodes/{call.parts['node']}",
                                ["Sys.Audit"])
    return task


def task_status(call: Call) -> object:
    return _own_task(call).status(time.monotonic())


def task_log(call: Call) -> object:
    task = _own_task(call)
    lines = task.log_lines(time.monotonic())
    start = _int_param(call, "start", 0)
    limit = _int_param(call, "limit", 50)
    return Enveloped([{"n": i + 1, "t": t} for i, t in enumerate(lines)][start:start + limit],
                     {"total": len(lines)})


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


def cpu_models(call: Call) -> object:
    """GET capabilities/qemu/cpu: qemu-server's CPU models for x86_64 (cpu_models.json, as
    Proxmox VE 9.2 lists them); custom models (virtual-guest/cpu-models.conf) are not read."""
    check_node(call.state, call.parts["node"])
    text = resources.files("pvefix.sim").joinpath("cpu_models.json").read_text(encoding="utf-8")
    models: list[dict[str, object]] = json.loads(text)["models"]
    return models
