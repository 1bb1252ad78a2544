"""The placement-deciding parts of the QEMU command Proxmox starts a VM with, built from the
config its next cold start runs (pure; pvefix/vmconfig/nextstart.py gives that config).

No `qm showcmd`: that activates every volume of a stopped VM and leaves them active. Each part
is built the way qemu-server's config_to_command builds it (learned from its source; the
conformance test tests/conformance/test_rehearse_command.py holds every part against
Proxmox's own code, the oracle's `cmd`):

- the machine type: `pc`/`q35` get the node QEMU's `+pveN` revision (Machine.pm's table), a
  Windows guest without a pinned version the version it is pinned to, a pinned version
  without revision `+pve0`;
- `-cpu`: the reported model, the built-in model's flags, a custom model's (cpu-models.conf)
  flags, the VM's flags, `enforce` (not `host`), `kvm=off`, the model's vendor, `level`,
  `guest-phys-bits` and `phys-bits` (a custom model's, overridden by the VM's);
- `-m`: the RAM, or with memory hotplug (`hotplug` has `memory`, `numa: 1`) `size=1024,
  slots=255,maxmem=M` plus the pc-dimm devices that make up the rest (M: 2^(bits-1) bytes,
  bits rounded down to even, at most 4 TiB);
- the OVMF code file (`efidisk0`'s efitype, pre-enrolled keys, q35's SMM);
- `args`: the words that move the 64-bit window or the vCPU (below).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from pvefix.errors import PvefixError
from pvefix.planner.mmio import ram_bytes, read_cpu
from pvefix.vmconfig import PropertyString
from pvefix.vmconfig.args import qemu_words
from pvefix.vmconfig.cpu_models import CpuModel
from pvefix.vmconfig.machine_version import (
    major_minor,
    running_machine,
    vm_machine,
    windows_version,
)

# CPUConfig.pm: the flags each built-in model adds to its reported QEMU model
_V2 = ("+pni", "+popcnt", "+sse4.1", "+sse4.2", "+ssse3")
_V3 = (*_V2, "+aes", "+avx", "+avx2", "+bmi1", "+bmi2", "+f16c", "+fma", "+abm", "+movbe",
       "+xsave")
MODEL_FLAGS: dict[str, tuple[str, ...]] = {
    "x86-64-v2": _V2,
    "x86-64-v2-AES": (*_V2, "+aes"),
    "x86-64-v3": _V3,
    "x86-64-v4": (*_V3, "+avx512f", "+avx512bw", "+avx512cd", "+avx512dq", "+avx512vl"),
}
STATIC_MB = 1024  # Memory.pm: the boot memory of a VM with memory hotplug
MAX_HOTPLUG_MB = 4 << 20  # 4 TiB
DEFAULT_HOST_BITS = 36  # Memory.pm's fallback when the host's width is unknown


class ProxmoxRefuses(PvefixError):
    """Proxmox itself would not start this config (its reason)."""

    exit_code = 3


# -- the machine type -----------------------------------------------------------------------

def machine_of(config: Mapping[str, str], qemu_version: str,
               cpu_vendor: str | None = None) -> str:
    """The machine type on the command line Proxmox starts `config` with on a node whose
    QEMU is `qemu_version` (`9.2.0`; empty: unknown): get_vm_machine's type with the `+pveN`
    revision the features in use need (config_to_command's version guard)."""
    args = (config.get("machine"), qemu_version or None, config.get("ostype"),
            config.get("meta"))
    kind = vm_machine(*args)
    needed = re.search(r"\+pve\d+", running_machine(*args, cpu_vendor=cpu_vendor))
    return re.sub(r"\+pve\d+", needed.group(0), kind) if needed else kind


def qemu_version_of(version_line: str) -> str:
    """`QEMU emulator version 9.2.0 (pve-qemu-kvm_9.2.0-5)` -> `9.2.0` (empty when none)."""
    m = re.search(r"version (\d+\.\d+(?:\.\d+)?)", version_line)
    return m.group(1) if m else ""


# -- the vCPU -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cpu:
    """The `-cpu` value and the widths it gives: `phys` ("host", a number, None: QEMU's
    default) and `guest_phys` (guest-phys-bits, None when not set)."""

    value: str
    phys: str | None
    guest_phys: int | None


def _flag_map(flags: list[str] | tuple[str, ...], into: dict[str, str]) -> None:
    for f in flags:
        if f[:1] in "+-" and len(f) > 1:
            into[f[1:]] = f[:1]


def pve_flags(reported: str, ostype: str | None, qemu: str, machine: str) -> tuple[str, ...]:
    """The flags qemu-server adds by itself (CPUConfig.pm get_pve_cpu_flags), under KVM:
    `machine` is the command line's machine type, `qemu` the node's QEMU version."""
    flags = ["+lahf_lm", "+sep"] if reported == "kvm64" else []
    if ostype == "solaris":
        flags.append("-x2apic")
    if reported.startswith("Opteron"):
        flags.append("-rdtscp")
    flags += ["+kvm_pv_unhalt", "+kvm_pv_eoi"]
    new = major_minor(qemu) >= (11, 0)
    if new and windows_version(ostype) >= 11:
        flags += ["-cet-ibt", "-cet-ss"]
    m = re.search(r"(\d+)\.(\d+)", machine)
    at = (int(m.group(1)), int(m.group(2))) if m else major_minor(qemu)
    if new and reported == "host" and at < (11, 0):
        flags.append("-vmx-mbec")
    return tuple(flags)


def cpu_of(config: Mapping[str, str], models: Mapping[str, CpuModel] | None,
           vendors: Mapping[str, str], *, x_vga: bool = False, qemu: str = "",
           machine: str = "") -> Cpu:
    """`-cpu` as CPUConfig.pm get_cpu_options builds it under KVM (the Hyper-V
    enlightenments `hv_*` of Windows guests left out: they do not move a BAR). `vendors`: the
    QEMU models' vendors (a model with one gets `vendor=`); `qemu`, `machine`: the node's QEMU
    version and the machine type (pve_flags)."""
    raw = config.get("cpu")
    cpu = read_cpu(raw, dict(models) if models is not None else None)
    if cpu.reported == "custom":
        raise ProxmoxRefuses(f"cpu: {cpu.cputype} is not defined in cpu-models.conf (or it "
                             "was not read): Proxmox cannot start it")
    custom = cpu.model
    flags: dict[str, str] = {}
    _flag_map(pve_flags(cpu.reported, config.get("ostype"), qemu, machine), flags)
    _flag_map(MODEL_FLAGS.get(cpu.cputype, ()), flags)
    _flag_map(custom.flags if custom else (), flags)
    _flag_map(cpu.flags, flags)
    props = [cpu.reported]
    level = cpu.prop.get("level") or (custom.other.get("level") if custom else None)
    if level:
        props.append(f"level={level}")
    props += [f"{op}{name}" for name, op in flags.items()]
    if cpu.reported != "host":
        props.append("enforce")
    if cpu.hidden or x_vga:
        props.append("kvm=off")
    vendor = vendors.get(cpu.reported)
    if vendor and vendor != "default":
        props.append(f"vendor={vendor}")
    guest = cpu.prop.get("guest-phys-bits") or (
        custom.other.get("guest-phys-bits") if custom else None)
    if guest:
        props.append(f"guest-phys-bits={guest}")
    phys = cpu.phys
    if phys == "host":
        props.append("host-phys-bits=true")
    elif phys:
        props.append(f"phys-bits={phys}")
    return Cpu(",".join(props), phys, int(guest) if guest and guest.isdigit() else None)


@cache
def model_vendors() -> dict[str, str]:
    """QEMU's CPU models and their vendors as Proxmox lists them (GET
    capabilities/qemu/cpu of Proxmox VE 9.2, kept in pvefix/sim/cpu_models.json)."""
    text = resources.files("pvefix.sim").joinpath("cpu_models.json").read_text("utf-8")
    return {str(m["name"]): str(m["vendor"]) for m in json.loads(text)["models"]}


# -- memory ---------------------------------------------------------------------------------

def memory_hotplug(config: Mapping[str, str]) -> bool:
    """`hotplug` has `memory` (its default `1` means network,disk,usb; `0` nothing)."""
    value = config.get("hotplug")
    if value is None or value == "1":
        return False
    return "memory" in value.split(",")


def max_hotplug_mb(cpu: Cpu, reported: str, host_bits: int | None) -> int:
    """Memory.pm get_max_mem: 2^(bits-1) bytes in MiB, bits rounded down to even, 4 TiB at
    most; bits: the vCPU's phys-bits, else the host's (at most 40 for a named model)."""
    bits: int | None = None
    if cpu.phys == "host":
        bits = host_bits
    elif cpu.phys and cpu.phys.isdigit():
        bits = int(cpu.phys)
    if bits is None:
        host = host_bits if host_bits is not None else DEFAULT_HOST_BITS
        bits = host if reported in ("host", "max") else min(host, 40)
    bits &= ~1
    return min(1 << (bits - 21), MAX_HOTPLUG_MB)


@dataclass(frozen=True)
class Memory:
    """`-m`, the boot RAM in MiB (the backend's size) and the pc-dimm sizes in MiB."""

    m: str
    static_mb: int
    dimms: tuple[int, ...] = field(default=())

    @property
    def total_mb(self) -> int:
        return self.static_mb + sum(self.dimms)


def memory_of(config: Mapping[str, str], cpu: Cpu, host_bits: int | None) -> Memory:
    """Memory.pm config: plain `-m MEMORY`, or the hotplug layout (Proxmox's refusals
    raised as ProxmoxRefuses)."""
    total = ram_bytes(config.get("memory")) >> 20
    if not memory_hotplug(config):
        return Memory(str(total), total)
    if (config.get("numa") or "0") in ("0", ""):
        raise ProxmoxRefuses("Proxmox refuses to start this config: NUMA needs to be enabled "
                             "for memory hotplug")
    if any(re.fullmatch(r"numa\d+", k) for k in config):
        raise ProxmoxRefuses("Proxmox refuses to start this config: cannot enable memory "
                             "hotplugging with custom NUMA topology")
    maximum = max_hotplug_mb(cpu, read_cpu(config.get("cpu")).reported, host_bits)
    if total > maximum:
        raise ProxmoxRefuses(f"Proxmox refuses to start this config: Total memory is bigger "
                             f"than {maximum}MB")
    huge = config.get("hugepages") == "1024"
    static = STATIC_MB * (int(config.get("sockets") or 1) if huge else 1)
    if total < static:
        raise ProxmoxRefuses(f"Proxmox refuses to start this config: minimum memory must be "
                             f"{static}MB")
    dimms = dimm_sizes(total, static, 1024 if huge else 512)
    if static + sum(dimms) > total:  # foreach_dimm's last DIMM would pass the memory
        raise ProxmoxRefuses(f"Proxmox refuses to start this config: memory size ({total}) "
                             f"must be aligned to {dimms[-1]} for hotplugging")
    return Memory(f"size={static},slots=255,maxmem={maximum}M", static, dimms)


def dimm_sizes(total: int, static: int, size: int) -> tuple[int, ...]:
    """Memory.pm foreach_dimm: 32 DIMMs of each size, the size doubling, until `total`."""
    out: list[int] = []
    current = static
    for _ in range(8):
        for _ in range(32):
            if current >= total:
                return tuple(out)
            current += size
            out.append(size)
        size *= 2
    return tuple(out)


# -- firmware -------------------------------------------------------------------------------

def ovmf_files(config: Mapping[str, str], q35: bool) -> tuple[str, str]:
    """OVMF.pm get_ovmf_files: the code file and the variables template for `efidisk0`
    (q35 has SMM: the secure-boot code build)."""
    efidisk = PropertyString.parse(config.get("efidisk0") or "", default_key="file")
    if efidisk.get("efitype") != "4m":
        return "OVMF_CODE.fd", "OVMF_VARS.fd"
    keys = (efidisk.get("pre-enrolled-keys") or "0") not in ("0", "")
    code = "OVMF_CODE_4M.secboot.fd" if q35 else "OVMF_CODE_4M.fd"
    return code, "OVMF_VARS_4M.ms.fd" if keys else "OVMF_VARS_4M.fd"


# -- args -----------------------------------------------------------------------------------

@dataclass
class Args:
    """What of `args` reaches the rehearsal: the kept words, a `-cpu` that replaces the
    built one (QEMU takes the last), notes on the rest."""

    kept: list[str] = field(default_factory=list)
    cpu: str | None = None
    notes: list[str] = field(default_factory=list)


# Only these shapes reach QEMU: a number for OVMF's window, or the 64-bit hole's size. A `file=`
# (the node's own files into the guest) or any other property is left out.
_STRING_FW_CFG = re.compile(r"name=opt/ovmf/[A-Za-z0-9_-]+,string=[0-9]{1,9}")
_HOLE64 = re.compile(r"[A-Za-z0-9_-]+\.pci-hole64-size=[0-9]{1,20}[KMGT]?")


def _moves_window(name: str, value: str) -> bool:
    return (name == "-fw_cfg" and bool(_STRING_FW_CFG.fullmatch(value))) or (
        name == "-global" and bool(_HOLE64.fullmatch(value)))


def args_of(args: str | None) -> Args:
    """The words of `args` that decide placement: `-fw_cfg name=opt/ovmf/NAME,string=N`
    (X-PciMmio64Mb; never `file=`: root's QEMU would read that file), `-global ...
    pci-hole64...` and `-cpu` (it replaces Proxmox's). The rest is left out, in a note."""
    words = qemu_words(args)
    out = Args()
    dropped: list[str] = []
    i = 0
    while i < len(words):
        name = words[i]
        value = words[i + 1] if i + 1 < len(words) and name.startswith("-") else None
        if value and _moves_window(name, value):
            out.kept += [name, value]
        elif name == "-cpu" and value:
            out.cpu = value
        else:
            dropped += [name] if value is None else [name, value]
        i += 1 if value is None else 2
    if dropped:
        out.notes.append(f"args: left out of the rehearsal: {' '.join(dropped)} (a word that"
                         " can move a BAR leaves the verdict not established)")
    if out.cpu:
        out.notes.append(f"args: -cpu {out.cpu} replaces the cpu line's (QEMU takes the last)")
    return out
