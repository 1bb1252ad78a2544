"""The guest's 64-bit MMIO window, as QEMU, Proxmox and the two firmwares really size it (pure).

Every number here comes from a source, named where it is used:
- qemu-server src/PVE/QemuServer/CPUConfig.pm: the built-in models x86-64-v2, -v2-AES, -v3 and
  -v4 report as `qemu64` (`reported-model`); no `cpu` line means `kvm64`
  (get_default_cpu_type); `phys-bits=host` becomes `host-phys-bits=true`; and
  check_phys_bits_above_40_compat warns "OVMF firmware might limit CPU 'phys-bits' to 40 - enable
  the 'pdpe1gb' CPU flag" for a qemu64/kvm64 model on OVMF without `+pdpe1gb`.
- qemu-server src/PVE/QemuServer/Memory.pm get_max_mem: phys-bits N or host as set; `cpu: host`
  or `max` use the host's bits; any other model min(host bits, 40) (QEMU's default for named
  models).
- QEMU hw/i386/pc.c pc_memory_init: "Address space limit ... phys-bits too low (N)": QEMU exits
  when the highest guest-physical address it must map does not fit the CPU's phys-bits.
- edk2 OvmfPkg/Library/PlatformInitLib/MemDetect.c PlatformAddressWidthFromCpuid: the CPUID
  width is trusted when >= 41, or 40 on AMD, 36/39 on Intel (otherwise OVMF sizes the address
  space itself, with the classic window); capped at 46 bits with 4-level paging, and at 40 when
  the CPU offers no 1 GiB pages (CPUID 0x80000001 EDX bit 26, the `pdpe1gb` flag).
  PlatformDynamicMmioWindow: the 64-bit window becomes 1/8 of the address space, at its top,
  when that is larger than the classic window (PcdPciMmio64Size, 32 GiB unless
  `-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=N` sets it) and fits above RAM.
- SeaBIOS src/fw/pciinit.c pci_bios_map_devices: the 64-bit window starts above RAM and is moved
  to the top of the CPU's address space, sized to the sum of the 64-bit BARs; SeaBIOS has no
  X-PciMmio64Mb and no 1 GiB-page cap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pvefix.vmconfig import PropertyString

GiB = 1 << 30
TiB = 1 << 40
QEMU64_FAMILY = frozenset(
    {"x86-64-v2", "x86-64-v2-AES", "x86-64-v3", "x86-64-v4", "kvm64", "qemu64"}
)
HOST_MODELS = frozenset({"host", "max"})
QEMU_NAMED_MODEL_BITS = 40
OVMF_4LEVEL_CAP = 46
OVMF_NO_1G_CAP = 40
OVMF_CLASSIC_WINDOW = 32 * GiB
# q35 keeps at most 2 GiB of RAM below 4 GiB; the rest starts at 4 GiB. Counting all of RAM above
# 4 GiB plus 4 GiB over-estimates the end by at most 2 GiB, on the safe side.
LOW_RESERVE = 4 * GiB
# QEMU on AMD hosts moves RAM above 4 GiB to start at 1 TiB when it would reach the
# HyperTransport hole at 1012 GiB (hw/i386/pc.c x86_update_above_4g_mem_start, QEMU >= 7.1).
AMD_HT_START = 1012 * GiB

Firmware = Literal["ovmf", "seabios"]


def fmt_size(size: int) -> str:
    if size >= TiB and size % TiB == 0:
        return f"{size >> 40} TiB"
    if size >= TiB:
        return f"{size / TiB:.2f} TiB"
    if size % GiB == 0:
        return f"{size >> 30} GiB"
    return f"{size / GiB:.2f} GiB"


def ram_bytes(memory: str | None) -> int:
    """`memory: N` or `memory: current=N,...` in MiB; Proxmox's default is 512."""
    if not memory:
        return 512 << 20
    m = re.search(r"(?:^|current=)(\d+)", memory)
    return int(m.group(1)) << 20 if m else 512 << 20


@dataclass
class CpuLine:
    """The VM's `cpu` line as Proxmox reads it."""

    raw: str | None
    prop: PropertyString
    cputype: str
    reported: str  # qemu64 | kvm64 | host | max | the model itself (custom: "custom")
    flags: list[str] = field(default_factory=list)

    @property
    def phys(self) -> str | None:
        return self.prop.get("phys-bits")

    @property
    def hidden(self) -> bool:
        return (self.prop.get("hidden") or "0") in ("1", "on", "yes", "true")

    def flag(self, name: str) -> str | None:
        """'+' or '-' when the VM's flags list sets `name`, else None."""
        for f in self.flags:
            if f[1:] == name and f[:1] in "+-":
                return f[:1]
        return None

    @property
    def qemu64_family(self) -> bool:
        return self.reported in ("qemu64", "kvm64")

    @property
    def host_like(self) -> bool:
        return self.cputype in HOST_MODELS


