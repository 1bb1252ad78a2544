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
- qemu-server CPUConfig.pm get_cpu_options: a `custom-NAME` model (cpu-models.conf) starts its
  `reported-model` (kvm64 when absent) with its flags; the VM's own phys-bits, hidden and flags
  override the model's.
- The SeaBIOS inside pve-qemu-kvm is the one QEMU's release bundles (seabios_of).
- edk2's 1 GiB-page rule (MemDetect.c): without pdpe1gb OVMF caps phys-bits at 40.
What the firmware then makes of the vCPU is planner/bar_verdict.py's (verdict()).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from pvefix.vmconfig import PropertyString
from pvefix.vmconfig.cpu_models import CpuModel

GiB = 1 << 30
TiB = 1 << 40
QEMU64_FAMILY = frozenset(
    {"x86-64-v2", "x86-64-v2-AES", "x86-64-v3", "x86-64-v4", "kvm64", "qemu64"}
)
HOST_MODELS = frozenset({"host", "max"})
QEMU_NAMED_MODEL_BITS = 40

Firmware = Literal["ovmf", "seabios"]
# The SeaBIOS that QEMU's release bundles (roms/seabios, pc-bios/bios-256k.bin), taken to be the
# one pve-qemu-kvm ships: QEMU 7.2 took 1.16.1 and 8.0 took 1.16.2 (qemu-devel pull requests
# seabios-1.16.1-20221128, seabios-1.16.2-20230316); 8.2 taking 1.16.3 and 10.1 a 1.17 release
# are not confirmed from a source here. A newer release counts as "root-port alignment unknown".
SEABIOS_OF_QEMU = ((8, 0, "1.16.2"), (8, 2, "1.16.3"), (10, 1, "1.17"))


def fmt_size(size: int) -> str:
    if size >= TiB and size % TiB == 0:
        return f"{size >> 40} TiB"
    if size >= TiB:
        return f"{size / TiB:.2f} TiB"
    if size % GiB == 0:
        return f"{size >> 30} GiB"
    if size < GiB and size % (1 << 20) == 0:
        return f"{size >> 20} MiB"
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
    reported: str  # qemu64 | kvm64 | host | max | the model itself (custom, unknown: "custom")
    flags: list[str] = field(default_factory=list)  # the VM's own flags list
    model: CpuModel | None = None  # a custom-* model as cpu-models.conf defines it

    @property
    def phys(self) -> str | None:
        """The VM's phys-bits, else its custom model's (CPUConfig.pm: the VM's wins)."""
        own = self.prop.get("phys-bits")
        return own or (self.model.phys_bits if self.model else None)

    @property
    def hidden(self) -> bool:
        own = self.prop.get("hidden")
        if own is None and self.model is not None and self.model.hidden is not None:
            return self.model.hidden
        return (own or "0") in ("1", "on", "yes", "true")

    @property
    def hidden_given(self) -> bool:
        """Whether the cpu line (or its custom model) sets `hidden` at all: qemu-server then takes
        kvm=off from it alone, overriding the kvm=off an x-vga=1 entry asks for (CPUConfig.pm
        get_cpu_options: `$kvm_off = $cpu->{hidden} if defined(...)`, after PCI.pm set it)."""
        return self.prop.get("hidden") is not None or (
            self.model is not None and self.model.hidden is not None)

    @property
    def custom_unknown(self) -> bool:
        """A custom-* model whose definition pvefix has not read."""
        return self.cputype.startswith("custom-") and self.model is None

    def flag(self, name: str) -> str | None:
        """'+' or '-' when the VM's flags list (else its custom model's) sets `name`."""
        for f in [*self.flags, *(self.model.flags if self.model else ())]:
            if f[1:] == name and f[:1] in "+-":
                return f[:1]
        return None

    def qemu_cpu(self) -> tuple[str, str | None, tuple[str, ...], bool]:
        """What of QEMU's -cpu this line decides (model, phys-bits, effective flags, kvm=off):
        two lines with the same value start the same vCPU."""
        names = sorted({f[1:] for f in [*self.flags, *(self.model.flags if self.model else ())]
                        if f[:1] in "+-"})
        return (self.reported, self.phys, tuple(f"{self.flag(n)}{n}" for n in names),
                self.hidden)

    @property
    def qemu64_family(self) -> bool:
        return self.reported in ("qemu64", "kvm64")

    @property
    def host_like(self) -> bool:
        return self.cputype in HOST_MODELS or self.reported in HOST_MODELS


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


