"""Which QEMU machine a VM runs, and when Proxmox pins or refuses one (qemu-server Machine.pm).

- An unversioned machine (`pc`, `q35`, none) runs the QEMU binary's version with its highest
  `+pveN` revision (get_vm_machine, get_pve_version), except for Windows guests: those run the
  version they were created with (`meta: creation-qemu=` when >= 9.1), else 5.1, because a newer
  ACPI layout confuses Windows (windows_get_pinned_machine_version).
- Setting a Windows `ostype` (at creation, or by `qm set --ostype` without a machine) pins the
  machine to the installed version (check_and_pin_machine_string).
- A start is refused when the machine is newer than the QEMU binary, or asks for a `+pveN`
  revision this qemu-server does not know (config_to_command).
"""

from __future__ import annotations

from pvefix.vmconfig.machine import Machine
from pvefix.vmconfig.machine_version import (
    DEFAULT_QEMU,
    family_type,
    is_windows,
    latest_installed,
    running_machine,
    version_error,
)
from pvefix.vmconfig.propstring import PropertyString

# running_machine and version_error moved to vmconfig/machine_version.py (the rehearsal's
# command and the planner need them too); the simulator's modules keep importing them from here
__all__ = ["pinned_for_windows", "running_machine", "version_error"]


def pinned_for_windows(value: str | None, ostype: str | None, qemu: str | None) -> str | None:
    """check_and_pin_machine_string: the machine value to store when a Windows ostype is set
    on a VM whose machine is unversioned (None when nothing is pinned)."""
    if not is_windows(ostype):
        return None
    machine = Machine.parse(value)
    if machine.version or machine.family not in ("i440fx", "q35"):
        return None
    if machine.type not in ("pc", "q35"):
        return None
    pinned = family_type(machine.family, latest_installed(qemu or DEFAULT_QEMU))
    if not value:
        return pinned
    ps = PropertyString.parse(value.strip(), default_key="type")
    ps.set("type", pinned)
    return ps.render()