def proxmox_warns_40_bits(firmware: Firmware, cpu: CpuLine, host_bits: int | None) -> bool:
    """qemu-server CPUConfig.pm check_phys_bits_above_40_compat: Proxmox logs "OVMF firmware
    might limit CPU 'phys-bits' to 40" at every start of a qemu64/kvm64-based model (x86-64-v*
    included) on OVMF with phys-bits above 40 (`host` on a host wider than 40 bits) and no
    `+pdpe1gb`. With the host's width unknown, `host` is taken to be wider (every CPU that
    passes GPUs with large BARs is)."""
    if firmware != "ovmf" or not cpu.qemu64_family or cpu.flag("pdpe1gb") == "+":
        return False
    if cpu.phys == "host":
        return host_bits is None or host_bits > 40
    return cpu.phys is not None and cpu.phys.isdigit() and int(cpu.phys) > 40


def read_cpu(raw: str | None) -> CpuLine:
    prop = PropertyString.parse(raw or "kvm64", default_key="cputype")
    cputype = prop.get("cputype") or "kvm64"
    if cputype in QEMU64_FAMILY:
        reported = "kvm64" if cputype == "kvm64" else "qemu64"
    elif cputype.startswith("custom-"):
        reported = "custom"
    else:
        reported = cputype
    flags = [f for f in (prop.get("flags") or "").split(";") if f]
    return CpuLine(raw, prop, cputype, reported, flags)


def with_flag(cpu: CpuLine, flag: str) -> list[str]:
    """The flags list with `+flag` (replacing a `-flag`), order kept."""
    out = [f for f in cpu.flags if f[1:] != flag]
    return [*out, f"+{flag}"]


@dataclass(frozen=True)
class Window:
    """What the firmware makes of one CPU setting: bits, caps on the way, the 64-bit window."""

    firmware: Firmware
    guest_bits: int | None  # what the vCPU reports (None: the host's, not known here)
    fw_bits: int | None  # what the firmware uses
    window: int | None  # size of the 64-bit MMIO window (None: unknown)
    ram_end: int
    caps: tuple[str, ...]  # why fw_bits < guest_bits, in words, with the source
    ram_fits: bool | None
    bars_fit: bool | None
    check: str | None = None  # what pvefix could not establish and must be checked

    @property
    def fits(self) -> bool | None:
        if self.ram_fits is False or self.bars_fit is False:
            return False
        if self.ram_fits is None or self.bars_fit is None:
            return None
        return True


def guest_bits(cpu: CpuLine, host_bits: int | None) -> int | None:
    """phys-bits the vCPU reports (Memory.pm get_max_mem's rule)."""
    phys = cpu.phys
    if phys and phys.isdigit():
        return int(phys)
    if phys == "host" or cpu.host_like:
        return host_bits
    if host_bits is not None:
        return min(host_bits, QEMU_NAMED_MODEL_BITS)
    return QEMU_NAMED_MODEL_BITS


def has_1g_pages(cpu: CpuLine, host_flags: frozenset[str] | None) -> bool | None:
    """Does the vCPU offer 1 GiB pages? None: pvefix cannot tell (a model it does not know)."""
    explicit = cpu.flag("pdpe1gb")
    if explicit == "+":
        return True
    if explicit == "-":
        return False
    if cpu.host_like:
        return None if host_flags is None else "pdpe1gb" in host_flags
    if cpu.qemu64_family:
        return False
    return None


def _ram_end(ram: int, vendor: str | None, bits: int | None, window: int) -> int:
    end = ram + LOW_RESERVE
    if vendor == "AuthenticAMD" and end + window > AMD_HT_START and (bits or 0) > 40:
        end = TiB + ram
    return end


def _cpuid_trusted(bits: int, vendor: str | None) -> bool:
    if bits >= 41:
        return True
    if vendor == "AuthenticAMD":
        return bits == 40
    if vendor == "GenuineIntel":
        return bits in (36, 39)
    return True