def read_cpu(raw: str | None, models: dict[str, CpuModel] | None = None) -> CpuLine:
    """The cpu line; a `custom-NAME` model is resolved through `models` (cpu-models.conf)."""
    prop = PropertyString.parse(raw or "kvm64", default_key="cputype")
    cputype = prop.get("cputype") or "kvm64"
    model = (models or {}).get(cputype.removeprefix("custom-")) if cputype.startswith(
        "custom-") else None
    named = model.reported_model if model else cputype
    if named in QEMU64_FAMILY:
        reported = "kvm64" if named == "kvm64" else "qemu64"
    elif cputype.startswith("custom-") and model is None:
        reported = "custom"
    else:
        reported = named
    flags = [f for f in (prop.get("flags") or "").split(";") if f]
    return CpuLine(raw, prop, cputype, reported, flags, model)


def with_flag(cpu: CpuLine, flag: str) -> list[str]:
    """The flags list with `+flag` (replacing a `-flag`), order kept."""
    out = [f for f in cpu.flags if f[1:] != flag]
    return [*out, f"+{flag}"]


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


def seabios_of(qemu_version: str | None) -> str | None:
    """The SeaBIOS release inside pve-qemu-kvm `qemu_version` (None: not known). Before QEMU 8.0
    the release is older than 1.16.2 and places as 1.16.2 does (no phys-bits logic); from QEMU
    10.1 on it is taken as newer than 1.16.3, whose root-port alignment is not pinned down."""
    m = re.match(r"(\d+)\.(\d+)", qemu_version or "")
    if m is None:
        return None
    have = (int(m.group(1)), int(m.group(2)))
    found = "1.16.1"
    for major, minor, release in SEABIOS_OF_QEMU:
        if have >= (major, minor):
            found = release + (".0" if release.count(".") == 1 else "")
    return found


def mmio64_mb_of(args: str | None) -> int | None:
    """X-PciMmio64Mb from an `args` line, if set there and QEMU gets it: an `args` qemu-server
    drops whole (a lone trailing backslash, an open quote, `0`) sets nothing
    (vmconfig/args.py qemu_words)."""
    from pvefix.vmconfig.args import qemu_words

    for word in qemu_words(args):
        m = re.search(r"opt/ovmf/X-PciMmio64Mb,string=(\d+)", word)
        if m:
            return int(m.group(1))
    return None


# The OVMF build a VM runs: qemu-server OVMF.pm get_ovmf_files gives `efidisk0: ...,efitype=4m`
# the 4 MiB images (OVMF_CODE_4M*.fd) and every other VM (no efidisk0, or efitype=2m, the
# default) the 2 MiB OVMF_CODE.fd. From pve-edk2-firmware 4.2023.08 on (its changelog: "ship
# 2MB builds via legacy 2023.02 versions, as upstream dropped support for them") the 2 MiB
# images are prebuilt edk2-stable202302 binaries in pve-edk2-firmware-legacy
# (debian/legacy-2M-builds), whatever edk2 the 4 MiB images are built from.
LEGACY_2M_EDK2 = "2023.02"
_LEGACY_SPLIT = (2023, 8)


def efitype(efidisk: str | None) -> str:
    """`efitype` of an efidisk0 value: `4m`, or `2m` (the schema's default; no efidisk0)."""
    if not efidisk:
        return "2m"
    from pvefix.errors import PvefixError

    try:
        return PropertyString.parse(efidisk, default_key="file").get("efitype") or "2m"
    except PvefixError:  # a value qemu-server rejects: the VM does not start anyway
        return "2m"


def ovmf_build(package: str | None, efidisk: str | None) -> str | None:
    """The edk2 release the VM's OVMF image is built from: the package's for the 4 MiB images,
    the legacy 2023.02 build for the 2 MiB ones from 4.2023.08 on (None: not known)."""
    if efitype(efidisk) == "4m":
        return package
    m = re.search(r"(20\d\d)\.(\d\d)", package or "")
    if m is None:
        return None
    if (int(m.group(1)), int(m.group(2))) < _LEGACY_SPLIT:
        return package
    return f"{LEGACY_2M_EDK2} (pve-edk2-firmware-legacy: the 2 MiB image of efitype=2m)"


# Devices qemu-server adds with a modern virtio-pci function, whose 64-bit prefetchable
# capability BAR (QEMU hw/virtio/virtio-pci.c, modern by default) the firmware places in the
# same 64-bit window as the GPUs, behind Proxmox's PCI bridges (a 1 MiB bridge window each at
# least). An X-PciMmio64Mb window exactly the GPUs' size then has no room: fw-lab, edk2
# 2025.02, --topo proxmox, 8x128G in a 1 TiB window places all 8 alone and 7 with one
# virtio-balloon-pci behind a pci-bridge (qemu-server QemuServer.pm config_to_command).
OTHER_BAR = 1 << 20


