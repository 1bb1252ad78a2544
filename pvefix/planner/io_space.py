"""The firmware's I/O port space, which OVMF can run out of before the 64-bit window (pure).

A bridge that forwards I/O ports gets a window of 4 KiB (the PCI bridge's I/O granularity):
a root port whose device has an I/O BAR, and a pci-bridge with such a device behind it (every
virtio function there is transitional, with a legacy I/O BAR; emulated NICs and SCSI
controllers have one too). q35's I/O space for PCI is a few dozen KiB. When the windows do not
fit, OVMF's PCI bus driver does not stop: it drops the device that takes the most resources (a
GPU) and places the rest, so the GPU's BARs are never programmed.

Measured with fw-lab (../shared/fw-lab, firmware mode, TCG, `--topo proxmox` with pve-q35-4.0.cfg's
pci-bridges; stand-ins with an I/O BAR, `pci-testdev`), the counts are root ports with I/O +
pci-bridges with an I/O device: edk2 2025.02 placed every BAR at 9 (8+1, 7+2; 8+1 also with
pve-q35-4.0.cfg's USB controllers) and dropped one GPU at 10 (8+2 twice, 6+4); edk2 2022.11
dropped one at 10 (8+2); SeaBIOS 1.16.3 placed all at 10 (8+2). Without the I/O BARs (the same
8+2 with `disable-legacy=on`) edk2 2025.02 placed all 8: tests/planner/io_space_runs.json.

Counted: passed functions with an I/O BAR (sysfs), the virtio functions (mmio.virtio_functions),
emulated NICs and non-virtio SCSI controllers, on the buses qemu-server gives them. Not counted,
and why: IDE/SATA, USB and sound sit on the root bus or have no I/O BAR; devices an `args` line
adds are the closed world's (an `args` word pvefix does not model already leaves bar-space
"not established"). SeaBIOS is not warned about (1.16.3 placed all at 10).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pvefix.planner import mmio
from pvefix.planner.context import Context, Passed

IO_WINDOWS_PLACED = 9  # the most 4 KiB I/O windows OVMF placed in fw-lab's runs
IO_WINDOWS_DROPPED = 10  # the fewest at which OVMF dropped a GPU (edk2 2022.11 and 2025.02)
MEASURED_EDK2 = ("2022.11", "2025.02")


@dataclass(frozen=True)
class IoWindows:
    """The bridges that take an I/O window at the next start: root ports (by hostpci entry)
    and pci-bridges (by bus name)."""

    ports: tuple[str, ...]
    bridges: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.ports) + len(self.bridges)


def _has_io(p: Passed) -> bool:
    return any(b.is_io for d in p.devices for b in d.bars)


def io_windows(ctx: Context, q35: bool, port_holders: set[int]) -> IoWindows:
    """Which root ports and pci-bridges of the VM take an I/O window. `port_holders`: the N
    of the hostpciN entries on a root port of their own (bar_space._port_holders)."""
    ports, bridges = [], set()
    for p in ctx.passed:
        index = int(p.key.removeprefix("hostpci"))
        if not _has_io(p):
            continue
        if q35 and index in port_holders:
            ports.append(p.key)
        else:
            bridges.add("pci.0" if index < 4 else "pci.2")
    version = mmio.machine_version(ctx.machine.type)
    bridges |= {f.bus for f in mmio.virtio_functions(ctx.values, q35, version)
                if f.bus and f.bus.startswith("pci.")}
    for key, value in ctx.values.items():
        m = re.fullmatch(r"net(\d+)", key)
        if m and not mmio.virtio_nic(value):
            bridges.add("pci.0" if int(m.group(1)) < 6 else "pci.1")
    scsihw = ctx.values.get("scsihw", "lsi").strip() or "lsi"
    if not scsihw.startswith("virtio") and any(re.fullmatch(r"scsi\d+", k) for k in ctx.values):
        bridges.add("pci.0")  # lsi, megasas, pvscsi: scsihw0 at pci.0, an I/O BAR each
    if not q35:
        bridges.discard("pci.0")  # i440fx's pci.0 is the root bus, not a bridge
    return IoWindows(tuple(ports), tuple(sorted(bridges)))


def edk2_measured(version: str | None) -> bool:
    """Is the OVMF build one fw-lab measured the I/O windows on?"""
    return version is not None and any(v in version for v in MEASURED_EDK2)
