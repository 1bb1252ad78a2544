"""Writers for synthetic host trees: sysfs device directories and VM config files.

Used by the generated "large" and "cluster3" scenarios and by tests that need a tree of a
given shape. The files they write are exactly what the reader (sysfs.py, tree.py) accepts from
a real host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pvefix.pci import IORESOURCE_MEM, IORESOURCE_MEM_64, IORESOURCE_PREFETCH, Region

# Flags as a real kernel prints them (ioport.h: MEM, PREFETCH, MEM_64, SIZEALIGN = 0x40000, plus
# the low PCI_BASE_ADDRESS bits for 64-bit and prefetchable).
FLAGS_MEM32 = IORESOURCE_MEM | 0x40000
FLAGS_MEM64 = IORESOURCE_MEM | IORESOURCE_MEM_64 | 0x40000 | 0x4
FLAGS_MEM64_PREFETCH = FLAGS_MEM64 | IORESOURCE_PREFETCH | 0x8
FLAGS_BRIDGE_IO = 0x101
FLAGS_BRIDGE_MEM = 0x200
FLAGS_BRIDGE_MEM64_PREFETCH = 0x102201

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# What the generated scenarios' nodes run: versions, CPU, a ZFS root booted by systemd-boot.
VERSIONS = {"pve": "9.1.1", "kernel": "6.17.2-1-pve", "qemu": "10.1.2"}
EPYC = {"vendor": "AuthenticAMD", "model": "AMD EPYC 9355 32-Core Processor",
        "sockets": 2, "cores": 64, "threads": 128}
ZFS_ROOT = "root=ZFS=rpool/ROOT/pve-1 boot=zfs"
INITRD = "initrd=\\EFI\\proxmox\\6.17.2-1-pve\\initrd.img-6.17.2-1-pve"


def systemd_boot_status(uuid: str) -> str:
    """`proxmox-boot-tool status` on a host that boots its ESP `uuid` with systemd-boot."""
    return ("Re-executing '/usr/sbin/proxmox-boot-tool' in new private mount namespace..\n"
            "System currently booted with uefi\n"
            f"{uuid} is configured with: uefi (versions: 6.14.11-4-pve, 6.17.2-1-pve)\n")


@dataclass(frozen=True)
class Function:
    """One PCI function to write: where it sits and what its files say."""

    path: Sequence[str]  # ("pci0000:00", "0000:00:01.1", "0000:01:00.0")
    vendor: int
    device: int
    class_code: int
    subsystem_vendor: int | None = None
    subsystem_device: int | None = None
    numa_node: int = -1
    iommu_group: int | None = None
    driver: str | None = None
    regions: Sequence[Region] = field(default_factory=tuple)
    bridge: bool = False

    @property
    def address(self) -> str:
        """The function's PCI address (the last path component)."""
        return self.path[-1]


def resource_text(regions: Sequence[Region], lines: int) -> str:
    """A `resource` file: `lines` lines, the given regions in place, all others zeros."""
    by_index = {region.index: region for region in regions}
    out = []
    for index in range(lines):
        region = by_index.get(index)
        if region is None:
            out.append(f"0x{0:016x} 0x{0:016x} 0x{0:016x}")
        else:
            end = region.start + region.size - 1
            out.append(f"0x{region.start:016x} 0x{end:016x} 0x{region.flags:016x}")
    return "\n".join(out) + "\n"


def write_function(root: Path, function: Function) -> Path:
    """Write one function's directory and files under `root/sys/devices/`; returns the dir."""
    directory = root.joinpath("sys", "devices", *function.path)
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {
        "vendor": f"0x{function.vendor:04x}",
        "device": f"0x{function.device:04x}",
        "class": f"0x{function.class_code:06x}",
        "numa_node": str(function.numa_node),
        "resource": resource_text(function.regions, 17 if function.bridge else 13)}
    if function.subsystem_vendor is not None and function.subsystem_device is not None:
        files["subsystem_vendor"] = f"0x{function.subsystem_vendor:04x}"
        files["subsystem_device"] = f"0x{function.subsystem_device:04x}"
    if function.iommu_group is not None:
        files["iommu_group"] = str(function.iommu_group)
    if function.driver is not None:
        files["driver"] = function.driver
    for name, text in files.items():
        content = text if text.endswith("\n") else text + "\n"
        (directory / name).write_text(content, encoding="utf-8")
    return directory


def write_gpu(root: Path, bus: int, group: int, ids: tuple[int, int, int, int], *,
              bar1: int, numa: int, high: int, low: int, io: int = 0x1000) -> None:
    """One GPU (`ids`: vendor, device, subsystem vendor and device) at `bus`:00.0 behind its
    own root port on its own root complex, BAR0 at `low`, BAR1 (`bar1` bytes) and BAR3 at
    `high`, the port's windows around them."""
    complex_name, port = f"pci0000:{bus - 1:02x}", f"0000:{bus - 1:02x}:01.1"
    write_function(root, Function(
        path=(complex_name, port), vendor=0x1022, device=0x14AB, class_code=0x060400,
        numa_node=numa, iommu_group=group - 1, driver="pcieport", bridge=True,
        regions=(Region(13, io, 0x1000, FLAGS_BRIDGE_IO),
                 Region(14, low, 32 * MIB, FLAGS_BRIDGE_MEM),
                 Region(15, high, 2 * bar1, FLAGS_BRIDGE_MEM64_PREFETCH))))
    write_function(root, Function(
        path=(complex_name, port, f"0000:{bus:02x}:00.0"), vendor=ids[0], device=ids[1],
        class_code=0x030200, subsystem_vendor=ids[2], subsystem_device=ids[3],
        numa_node=numa, iommu_group=group, driver="vfio-pci",
        regions=(Region(0, low, 16 * MIB, FLAGS_MEM32),
                 Region(1, high, bar1, FLAGS_MEM64_PREFETCH),
                 Region(3, high + bar1, 32 * MIB, FLAGS_MEM64_PREFETCH))))


def write_text(path: Path, text: str) -> None:
    """Write `path` (UTF-8), making its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def render_vm_config(main: Mapping[str, str], description: str = "",
                     pending: Mapping[str, str] | None = None) -> str:
    """A VM config as Proxmox writes one: description lines, then keys in string order."""
    lines = [f"#{line}" for line in description.splitlines()]
    lines += [f"{key}: {main[key]}" for key in sorted(main)]
    if pending:
        lines += ["", "[PENDING]"]
        lines += [f"{key}: {pending[key]}" for key in sorted(pending)]
    return "\n".join(lines) + "\n"
