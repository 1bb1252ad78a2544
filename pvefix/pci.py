"""PCI resource regions as the kernel exports them: one parser for host trees, live reads and
the probe in a guest.

A device's sysfs `resource` file has one line per region, `0x<start> 0x<end> 0x<flags>`
(drivers/pci/pci-sysfs.c resource_show, printed with `0x%016llx`): lines 0-5 are the BARs,
line 6 the expansion ROM, then SR-IOV BARs and bridge windows. A region whose start and end are
0 is unused. Flags are the kernel's IORESOURCE_* bits (include/linux/ioport.h).

Standard library only: the probe's zipapp ships this module to guests that have only python3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pvefix.errors import ParseError

IORESOURCE_IO = 0x100
IORESOURCE_MEM = 0x200
IORESOURCE_PREFETCH = 0x2000
IORESOURCE_MEM_64 = 0x100000

BAR_COUNT = 6  # lines 0-5 of `resource` are the BARs
ROM_INDEX = 6  # line 6 is the expansion ROM

_LINE = re.compile(r"^0x([0-9a-fA-F]{1,16})\s+0x([0-9a-fA-F]{1,16})\s+0x([0-9a-fA-F]{1,16})$")


@dataclass(frozen=True)
class Region:
    """One used region of a device: its line number from 0 (`index`), start, size, flags."""

    index: int
    start: int
    size: int
    flags: int

    @property
    def prefetchable(self) -> bool:
        return bool(self.flags & IORESOURCE_PREFETCH)

    @property
    def is_64bit(self) -> bool:
        return bool(self.flags & IORESOURCE_MEM_64)

    @property
    def is_io(self) -> bool:
        """An I/O-port region (not memory)."""
        return bool(self.flags & IORESOURCE_IO)


def parse_resource(text: str, source: str = "resource") -> list[Region]:
    """Every used region of a sysfs `resource` file, in line order.

    A line that is not three hex numbers, or a region that ends before it starts, is a
    ParseError naming `source` and the line. Blank lines are skipped (the line numbers, and
    so the indexes, still count them).
    """
    regions: list[Region] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        match = _LINE.match(line)
        if match is None:
            raise ParseError(f"resource line {number}: expected '0x<start> 0x<end> 0x<flags>', "
                             f"got {raw!r}", source=source, line=number)
        start, end, flags = (int(group, 16) for group in match.groups())
        if start == 0 and end == 0:
            continue
        if end < start:
            raise ParseError(f"resource line {number}: end 0x{end:x} is below start "
                             f"0x{start:x}", source=source, line=number)
        regions.append(Region(number - 1, start, end - start + 1, flags))
    return regions


def bars_and_rom(regions: list[Region]) -> tuple[list[Region], Region | None]:
    """The BARs (0-5) and the expansion ROM (6) of `regions`; later regions are left out."""
    bars = [r for r in regions if r.index < BAR_COUNT]
    rom = next((r for r in regions if r.index == ROM_INDEX), None)
    return bars, rom
