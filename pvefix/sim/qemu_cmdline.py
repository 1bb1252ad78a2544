"""The running QEMU's command line, as /proc/PID/cmdline shows it (PID from status/current).

Built from the VM's main config section (what a running VM runs: cold-start changes wait in
[PENDING]) the way qemu-server's config_to_command builds the parts pvefix proves things with:
- `-cpu`: the CPU model, with `kvm=off` when `cpu` has `hidden=1` or any hostpci entry has
  `x-vga=1` (CPUConfig.pm get_cpu_options);
- one `-device vfio-pci,host=...,id=...` per passed function: id `hostpciN` for one function,
  `hostpciN.J` when the entry passes several (several host ids, or `host=BB:DD` of a device with
  several functions; PCI.pm print_hostpci_devices); a mapping entry passes the device it got;
- `args` appended as shell words (PVE::Tools::split_args).
The rest is a plausible frame, not Proxmox's full command line. tests/sim/test_qemu_cmdline.py
checks the three parts above against Proxmox's own code (the oracle's `cmd`).
"""

from __future__ import annotations

import contextlib
import shlex
from typing import TYPE_CHECKING

from pvefix.errors import ValidationError
from pvefix.hosttree.sysfs import PciDevice
from pvefix.planner.mmio import read_cpu
from pvefix.vmconfig import HostPci, VMConfig
from pvefix.vmconfig.args import qemu_words
from pvefix.vmconfig.hostpci import HOSTPCI_KEY

if TYPE_CHECKING:
    from pvefix.rehearse.command import Cpu, Memory


def qemu_pid(vmid: int) -> int:
    """The PID the simulator gives a running VM (status/current `pid`)."""
    return 10000 + vmid % 50000


def vmid_of_pid(pid: int, vmids: list[int]) -> int | None:
    return next((v for v in vmids if qemu_pid(v) == pid), None)


def _entries(cfg: VMConfig) -> list[HostPci]:
    """The hostpci entries in PCI.pm's order (a start refuses what does not parse)."""
    out: list[HostPci] = []
    keys = [k for k in cfg.main.as_dict() if HOSTPCI_KEY.match(k)]
    for key in sorted(keys, key=lambda k: (len(k), k)):
        with contextlib.suppress(ValidationError):
            out.append(HostPci.parse(cfg.main.get(key) or "", key))
    return out


def kvm_hidden(cfg: VMConfig) -> bool:
    return read_cpu(cfg.main.get("cpu")).hidden or any(e.x_vga for e in _entries(cfg))


def cpu_arg(cfg: VMConfig) -> str:
    cpu = read_cpu(cfg.main.get("cpu"))
    parts = [cpu.cputype]
    if cpu.cputype not in ("host", "max"):
        parts.append("enforce")
    if kvm_hidden(cfg):
        parts.append("kvm=off")
    parts += ["+kvm_pv_eoi", "+kvm_pv_unhalt"]
    return ",".join(parts)


def _functions(address: str, devices: list[PciDevice]) -> list[str]:
    full = address if address.count(":") == 2 else f"0000:{address}"
    if "." in full.rsplit(":", 1)[-1]:
        return [full]
    found = sorted(d.address for d in devices if d.address.startswith(full + "."))
    return found or [f"{full}.0"]


def device_args(cfg: VMConfig, devices: list[PciDevice],
                chosen: dict[str, list[str]]) -> list[str]:
    """`-device` values for the hostpci entries; `chosen` maps a mapping entry's key to the
    addresses it got at start."""
    out: list[str] = []
    for entry in _entries(cfg):
        key = entry.key
        hosts = chosen.get(key) if entry.mapping else list(entry.hosts)
        functions = [f for h in hosts or [] for f in _functions(h, devices)]
        for j, address in enumerate(functions):
            ident = key if len(functions) == 1 else f"{key}.{j}"
            extra = ",x-vga=on" if entry.x_vga and j == 0 else ""
            out.append(f"vfio-pci,host={address},id={ident}{extra}")
    return out


