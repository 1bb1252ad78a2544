"""The machine type qemu-server starts a VM with (Machine.pm get_vm_machine), from the config
and the node's QEMU version, and the +pveN config_to_command gives it (`running_machine`: the
one the features in use need): shared by the simulator (pvefix/sim/machines.py) and the
rehearsal's command (pvefix/rehearse/command.py).

- An unversioned machine (`pc`, `q35`, none) runs the QEMU binary's version with its highest
  `+pveN` revision (get_vm_machine, get_pve_version), except for Windows guests: those run the
  version they were created with (`meta: creation-qemu=` when >= 9.1), else 5.1, because a newer
  ACPI layout confuses Windows (windows_get_pinned_machine_version).
"""

from __future__ import annotations

import re

from pvefix.vmconfig.machine import Machine
from pvefix.vmconfig.schema import WINDOWS_OSTYPES

# The highest +pveN revision per QEMU machine version ($PVE_MACHINE_VERSION); others have +pve0.
PVE_MACHINE_HIGHEST = {"4.1": 2, "9.2": 1, "10.0": 1, "11.0": 2}
DEFAULT_QEMU = "10.1.2"
_MAJOR_MINOR = re.compile(r"^(\d+)\.(\d+)")


def major_minor(version: str) -> tuple[int, int]:
    m = _MAJOR_MINOR.match(version)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _short(version: str) -> str:
    major, minor = major_minor(version)
    return f"{major}.{minor}"


def latest_installed(qemu: str) -> str:
    """latest_installed_machine_version: `10.1`, or `9.2+pve1` where a revision exists."""
    short = _short(qemu)
    revision = PVE_MACHINE_HIGHEST.get(short, 0)
    return f"{short}+pve{revision}" if revision else short


def can_run(machine_version: str, qemu: str) -> bool:
    """can_run_pve_machine_version: the binary is new enough and knows the +pveN revision."""
    m = re.match(r"^(\d+)\.(\d+)(?:\+pve(\d+))?", machine_version)
    if not m:
        return False
    if major_minor(qemu) < (int(m.group(1)), int(m.group(2))):
        return False
    revision = int(m.group(3) or 0)
    return revision <= PVE_MACHINE_HIGHEST.get(f"{m.group(1)}.{m.group(2)}", 0)


def is_windows(ostype: str | None) -> bool:
    return (ostype or "") in WINDOWS_OSTYPES


def _creation_qemu(meta: str | None) -> str | None:
    for part in (meta or "").split(","):
        key, _, value = part.partition("=")
        if key.strip() == "creation-qemu":
            return value.strip()
    return None


def family_type(family: str, version: str) -> str:
    return f"pc-i440fx-{version}" if family == "i440fx" else f"pc-{family}-{version}"


def vm_machine(value: str | None, qemu: str | None, ostype: str | None = None,
               meta: str | None = None) -> str:
    """get_vm_machine: the machine type config_to_command works with (`q35+pve1`, or a
    pinned `pc-q35-5.1+pve0` for Windows)."""
    machine = Machine.parse(value)
    family = "q35" if machine.is_q35 else "i440fx"
    if machine.version:
        return f"pc-{family}-{machine.version}{machine.pve_revision or '+pve0'}"
    binary = qemu or DEFAULT_QEMU
    alias = "q35" if machine.is_q35 else "pc"
    if is_windows(ostype):
        base = "5.1"
        created = _creation_qemu(meta)
        if created and major_minor(created) >= (9, 1):
            base = _short(created)
        pin = base if can_run(base, binary) else latest_installed(binary)
        return family_type(family, pin) + ("" if "+pve" in pin else "+pve0")
    return f"{alias}+pve{PVE_MACHINE_HIGHEST.get(_short(binary), 0)}"


def windows_version(ostype: str | None) -> int:
    """Helpers.pm windows_version: 5 (XP/2003), 6 (Vista/2008), N for winN, else 0."""
    text = ostype or ""
    if text in ("wxp", "w2k", "w2k3"):
        return 5
    if text in ("w2k8", "wvista"):
        return 6
    m = re.fullmatch(r"win(\d+)", text)
    return int(m.group(1)) if m else 0


def running_machine(value: str | None, qemu: str | None, ostype: str | None = None,
                    meta: str | None = None, cpu_vendor: str | None = None) -> str:
    """What `running-machine` reports: QEMU's name for the machine it resolved, with the +pveN
    that config_to_command passed. That revision is the lowest one the features in use need
    ($version_guard: S3/S4 defaults from 9.2+pve1, hv_evmcs for Windows 11 on Intel from
    11.0+pve2), not the highest the version has."""
    binary = qemu or DEFAULT_QEMU
    machine_type = vm_machine(value, binary, ostype, meta)
    m = re.search(r"(\d+)\.(\d+)", machine_type)
    version = (int(m.group(1)), int(m.group(2))) if m else major_minor(binary)
    p = re.search(r"\+pve(\d+)", machine_type)
    have = (*version, int(p.group(1)) if p else 0)
    required = 0

    def guard(major: int, minor: int, pve: int) -> None:
        nonlocal required
        if have < (major, minor, pve):
            return
        if have >= (major, minor, PVE_MACHINE_HIGHEST.get(f"{major}.{minor}", 0) + 1):
            return
        required = max(required, pve)

    guard(9, 2, 1)
    if cpu_vendor == "GenuineIntel" and windows_version(ostype) >= 11:
        guard(11, 0, 2)
    family = "q35" if Machine.parse(value).is_q35 else "i440fx"
    return family_type(family, f"{version[0]}.{version[1]}+pve{required}")


def version_error(value: str | None, qemu: str | None, ostype: str | None, meta: str | None,
                  node: str) -> str | None:
    """config_to_command's refusal of a machine the installed QEMU cannot run (or None)."""
    binary = qemu or DEFAULT_QEMU
    machine_type = vm_machine(value, binary, ostype, meta)
    m = re.search(r"(\d+)\.(\d+)(\+pve\d+)?", machine_type)
    if not m:
        return None
    if not re.search(r"-\d", machine_type):  # an alias runs the binary's own version
        return None
    major, minor = int(m.group(1)), int(m.group(2))
    if major_minor(binary) < (major, minor):
        return (f"Installed QEMU version '{binary}' is too old to run machine type"
                f" '{machine_type}', please upgrade node '{node}'")
    if not can_run(f"{major}.{minor}{m.group(3) or ''}", binary):
        highest = PVE_MACHINE_HIGHEST.get(f"{major}.{minor}", 0)
        return (f"Installed qemu-server (max feature level for {major}.{minor} is pve{highest})"
                f" is too old to run machine type '{machine_type}', please upgrade node"
                f" '{node}'")
    return None