def window(
    *,
    firmware: Firmware,
    cpu: CpuLine,
    ram: int,
    bars: int,
    vendor: str | None,
    host_bits: int | None,
    host_flags: frozenset[str] | None,
    mmio64_mb: int | None = None,
) -> Window:
    """The 64-bit MMIO window for `bars` bytes of 64-bit BARs above `ram` bytes of RAM."""
    bits = guest_bits(cpu, host_bits)
    caps: list[str] = []
    if bits is None:
        end = _ram_end(ram, vendor, 46, bars)
        if firmware == "ovmf" and has_1g_pages(cpu, host_flags) is False:
            # The host's width is unknown, but OVMF's 40-bit cap is not.
            caps.append(
                f"OVMF caps phys-bits at {OVMF_NO_1G_CAP} when the vCPU has no 1 GiB pages"
                " (no pdpe1gb; MemDetect.c)"
            )
            space = 1 << OVMF_NO_1G_CAP
            dynamic = 1 << (OVMF_NO_1G_CAP - 3)
            classic = (mmio64_mb << 20) if mmio64_mb else OVMF_CLASSIC_WINDOW
            end = _ram_end(ram, vendor, OVMF_NO_1G_CAP, max(dynamic, classic))
            size = dynamic if dynamic > classic and end + dynamic < space else classic
            fit = bars <= size and end + size <= space
            return Window(firmware, None, OVMF_NO_1G_CAP, size, end, tuple(caps), None, fit)
        return Window(firmware, None, None, None, end, (), None, None)
    if firmware == "seabios":
        end = _ram_end(ram, vendor, bits, bars)
        space = 1 << bits
        return Window(
            firmware, bits, bits, max(space - end, 0), end, (), end <= space, end + bars <= space
        )
    classic = (mmio64_mb << 20) if mmio64_mb else OVMF_CLASSIC_WINDOW
    fw_bits = bits
    if not _cpuid_trusted(bits, vendor):
        caps.append(
            f"OVMF does not trust {bits} phys-bits reported on this CPU vendor and sizes the"
            " address space itself, with the classic 64-bit window (MemDetect.c)"
        )
        end = _ram_end(ram, vendor, bits, classic)
        return Window(
            firmware, bits, bits, classic, end, tuple(caps),
            end <= 1 << bits, end + classic <= 1 << bits and bars <= classic,
        )
    if fw_bits > OVMF_4LEVEL_CAP:
        caps.append(f"OVMF caps phys-bits at {OVMF_4LEVEL_CAP} with 4-level paging (MemDetect.c)")
        fw_bits = OVMF_4LEVEL_CAP
    one_g = has_1g_pages(cpu, host_flags)
    if one_g is False and fw_bits > OVMF_NO_1G_CAP:
        caps.append(
            f"OVMF caps phys-bits at {OVMF_NO_1G_CAP} when the vCPU has no 1 GiB pages"
            " (no pdpe1gb; MemDetect.c)"
        )
        fw_bits = OVMF_NO_1G_CAP
    check = None
    if one_g is None and fw_bits > OVMF_NO_1G_CAP:
        check = (
            f"whether the vCPU ({cpu.cputype}) offers 1 GiB pages is not known to pvefix;"
            f" without them OVMF caps phys-bits at {OVMF_NO_1G_CAP}: check in the guest with"
            " `grep -wm1 pdpe1gb /proc/cpuinfo`"
        )
    space = 1 << fw_bits
    dynamic = 1 << (fw_bits - 3)
    end = _ram_end(ram, vendor, fw_bits, max(dynamic, classic))
    if dynamic > classic and end + dynamic < space:
        size = dynamic
        bars_fit = bars <= size
    else:
        size = classic
        bars_fit = bars <= size and end + size <= space
    ram_fits = end <= (1 << bits)
    return Window(firmware, bits, fw_bits, size, end, tuple(caps), ram_fits, bars_fit, check)


def mmio64_mb_of(args: str | None) -> int | None:
    """X-PciMmio64Mb from an `args` line, if set there."""
    if not args:
        return None
    m = re.search(r"opt/ovmf/X-PciMmio64Mb,string=(\d+)", args)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class Inputs:
    """Everything but the cpu line that decides the window."""

    firmware: Firmware
    ram: int
    bars: int
    vendor: str | None
    host_bits: int | None
    host_flags: frozenset[str] | None
    mmio64_mb: int | None = None

    def window(self, cpu: CpuLine) -> Window:
        return window(
            firmware=self.firmware, cpu=cpu, ram=self.ram, bars=self.bars, vendor=self.vendor,
            host_bits=self.host_bits, host_flags=self.host_flags, mmio64_mb=self.mmio64_mb,
        )