def build(vmid: int, cfg: VMConfig, devices: list[PciDevice], chosen: dict[str, list[str]],
          machine: str | None) -> list[str]:
    """The argv of the VM's QEMU process."""
    main = cfg.main
    argv = ["/usr/bin/kvm", "-id", str(vmid), "-name", main.get("name") or f"vm{vmid}",
            "-pidfile", f"/var/run/qemu-server/{vmid}.pid", "-daemonize",
            "-cpu", cpu_arg(cfg), "-m", main.get("memory") or "512"]
    for value in device_args(cfg, devices, chosen):
        argv += ["-device", value]
    argv += ["-machine", f"type={machine}" if machine else "type=pc"]
    argv += qemu_words(main.get("args"))
    return argv


def proc_cmdline(argv: list[str]) -> str:
    """/proc/PID/cmdline: the words, each ended by a NUL."""
    return "".join(a + "\0" for a in argv)


def start_parts(cfg: VMConfig, qemu_version: str | None, host_bits: int | None,
                vendor: str | None) -> tuple[str, Cpu, Memory]:
    """The machine type, `-cpu` and memory a start of the main section builds, as
    pvefix/rehearse/command.py builds them for the rehearsal; what Proxmox refuses there
    (memory hotplug's DIMMs not adding up, a minimum memory) raises ProxmoxRefuses."""
    from pvefix.rehearse.command import cpu_of, machine_of, memory_of, model_vendors

    main = cfg.main.as_dict()
    machine = machine_of(main, qemu_version or "", vendor)
    cpu = cpu_of(main, None, model_vendors(), x_vga=any(e.x_vga for e in _entries(cfg)),
                 qemu=qemu_version or "", machine=machine)
    return machine, cpu, memory_of(main, cpu, host_bits)


def showcmd(vmid: int, cfg: VMConfig, devices: list[PciDevice],
            chosen: dict[str, list[str]], qemu_version: str | None = None,
            host_bits: int | None = None, vendor: str | None = None) -> str:
    """`qm showcmd VMID --pretty` of the main section: what a start would run, in the parts
    that decide BAR placement, as qemu-server builds them (pvefix/rehearse/command.py: the
    machine type with the node QEMU's `+pveN`, `-cpu` with its bits and guest-phys-bits, `-m`
    and memory hotplug's DIMMs, the OVMF code file), the vfio-pci devices, an i440fx VM's
    pci-bridges and the VM's virtio functions (planner/mmio.py function_args), and `args`, one
    option a line as Proxmox prints them. A config Proxmox refuses to start: its reason
    (PvefixError)."""
    from pvefix.planner.mmio import function_args
    from pvefix.rehearse.command import ovmf_files

    main = cfg.main.as_dict()
    machine, cpu, mem = start_parts(cfg, qemu_version, host_bits, vendor)
    argv = ["/usr/bin/kvm", "-id", str(vmid), "-name", main.get("name") or f"vm{vmid}",
            "-pidfile", f"/var/run/qemu-server/{vmid}.pid", "-daemonize", "-nodefaults",
            "-cpu", cpu.value, "-m", mem.m]
    if main.get("numa") not in (None, "", "0") or mem.dimms:
        argv += ["-object", f"memory-backend-ram,id=ram-node0,size={mem.static_mb}M",
                 "-numa", "node,nodeid=0,cpus=0,memdev=ram-node0"]
    for n, size in enumerate(mem.dimms):
        argv += ["-object", f"memory-backend-ram,id=mem-dimm{n},size={size}M",
                 "-device", f"pc-dimm,id=dimm{n},memdev=mem-dimm{n},node=0"]
    if main.get("bios") == "ovmf":
        code = ovmf_files(main, "q35" in machine)[0]
        argv += ["-drive", f"if=pflash,unit=0,format=raw,readonly=on,"
                 f"file=/usr/share/pve-edk2-firmware//{code}",
                 "-drive", f"if=pflash,unit=1,id=drive-efidisk0,format=raw,"
                 f"file=/dev/pve/vm-{vmid}-disk-0"]
    for value in device_args(cfg, devices, chosen):
        argv += ["-device", value]
    for value in function_args(main, machine):
        argv += ["-device", value]
    argv += ["-machine", f"type={machine}"]
    argv += qemu_words(main.get("args"))
    return _pretty(argv)


def _pretty(argv: list[str]) -> str:
    lines = [argv[0]]
    i = 1
    while i < len(argv):
        takes = argv[i] not in ("-daemonize", "-nodefaults")
        lines.append(" ".join(shlex.quote(a) for a in argv[i:i + (2 if takes else 1)]))
        i += 2 if takes else 1
    return " \\\n  ".join(lines) + "\n"
