"""NVIDIA GPUs as the kernel sees them under /sys/bus/pci/devices.

The sysfs root is a parameter so tests can point it at a tree built in a temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from pvefix import pci
from pvefix.probe.report import Bar, Gpu, Link

NVIDIA_VENDOR = 0x10DE
_DISPLAY_CLASS = 0x03  # PCI base class 0x03: display controller (VGA 0x0300, 3D 0x0302)


def parse_resource(text: str, *, source: str = "resource") -> tuple[Bar, ...]:
    """Every used region of a sysfs `resource` file (pvefix.pci parses it); index 6 is the
    expansion ROM."""
    return tuple(Bar(index=r.index, start=r.start, size=r.size, flags=r.flags,
                     prefetchable=r.prefetchable, is_64bit=r.is_64bit)
                 for r in pci.parse_resource(text, source))


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _int(text: str | None, base: int = 10) -> int | None:
    if text is None:
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def _link_name(path: Path) -> str | None:
    """Last part of a symlink's target ('nvidia' for driver -> ../../bus/pci/drivers/nvidia)."""
    try:
        return Path(os.readlink(path)).name if path.is_symlink() else None
    except OSError:
        return None


def read_link(dev: Path) -> Link | None:
    """Current and maximum link speed and width; None when the device exposes none."""
    link = Link(
        current_speed=_read(dev / "current_link_speed"),
        current_width=_int(_read(dev / "current_link_width")),
        max_speed=_read(dev / "max_link_speed"), max_width=_int(_read(dev / "max_link_width")))
    return None if link == Link() else link


def read_gpu(dev: Path) -> Gpu:
    """One PCI device folder as a Gpu (no nvidia-smi facts yet)."""
    resource = _read(dev / "resource")
    bars = parse_resource(resource, source=str(dev / "resource")) if resource else ()
    numa = _int(_read(dev / "numa_node"))
    group = dev / "iommu_group"
    driver = dev / "driver"
    return Gpu(
        pci_address=dev.name, device_id=_read(dev / "device"),
        numa_node=numa if numa is not None and numa >= 0 else None, bars=bars, link=read_link(dev),
        driver=_link_name(driver), iommu_group=_link_name(group))


def find_gpus(sysfs_root: Path = Path("/sys")) -> tuple[Gpu, ...]:
    """Every NVIDIA display-class device under `<root>/bus/pci/devices`, by PCI address."""
    devices = sysfs_root / "bus" / "pci" / "devices"
    if not devices.is_dir():
        return ()
    gpus: list[Gpu] = []
    for dev in sorted(devices.iterdir()):
        vendor = _int(_read(dev / "vendor"), 16)
        klass = _int(_read(dev / "class"), 16)
        if vendor != NVIDIA_VENDOR or klass is None or klass >> 16 != _DISPLAY_CLASS:
            continue
        gpus.append(read_gpu(dev))
    return tuple(gpus)
