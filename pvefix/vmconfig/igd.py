"""Legacy IGD passthrough (`hostpciN: ...,legacy-igd=1`): the starts Proxmox refuses.

qemu-server PCI.pm parse_hostpci_devices checks each legacy-igd entry, in this order, after the
entry's own parse: only one such entry; `vga: none` (the raw value, compared as written); the
ROM BAR on; no x-vga; no mediated device; not q35; one function only; one alternative only (no
mapping of several devices); and the first id ending in `02.0`. Shared by the simulator's start
checks and the planner's vm-state findings.
"""

from __future__ import annotations

from dataclasses import dataclass

from pvefix.vmconfig.hostpci import HostPci


@dataclass(frozen=True)
class IgdEntry:
    """One legacy-igd entry as parse_hostpci resolved it on the node."""

    entry: HostPci
    functions: int  # the most functions of any alternative (multifunction when > 1)
    alternatives: int  # 1 for raw host=, one per map entry of the node for a mapping
    first_id: str  # the first function of the first alternative, e.g. 0000:00:02.0


def legacy_igd_error(igd: IgdEntry, vga: str | None, q35: bool, earlier: bool) -> str | None:
    """Proxmox's refusal of this legacy-igd entry (None: none); `earlier`: an entry before it
    already uses legacy-igd."""
    dev = igd.entry
    checks = (
        (earlier, "only one device can be assigned in legacy-igd mode"),
        (vga != "none", "legacy IGD assignment requires VGA mode to be 'none'"),
        (not dev.rombar, "legacy IGD assignment requires rombar to be enabled"),
        (dev.x_vga, "legacy IGD assignment is not compatible with x-vga"),
        (dev.mdev is not None, "legacy IGD assignment is not compatible with mdev"),
        (q35, "legacy IGD assignment is not compatible with q35"),
        (igd.functions > 1,
         "legacy IGD assignment is not compatible with multifunction devices"),
        (igd.alternatives > 1, "legacy IGD assignment is not compatible with alternate devices"),
        (not igd.first_id.endswith("02.0"),
         "legacy IGD assignment only works for devices on host bus 00:02.0"),
    )
    return next((message for failed, message in checks if failed), None)