@dataclass(frozen=True)
class VirtioFunction:
    """One modern virtio-pci function Proxmox's start adds for a VM: the config key behind it,
    QEMU's device model, Proxmox's id for it, and where it sits (`bus` None: QEMU picks a slot
    on the root bus)."""

    key: str
    model: str
    id: str
    bus: str | None
    slot: int | None

    def device(self, model: str | None = None) -> str:
        """Its `-device` value without a backend (`model`: another device in its place)."""
        where = f",bus={self.bus},addr={self.slot:#x}" if self.bus is not None else ""
        return f"{model or self.model},id={self.id}{where}"


def virtio_nic(value: str) -> bool:
    """Is a `netN` value a virtio NIC (`virtio=MAC,...` or `model=virtio,...`)?"""
    return re.match(r"(model=)?virtio\b", value.strip()) is not None


def bridge_device(name: str, slot: int) -> str:
    """The `-device` value of one of an i440fx VM's pci-bridges (i440fx_bridges)."""
    return f"pci-bridge,id={name},chassis_nr={name[4:]},bus=pci.0,addr={slot:#x}"


def _where(index: int, first: tuple[int, int], rest: tuple[int, int]) -> tuple[str, int]:
    """Proxmox's slot for the Nth of a kind: the first six on one bus from one slot on, the
    others on another bus (qemu-server PCI.pm's address map, its numbers as (bus, slot))."""
    bus, slot = first if index < 6 else rest
    return f"pci.{bus}", slot + (index if index < 6 else index - 6)


def _option(value: str, name: str, bare: bool) -> str | None:
    """A property string's `name=` value; `bare`: its first item may give it without a key."""
    items = [p.strip() for p in value.split(",")]
    for n, item in enumerate(items):
        key, eq, val = item.partition("=")
        if eq and key == name:
            return val
        if not eq and bare and n == 0:
            return key
    return None


def _at_least(version: str | None, release: tuple[int, int, int]) -> bool:
    """Is a machine version (`9.2`, `4.1+pve2`; None: the newest) at least `release`?"""
    m = re.match(r"(\d+)\.(\d+)(?:\+pve(\d+))?", version or "")
    return m is None or (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) >= release


def virtio_functions(values: Mapping[str, str], q35: bool,
                     version: str | None = None) -> list[VirtioFunction]:
    """The VM's modern virtio functions, each taking space in the 64-bit window, where Proxmox
    puts them (qemu-server config_to_command and PCI.pm's address map): the balloon (unless
    `balloon: 0`), the agent's and spice's virtio-serial, virtio disks, NICs and SCSI
    controllers (one for every disk with virtio-scsi-single), the RNG, virtiofs, a virtio GPU.
    On q35 `pci.N` is one of pve-q35-4.0.cfg's pci-bridges; on i440fx pci.0 is the root bus.
    `version`: the machine's (the RNG needs 4.1+pve2)."""
    out = [] if values.get("balloon", "").strip() == "0" else [
        VirtioFunction("balloon", "virtio-balloon-pci", "balloon0", "pci.0", 3)]
    scsihw = values.get("scsihw", "").strip()
    scsi = sorted(int(k[4:]) for k in values if re.fullmatch(r"scsi\d+", k))
    if scsihw == "virtio-scsi-single":
        out += [VirtioFunction(f"scsi{n}", "virtio-scsi-pci", f"virtioscsi{n}", "pci.3", n + 1)
                for n in scsi]
    elif scsihw == "virtio-scsi-pci" and scsi:
        out.append(VirtioFunction("scsihw", "virtio-scsi-pci", "scsihw0", "pci.0", 5))
    agent = values.get("agent", "")
    if (_option(agent, "enabled", True) or "0") in ("1", "on", "yes", "true") and (
            _option(agent, "type", False) or "virtio") == "virtio":
        out.append(VirtioFunction("agent", "virtio-serial", "qga0", "pci.0", 8))
    vga = values.get("vga", "")
    kind = _option(vga, "type", True) or ""
    if kind.startswith("virtio"):
        out.append(VirtioFunction("vga", "virtio-vga", "vga", *(
            ("pcie.0", 1) if q35 else ("pci.0", 2))))
    if kind.startswith(("virtio", "qxl")) or _option(vga, "clipboard", False) == "vnc":
        out.append(VirtioFunction("vga", "virtio-serial", "spice", "pci.0", 9))
    out += [f for f in _numbered(values) if f.key != "rng0" or _at_least(version, (4, 1, 2))]
    return out


