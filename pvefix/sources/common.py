"""What every source shares: pending rows, the VM's devices, and the node facts' shapes.

Each source (bundle, live API + SSH, local) gets raw facts its own way, then builds the same
HostState through these helpers, so the planner sees the same values whatever the source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pvefix.errors import PvefixError
from pvefix.hosttree.mapping import PciMapping
from pvefix.hosttree.sysfs import PciDevice
from pvefix.state import PendingItem
from pvefix.vmconfig.config import VMConfig
from pvefix.vmconfig.hostpci import HostPci, normalize_address
from pvefix.vmconfig.nextstart import DIGEST_KEY, NextStart

_HOSTPCI_RE = re.compile(r"^hostpci\d+$")
_FULL_ADDR_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def _items(ns: NextStart) -> list[PendingItem]:
    """The rows GET .../pending answers: every key, its current value, its pending value and
    whether a pending delete is queued, sorted by key, the digest row included."""
    rows = list(ns.rows())
    if ns.digest is not None:
        rows.append((DIGEST_KEY, ns.digest, None, False))
    return [PendingItem(key=k, value=v, pending=p, delete=d) for k, v, p, d in sorted(rows)]


def pending_items(cfg: VMConfig, digest: str) -> list[PendingItem]:
    """The rows GET .../pending answers for this config file."""
    return _items(NextStart.from_config(cfg, digest))


def pending_from_api(rows: Iterable[dict[str, object]]) -> list[PendingItem]:
    """PendingItems from the API's own rows (values as a config file holds them)."""
    return _items(NextStart.from_rows(rows))


def hostpci_entries(cfg: VMConfig) -> list[HostPci]:
    """The hostpciN entries of the config, current ones then pending ones (unparsable skipped:
    the planner reports those from the raw text)."""
    found: list[HostPci] = []
    ns = NextStart.from_config(cfg)
    for values in (ns.current, ns.pending):
        for key, value in values.items():
            if not _HOSTPCI_RE.match(key):
                continue
            try:
                found.append(HostPci.parse(value, key))
            except PvefixError:
                continue
    return found


def vm_device_addresses(cfg: VMConfig, node: str, mappings: list[PciMapping],
                        known: Iterable[str]) -> list[str]:
    """Every PCI function the VM passes through on `node` (mapping paths and raw host= ids,
    current and pending), as full addresses. A whole slot (`01:00`) expands to the functions
    the host has; a slot the host lacks stays as function 0 so the reader can say it is absent.
    """
    known_list = sorted(set(known))
    by_id = {m.id: m for m in mappings}
    wanted: set[str] = set()
    for entry in hostpci_entries(cfg):
        paths: list[str] = list(entry.hosts)
        if entry.mapping:
            mapping = by_id.get(entry.mapping)
            if mapping is not None:
                for item in mapping.for_node(node):
                    paths.extend(item.paths)
        for raw in paths:
            addr = normalize_address(raw)
            if addr is None:
                continue
            if _FULL_ADDR_RE.match(addr):
                wanted.add(addr)
                continue
            functions = [a for a in known_list if a.startswith(addr + ".")]
            wanted.update(functions or [addr + ".0"])
    return sorted(wanted)


def bridges_above(devices: Iterable[PciDevice]) -> list[str]:
    """The addresses of the bridges (root ports, switch ports) on the devices' paths."""
    found = {part for dev in devices for part in dev.parent_path if _FULL_ADDR_RE.match(part)}
    return sorted(found)


def pve_version(pveversion: str | None) -> str | None:
    """`pve-manager/9.1.1/5e6a2d8c` -> `9.1.1`."""
    if not pveversion:
        return None
    parts = pveversion.split("/")
    return parts[1] if len(parts) >= 2 and parts[0] == "pve-manager" else pveversion


def cpu_vendor(model: str | None) -> str | None:
    """The CPU vendor id from the model name the API gives (the API has no vendor_id)."""
    if not model:
        return None
    lowered = model.lower()
    if "amd" in lowered or "epyc" in lowered or "ryzen" in lowered:
        return "AuthenticAMD"
    if "intel" in lowered or "xeon" in lowered:
        return "GenuineIntel"
    return None
