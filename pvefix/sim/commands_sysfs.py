"""`readlink`, `grep` and `lspci` for the simulated host: how pvefix reads sysfs over SSH.

A host tree keeps sysfs as plain directories at the physical path; a real host also has the
`/sys/bus/pci/devices/ADDR` links, and `iommu_group` and `driver` are links there. These
commands answer as the real host would: `readlink -m /sys/bus/pci/devices/0000:41:00.0` prints
the physical path, `readlink -m .../iommu_group` prints `/sys/kernel/iommu_groups/N`.
"""

from __future__ import annotations

import os
import posixpath
import re

from pvefix.hosttree.sysfs import PciDevice
from pvefix.sim.commands import Command, Result, Shell, ShellError

# lspci's vendor names (from pci.ids) for the vendors the scenarios hold
VENDOR_NAMES = {
    "0x10de": "NVIDIA Corporation",
    "0x1002": "Advanced Micro Devices, Inc. [AMD/ATI]",
    "0x1022": "Advanced Micro Devices, Inc. [AMD]",
    "0x8086": "Intel Corporation",
    "0x15b3": "Mellanox Technologies",
    "0x144d": "Samsung Electronics Co Ltd",
}

BUS_DIR = "/sys/bus/pci/devices/"
_CLASS_NAMES = {
    "0x0604": "PCI bridge",
    "0x0300": "VGA compatible controller",
    "0x0302": "3D controller",
    "0x0403": "Audio device",
    "0x0200": "Ethernet controller",
    "0x0207": "Infiniband controller",
    "0x0108": "Non-Volatile memory controller",
    "0x0600": "Host bridge",
}


def _devices(sh: Shell) -> dict[str, PciDevice]:
    return {d.address: d for d in sh.state.tree.pci_devices()}


def physical(sh: Shell, host_path: str, devices: dict[str, PciDevice] | None = None) -> str:
    """The canonical host path: `/sys/bus/pci/devices/ADDR/...` -> `/sys/devices/.../ADDR/...`,
    and the `iommu_group` / `driver` files of a device read as the links they are on a host."""
    path = posixpath.normpath(posixpath.join(sh.cwd, host_path))
    if path.startswith(BUS_DIR):
        address, _, rest = path[len(BUS_DIR) :].partition("/")
        device = (_devices(sh) if devices is None else devices).get(address)
        if device is not None:
            path = "/" + device.sysfs_path + ("/" + rest if rest else "")
    name = posixpath.basename(path)
    if name in ("iommu_group", "driver") and path.startswith("/sys/devices/"):
        try:
            target = sh.tree_path(path)
        except ShellError:
            return path
        if target.is_symlink():
            value = os.readlink(target).rstrip("/").rsplit("/", 1)[-1]
        elif target.is_file():
            value = target.read_text(encoding="utf-8").strip()
        else:
            return path
        if name == "iommu_group":
            return f"/sys/kernel/iommu_groups/{value}"
        return f"/sys/bus/pci/drivers/{value}"
    return path


def _readlink(sh: Shell, argv: list[str]) -> Result:
    options = [a for a in argv[1:] if a.startswith("-")]
    names = [a for a in argv[1:] if not a.startswith("-")]
    mode = next((o for o in ("-m", "-f", "-e") if o in options), None)
    if mode is None:
        raise ShellError("readlink: only -m, -f and -e are simulated")
    out, code = "", 0
    devices = _devices(sh)  # one sysfs scan per command, not per path
    for name in names:
        resolved = physical(sh, name, devices)
        exists = sh.tree_path(resolved).exists() or resolved.startswith(
            ("/sys/kernel/iommu_groups/", "/sys/bus/pci/drivers/")
        )
        parent_ok = sh.tree_path(posixpath.dirname(resolved)).exists()
        if mode == "-m" or (mode == "-e" and exists) or (mode == "-f" and parent_ok):
            out += resolved + "\n"
        else:
            code = 1
    return Result(out, "", code)


def _grep(sh: Shell, argv: list[str]) -> Result:
    args = argv[1:]
    flags = set()
    given: str | None = None
    limit: int | None = None
    while args and args[0].startswith("-") and args[0] != "-":
        flag = args.pop(0)
        if flag == "-e" and args:
            given = args.pop(0)
        elif re.fullmatch(r"-m\d+", flag):
            limit = int(flag[2:])
        else:
            flags.add(flag)
    if given is None:
        if not args:
            raise ShellError("Usage: grep [OPTION]... PATTERNS [FILE]...", code=2)
        given = args.pop(0)
    pattern, files = re.compile(given), args
    with_name = "-H" in flags or (len(files) > 1 and "-h" not in flags)
    out, err, matched, failed = "", "", False, False
    devices = _devices(sh) if any(f.startswith(BUS_DIR) for f in files) else {}
    for name in files:
        try:
            if sh.host(name) == "/proc/cpuinfo" and sh.state.read_host(name) is None:
                from pvefix.sim.commands import cpuinfo

                text = cpuinfo(sh.state.tree.meta)
            else:
                text = sh.read("grep", physical(sh, name, devices))
        except ShellError:
            err += f"grep: {name}: No such file or directory\n"
            failed = True
            continue
        found = 0
        for line in text.splitlines():
            if limit is not None and found >= limit:
                break
            if pattern.search(line):
                matched = True
                found += 1
                out += f"{name}:{line}\n" if with_name else line + "\n"
    if "-s" in flags:
        err = ""
    return Result(out, err, 2 if failed else (0 if matched else 1))


def _lspci(sh: Shell, argv: list[str]) -> Result:
    domains = "-D" in argv
    verbose = any(a.startswith("-vv") for a in argv)
    selector = argv[argv.index("-s") + 1] if "-s" in argv and argv.index("-s") + 1 < len(
        argv
    ) else None
    acs = sh.state.tree.meta.acs
    out = ""
    for device in _devices(sh).values():
        if selector and not device.address.endswith(selector):
            continue
        name = device.address if domains else device.address[5:]
        kind = _CLASS_NAMES.get(device.class_[:6], f"Class {device.class_[2:6]}")
        vendor = VENDOR_NAMES.get(device.vendor, f"Vendor {device.vendor[2:]}")
        out += f"{name} {kind}: {vendor} Device {device.device[2:]}\n"
        if not verbose:
            continue
        if device.address in acs:
            out += "\tCapabilities: [2a0 v1] Access Control Services\n"
            out += f"\t\tACSCap:\t{acs[device.address]}\n"
            out += f"\t\tACSCtl:\t{acs[device.address]}\n"
        if device.driver:
            out += f"\tKernel driver in use: {device.driver}\n"
        out += "\n"
    return Result(out)


SYSFS_COMMANDS: dict[str, Command] = {"readlink": _readlink, "grep": _grep, "lspci": _lspci}