def _numbered(values: Mapping[str, str]) -> list[VirtioFunction]:
    """virtioN disks, virtio netN NICs, rng0 and virtiofsN, in Proxmox's places."""
    out = []
    for key in sorted(values, key=lambda k: (k.rstrip("0123456789"), len(k), k)):
        stem, n = key.rstrip("0123456789"), key[len(key.rstrip("0123456789")):]
        if not n:
            continue
        if stem == "virtio":
            out.append(VirtioFunction(key, "virtio-blk-pci", key,
                                      *_where(int(n), (0, 10), (2, 1))))
        elif stem == "net" and virtio_nic(values[key]):
            out.append(VirtioFunction(key, "virtio-net-pci", key,
                                      *_where(int(n), (0, 18), (1, 1))))
        elif key == "rng0":
            out.append(VirtioFunction(key, "virtio-rng-pci", key, "pci.1", 29))
        elif stem == "virtiofs":
            out.append(VirtioFunction(key, "vhost-user-fs-pci", key, None, None))
    return out


def machine_version(machine: str) -> str | None:
    """The version of a machine type (`pc-i440fx-9.2+pve1` -> 9.2+pve1; None: the newest)."""
    m = re.match(r"pc-(?:i440fx|q35)-(\d+\.\d+(?:\+pve\d+)?)", machine)
    return m.group(1) if m else None


def function_args(values: Mapping[str, str], machine: str,
                  used: Iterable[str] = ()) -> list[str]:
    """`-device` values for the pci-bridges an i440fx VM gets and the VM's virtio functions,
    each on Proxmox's bus and slot, without their backends (drive, netdev, chardev)."""
    q35 = "q35" in machine
    version = machine_version(machine)
    bridges = [] if q35 else i440fx_bridges(version, values, used)
    return [*(bridge_device(name, slot) for name, slot in bridges),
            *(f.device() for f in virtio_functions(values, q35, version))]


def i440fx_bridges(version: str | None, values: Mapping[str, str],
                   used: Iterable[str] = ()) -> list[tuple[str, int]]:
    """The pci-bridges Proxmox adds to an i440fx VM, as (id, slot on the root bus pci.0): pci.1
    always (the USB code asks for the xhci controller's address on it, used or not), pci.2 on
    every machine from 2.3 on, pci.3 with virtio-scsi-single, and any other a device sits
    behind (`used`: buses; hostpci4+ and virtio6+ on pci.2, net6+ and rng0 on pci.1)
    (QemuServer.pm config_to_command, USB.pm get_usb_controllers; PCI.pm's address map)."""
    wanted = {"pci.1", *used} | {f.bus for f in virtio_functions(values, False, version)
                                 if f.bus}
    m = re.match(r"(\d+)\.(\d+)", version or "")
    if m is None or (int(m.group(1)), int(m.group(2))) >= (2, 3):
        wanted |= {"pci.1", "pci.2"}
    if values.get("scsihw", "").strip() == "virtio-scsi-single":
        wanted.add("pci.3")
    slots = {"pci.1": 30, "pci.2": 31, "pci.3": 5}
    return [(b, slots[b]) for b in sorted(wanted) if b in slots]


# Proxmox's q35 (qemu-server pve-q35-4.0.cfg, and pve-q35.cfg before machine 4.0) always has four
# PCIe root ports ich9-pcie-port-1..4 and four SHPC pci-bridges pci.0-pci.3, empty ones
# included; `hostpciN,pcie=1` sits on port N+1, a fifth device on gets a root port of its own
# (PCI.pm print_pcie_root_port). Each of these is hotplug-capable, and the firmware reserves
# 64-bit window space for it (bar_verdict.hotplug_pad): an empty root port and every pci-bridge
# take that much, a root port holding a GPU no more than the GPU needs.
PVE_Q35_ROOT_PORTS = 4
PVE_Q35_BRIDGES = 4


def hotplug_buses(q35: bool, port_holders: set[int], version: str | None = None,
                  values: Mapping[str, str] | None = None) -> int:
    """The hotplug-capable bridges of a Proxmox VM that take the firmware's padding: on q35
    the four pci-bridges and the fixed root ports no `hostpciN,pcie=1` entry holds
    (`port_holders`: the N of those entries); on i440fx the pci-bridges Proxmox adds
    (i440fx_bridges of the machine `version` and the config `values`). fw-lab, edk2 2025.02,
    `--machine pc`, 1x128G in a 128 GiB X-PciMmio64Mb window: placed alone, not placed with
    pci.1 and pci.2 at 1e.0 and 1f.0."""
    if not q35:
        return len(i440fx_bridges(version, values or {}))
    taken = {n for n in port_holders if 0 <= n < PVE_Q35_ROOT_PORTS}
    return PVE_Q35_BRIDGES + PVE_Q35_ROOT_PORTS - len(taken)
