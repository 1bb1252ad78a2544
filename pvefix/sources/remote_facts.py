"""Turn what the API and remote commands answered into HostState parts.

Pure functions: answers in, facts out. The live reader (live.py) decides what to ask and when;
this module knows the shapes (Proxmox's JSON, `cat`, `readlink -m`, `grep -H`, `lspci -vv`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pvefix.errors import ParseError
from pvefix.hosttree.mapping import PciMapping, parse_map_entry
from pvefix.hosttree.sysfs import PciDevice, parse_resource
from pvefix.paths import SYSFS_PCI
from pvefix.sources.common import cpu_vendor, pve_version
from pvefix.state import NodeFacts
from pvefix.vmconfig.config import VMConfig
from pvefix.vmconfig.nextstart import NextStart, as_text

_ADDR_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


# -- files and commands -----------------------------------------------------------------------


def parent_path(physical: str) -> list[str]:
    """`/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0` -> [pci0000:40, 0000:40:01.1]."""
    parts = [p for p in physical.split("/") if p]
    if len(parts) < 3 or parts[:2] != ["sys", "devices"]:
        raise ParseError(f"not a sysfs device path: {physical!r}", source=SYSFS_PCI)
    return parts[2:-1]


def sysfs_device(address: str, files: Mapping[str, str], links: Mapping[str, str],
                 path: list[str]) -> PciDevice | None:
    """A PciDevice from its sysfs files (`files`: name -> text) and links (iommu_group,
    driver: canonical targets); None when the id files are missing."""
    where = f"{SYSFS_PCI}/{address}"

    def value(name: str) -> str | None:
        text = files.get(name)
        return None if text is None else text.strip().lower()

    if any(value(name) is None for name in ("vendor", "device", "class")):
        return None
    numa = value("numa_node")
    try:
        numa_node = int(numa) if numa is not None else None
    except ValueError:
        raise ParseError(f"numa_node: expected an integer, got {numa!r}", source=where) from None
    resource = files.get("resource")
    bars, rom = parse_resource(resource, f"{where}/resource") if resource else ([], None)
    group_link = links.get("iommu_group", "")
    group = group_link.rsplit("/", 1)[-1]
    driver_link = links.get("driver", "")
    return PciDevice(
        address=address, vendor=value("vendor") or "", device=value("device") or "",
        class_=value("class") or "", subsystem_vendor=value("subsystem_vendor"),
        subsystem_device=value("subsystem_device"),
        iommu_group=int(group) if "/iommu_groups/" in group_link and group.isdigit() else None,
        numa_node=None if numa_node is None or numa_node < 0 else numa_node,
        driver=driver_link.rsplit("/", 1)[-1] if "/drivers/" in driver_link else None, bars=bars,
        rom=rom, parent_path=path)


def api_device(item: Mapping[str, Any], path: list[str]) -> PciDevice | None:
    """A PciDevice from one GET /nodes/{node}/hardware/pci item (no BARs, no driver)."""
    address = str(item.get("id", ""))
    if not _ADDR_RE.match(address):
        return None
    group = item.get("iommugroup")
    sub_vendor, sub_device = item.get("subsystem_vendor"), item.get("subsystem_device")
    return PciDevice(
        address=address, vendor=str(item.get("vendor", "")).lower(),
        device=str(item.get("device", "")).lower(), class_=str(item.get("class", "")).lower(),
        subsystem_vendor=None if sub_vendor is None else str(sub_vendor).lower(),
        subsystem_device=None if sub_device is None else str(sub_device).lower(),
        iommu_group=int(group) if isinstance(group, int) and group >= 0 else None, parent_path=path)


# -- API answers ------------------------------------------------------------------------------


def node_facts(name: str, status: Mapping[str, Any], uname_r: str | None,
               running_qemu: str | None) -> NodeFacts:
    """NodeFacts from GET /nodes/{node}/status (and `uname -r` when SSH gave it)."""
    boot = status.get("boot-info") or {}
    mode = boot.get("mode")
    cpu = status.get("cpuinfo") or {}
    kernel = uname_r or (status.get("current-kernel") or {}).get("release")
    if kernel is None and isinstance(status.get("kversion"), str):
        words = status["kversion"].split()
        kernel = words[1] if len(words) > 1 else None
    memory = (status.get("memory") or {}).get("total")
    return NodeFacts(
        name=name, pve_version=pve_version(status.get("pveversion")), kernel_version=kernel,
        qemu_version=running_qemu, cpu_vendor=cpu_vendor(cpu.get("model")),
        cpu_model=cpu.get("model"),
        cpu_flags=frozenset(cpu["flags"].split()) if isinstance(cpu.get("flags"), str) else None,
        boot_mode=mode if mode in ("efi", "legacy-bios") else None,
        secureboot=bool(boot.get("secureboot")) if mode == "efi" else None,
        memory_bytes=int(memory) if isinstance(memory, int) else None)



def mappings_from_api(items: Iterable[Mapping[str, Any]]) -> list[PciMapping]:
    """GET /cluster/mapping/pci answers as PciMappings (line numbers unknown: 0)."""
    source = "GET /cluster/mapping/pci"
    out = []
    for item in items:
        maps = item.get("map") or []
        if isinstance(maps, str):
            maps = [maps]
        mdev, migrate = item.get("mdev"), item.get("live-migration-capable")
        out.append(
            PciMapping(
                id=str(item["id"]), description=item.get("description"),
                mdev=None if mdev is None else bool(int(mdev)),
                live_migration_capable=None if migrate is None else bool(int(migrate)),
                maps=[parse_map_entry(str(m), source, 0) for m in maps], line=0))
    return sorted(out, key=lambda m: m.id)


def rebuild_config(current: Mapping[str, Any],
                   pending_rows: Iterable[Mapping[str, Any]]) -> VMConfig:
    """The config file as Proxmox's writer would store these API values (no snapshots)."""
    main = {k: as_text(v) for k, v in current.items() if k not in ("digest", "description")}
    description = current.get("description")
    ns = NextStart.from_rows(pending_rows)
    # Proxmox applies a description at once (a fast-plug option); a pending one is not kept.
    pending = {k: v for k, v in ns.pending.items() if k != "description"}
    return VMConfig.from_dicts(
        main,
        description=None if description is None else as_text(description), pending=pending or None,
        pending_deletes=ns.delete_list() or None, source="rebuilt from the API")
