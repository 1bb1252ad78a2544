"""PCI facts from the sysfs part of a host tree (`sys/devices/pciDDDD:BB/...`).

Each device is a directory named by its address, at its physical path: the directories above it
are the root complex and the bridges (root ports, switch ports) it sits behind. Its facts are the
same small files the kernel exports (`vendor`, `device`, `class`, `resource`, ...), so a tree
copied from a real host with `cp -r` reads the same as a hand-made one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from pvefix import pci
from pvefix.errors import ParseError
from pvefix.hosttree import safe
from pvefix.pci import (
    BAR_COUNT,
    IORESOURCE_IO,
    IORESOURCE_MEM,
    IORESOURCE_MEM_64,
    IORESOURCE_PREFETCH,
    ROM_INDEX,
    bars_and_rom,
)

__all__ = ["BAR_COUNT", "IORESOURCE_IO", "IORESOURCE_MEM", "IORESOURCE_MEM_64",
           "IORESOURCE_PREFETCH", "ROM_INDEX", "Bar", "PciDevice", "parse_resource"]

DEVICE_DIR_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
ROOT_COMPLEX_RE = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
_HEX_RE = re.compile(r"^0x[0-9a-fA-F]+$")
_REQUIRED = ("vendor", "device", "class")


class Bar(BaseModel):
    """One memory or I/O region of a device (a BAR, or the ROM with index 6)."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=0, le=ROM_INDEX)
    start: int = Field(ge=0)
    size: int = Field(ge=1)
    flags: int = Field(ge=0)
    is_64bit: bool
    prefetchable: bool

    @property
    def is_io(self) -> bool:
        """An I/O-port BAR (not memory)."""
        return bool(self.flags & IORESOURCE_IO)


class PciDevice(BaseModel):
    """One PCI function as sysfs describes it.

    Ids are lowercase hex strings as sysfs prints them ("0x10de", class "0x030200").
    `numa_node` and `iommu_group` are None when the kernel has none (-1, or no file).
    `parent_path` runs from the root complex ("pci0000:40") down to the bridge directly above.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    address: str = Field(pattern=DEVICE_DIR_RE.pattern)
    vendor: str
    device: str
    class_: str = Field(alias="class")
    subsystem_vendor: str | None = None
    subsystem_device: str | None = None
    iommu_group: int | None = None
    numa_node: int | None = None
    driver: str | None = None
    bars: list[Bar] = Field(default_factory=list)
    rom: Bar | None = None
    parent_path: list[str] = Field(default_factory=list)

    @property
    def id_pair(self) -> str:
        """Vendor and device as a PCI mapping's `id=` wants them, e.g. "10de:2bb5"."""
        return f"{self.vendor[2:]}:{self.device[2:]}"

    @property
    def subsystem_pair(self) -> str | None:
        """Subsystem ids as a PCI mapping's `subsystem-id=` wants them, or None."""
        if self.subsystem_vendor is None or self.subsystem_device is None:
            return None
        return f"{self.subsystem_vendor[2:]}:{self.subsystem_device[2:]}"

    @property
    def slot(self) -> str:
        """The address without the function ("0000:01:00"), as `host=0000:01:00` names it."""
        return self.address[:-2]

    @property
    def function(self) -> int:
        """The function number (0-7)."""
        return int(self.address[-1])

    @property
    def is_bridge(self) -> bool:
        """A PCI-to-PCI bridge (root port or switch port): class 0x0604xx."""
        return self.class_.startswith("0x0604")

    @property
    def is_display(self) -> bool:
        """A display controller (VGA 0x0300, 3D 0x0302, ...)."""
        return self.class_.startswith("0x03")

    @property
    def sysfs_path(self) -> str:
        """Path below the tree root, e.g. sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0."""
        return "/".join(["sys", "devices", *self.parent_path, self.address])

    def bar(self, index: int) -> Bar | None:
        """The BAR with this index, or None when unused."""
        return next((b for b in self.bars if b.index == index), None)


def parse_resource(text: str, source: str = "resource") -> tuple[list[Bar], Bar | None]:
    """The used BARs 0-5 and the ROM (line 6) of a sysfs `resource` file (pvefix.pci parses
    it; later lines, SR-IOV BARs and bridge windows, are checked but not returned)."""
    bars, rom = bars_and_rom(pci.parse_resource(text, source))
    return [_bar(r) for r in bars], None if rom is None else _bar(rom)


def _bar(region: pci.Region) -> Bar:
    return Bar(index=region.index, start=region.start, size=region.size, flags=region.flags,
               is_64bit=region.is_64bit, prefetchable=region.prefetchable)


def _read(path: Path) -> str | None:
    # A plain file beside its siblings: no link elsewhere, no device or FIFO, bounded size.
    text = safe.read_text(path, path.parent, safe.SYSFS_CAP, errors="replace")
    return None if text is None else text.strip()


def _hex_id(path: Path, value: str | None) -> str | None:
    if value is None:
        return None
    if not _HEX_RE.match(value):
        raise ParseError(f"expected a hex id like 0x10de, got {value!r}", source=str(path))
    return value.lower()


def _int_file(path: Path) -> int | None:
    value = _read(path)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise ParseError(f"expected an integer, got {value!r}", source=str(path)) from None
    return None if number < 0 else number


def _link_or_file(path: Path) -> str | None:
    """A name kept as a real symlink (last component of its target) or as a plain file."""
    if path.is_symlink():
        return os.readlink(path).rstrip("/").rsplit("/", 1)[-1]
    return _read(path)


def _iommu_group(path: Path) -> int | None:
    value = _link_or_file(path)
    if value is None:
        return None
    if not value.isdigit():
        raise ParseError(f"expected an IOMMU group number, got {value!r}", source=str(path))
    return int(value)


def read_device(directory: Path, parent_path: list[str]) -> PciDevice | None:
    """Read one device directory; None for a path-only bridge directory with no id files."""
    present = [name for name in _REQUIRED if (directory / name).is_file()]
    if not present:
        return None
    for name in _REQUIRED:
        if name not in present:
            raise ParseError(f"device has no '{name}' file", source=str(directory / name))
    ids = {
        name: _hex_id(directory / name, _read(directory / name))
        for name in (*_REQUIRED, "subsystem_vendor", "subsystem_device")}
    resource_path = directory / "resource"
    resource = _read_raw(resource_path)
    bars, rom = parse_resource(resource, str(resource_path)) if resource else ([], None)
    return PciDevice(
        address=directory.name, vendor=ids["vendor"] or "", device=ids["device"] or "",
        class_=ids["class"] or "", subsystem_vendor=ids["subsystem_vendor"],
        subsystem_device=ids["subsystem_device"],
        iommu_group=_iommu_group(directory / "iommu_group"),
        numa_node=_int_file(directory / "numa_node"), driver=_link_or_file(directory / "driver"),
        bars=bars, rom=rom, parent_path=parent_path)


def _read_raw(path: Path) -> str | None:
    return safe.read_text(path, path.parent, safe.SYSFS_CAP, errors="replace")


def _subdirs(directory: Path) -> list[os.DirEntry[str]]:
    # Never follow symlinks: real sysfs links `subsystem`, `driver`, `iommu_group` upwards.
    with os.scandir(directory) as entries:
        return sorted(
            (e for e in entries if e.is_dir(follow_symlinks=False) and DEVICE_DIR_RE.match(e.name)),
            key=lambda e: e.name)


def scan_pci_devices(root: Path) -> list[PciDevice]:
    """Every PCI function under `root/sys/devices/pci*`, sorted by address."""
    devices_dir = root / "sys" / "devices"
    if not devices_dir.is_dir():
        return []
    found: list[PciDevice] = []
    with os.scandir(devices_dir) as entries:
        complexes = sorted(
            e.name
            for e in entries
            if e.is_dir(follow_symlinks=False) and ROOT_COMPLEX_RE.match(e.name))
    for complex_name in complexes:
        stack: list[tuple[Path, list[str]]] = [(devices_dir / complex_name, [complex_name])]
        while stack:
            directory, path = stack.pop()
            for entry in _subdirs(directory):
                child = Path(entry.path)
                device = read_device(child, path)
                if device is not None:
                    found.append(device)
                stack.append((child, [*path, entry.name]))
    seen: dict[str, PciDevice] = {}
    for device in found:
        if device.address in seen:
            raise ParseError(
                f"PCI address {device.address} appears twice "
                f"({seen[device.address].sysfs_path} and {device.sysfs_path})",
                source=str(devices_dir))
        seen[device.address] = device
    return sorted(found, key=lambda d: d.address)
