"""The rehearsal's QEMU command line, from the config the VM's next start runs (pure).

The placement-deciding parts (machine type, `-cpu`, `-m` and memory hotplug, the OVMF code
file, `args`) are Proxmox's, built as qemu-server builds them (pvefix/rehearse/command.py),
never read from `qm showcmd` (which activates a stopped VM's volumes). Here they are joined
with what stands in for the VM's devices:

- `hostpciN`: each passed function becomes a stand-in of its largest 64-bit BAR on Proxmox's
  bus and slot: slot 0 of root port `ich9-pcie-port-(N+1)` where `pcie=1` (on q35), else
  qemu-server's slots on `pci.0`/`pci.2`. A function with an I/O BAR gets `pci-testdev,membar=`
  (a 64-bit prefetchable BAR with no memory behind it, and an I/O BAR); one without gets
  `ivshmem-plain` on a sparse file (no I/O BAR): the firmware's I/O port space is small, and an
  I/O window per root port can use it up (fw-lab: 8 stand-ins with I/O BARs on root ports and
  two transitional virtio functions on pci-bridges lose a GPU; without the I/O BARs all 8 are
  placed). A one-function entry's other 64-bit BARs are more functions of its slot (they share
  its root port's window).
- The buses: on q35 all four fixed root ports and all four pci-bridges, empty ones included
  (the firmware reserves 64-bit window space for each); on i440fx the pci-bridges Proxmox adds
  (pci.1 and pci.2 on every machine from 2.3 on). pvefix adds them itself (Proxmox's
  `-readconfig` file is not needed).
- The VM's modern virtio functions (planner/mmio.py virtio_functions: balloon, agent and spice
  virtio-serial, virtio disks, NICs, SCSI controllers, RNG, virtiofs, virtio GPU), each on
  Proxmox's bus and slot with no backend (a null block device, no network).

Everything else of the VM is left out: other disks and NICs, other displays, USB, vfio,
hugepages, NUMA pinning, the VM's QMP sockets and pid file. RAM is a memory-backend-file on a
sparse file in the run's private folder (`share=on`; the firmware touches little of it); memory
hotplug's DIMMs are backed by unlinked sparse files there. Under TCG (no usable /dev/kvm) QEMU
ignores `host-phys-bits` and reports its own CPU vendor, so the host's width and vendor are
given explicitly, from the node's facts; `enforce` and the KVM-only flags are dropped there.
QEMU runs with `-sandbox on` (seccomp: no spawning, no privilege changes, no obsolete system
calls).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pvefix.errors import PvefixError
from pvefix.planner import mmio
from pvefix.rehearse.command import (
    Memory,
    ProxmoxRefuses,
    args_of,
    cpu_of,
    machine_of,
    memory_of,
    model_vendors,
    ovmf_files,
    qemu_version_of,
)
from pvefix.vmconfig import HostPci
from pvefix.vmconfig.cpu_models import CpuModel
from pvefix.vmconfig.hostpci import HOSTPCI_KEY

KVM_ONLY = ("enforce", "kvm=off", "+kvm_pv_eoi", "+kvm_pv_unhalt")
VENDORS = {"AuthenticAMD", "GenuineIntel"}
STAND_IN = "pci-testdev"  # BAR2 = membar: a 64-bit prefetchable container, no memory; an I/O BAR
NO_IO = "ivshmem-plain"  # BAR2 = its memdev (a sparse file), and no I/O BAR
DATA_LIMIT = 2 << 30  # RLIMIT_DATA of the rehearsal QEMU (its RAM and BARs are not in it)


class RehearseRefused(PvefixError):
    """The rehearsal cannot run here, and why (exit 3)."""

    exit_code = 3


@dataclass(frozen=True)
class NodeFacts:
    """What the node script's `facts` mode found on the node."""

    qemu: str | None
    qemu_version: str = ""
    kvm: bool = False
    mem_available: int | None = None
    firmware_dir: str = ""
    firmware_files: tuple[str, ...] | None = None
    machines: frozenset[str] = frozenset()

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> NodeFacts:
        files = data.get("firmware_files")
        machines = data.get("machines")
        mem = data.get("mem_available")
        return cls(
            qemu=str(data["qemu"]) if data.get("qemu") else None,
            qemu_version=str(data.get("qemu_version") or ""),
            kvm=bool(data.get("kvm")),
            mem_available=mem if isinstance(mem, int) else None,
            firmware_dir=str(data.get("firmware_dir") or ""),
            firmware_files=tuple(str(f) for f in files) if isinstance(files, list) else None,
            machines=frozenset(str(m) for m in machines) if isinstance(machines, list)
            else frozenset(),
        )


@dataclass(frozen=True)
class HostCpu:
    """The node's CPU as its facts say (for TCG, which cannot ask it)."""

    vendor: str | None
    phys_bits: int | None


@dataclass(frozen=True)
class BarShape:
    """A passed function's BARs as its stand-in copies them: the largest 64-bit one, whether
    it has an I/O BAR (its root port then needs an I/O window: the firmware's I/O space is
    small), and its other 64-bit ones (they share its root port's window)."""

    size: int
    io: bool = True
    others: tuple[int, ...] = ()


@dataclass(frozen=True)
class StandIn:
    """One stand-in function: its QEMU id, the host function, its 64-bit BAR's size, the bus
    and the address on it (Proxmox's), and whether it has an I/O BAR (pci-testdev) or not
    (ivshmem-plain on a sparse file)."""

    id: str
    host: str
    size: int
    bus: str
    addr: str = "0x0"
    io: bool = True


@dataclass
class Job:
    """The rehearsal QEMU's arguments (the binary and the run folder are the node's)."""

    argv: list[str]
    accel: str
    machine: str
    cpu: str
    ram_mb: int
    firmware: str  # "ovmf" | "seabios"
    vars_template: str | None
    stand_ins: list[StandIn]
    phys_bits: int | None  # the width the vCPU should get (None: QEMU's default)
    notes: list[str] = field(default_factory=list)
    guest_phys_bits: int | None = None  # guest-phys-bits: what the guest is told it may use
    host_bits: int | None = None  # the node's MAXPHYADDR: a KVM guest cannot reach above it
    dimm_mb: int = 0  # memory hotplug's DIMMs, beyond `ram_mb` (the boot RAM)
    left_out: list[str] = field(default_factory=list)  # BARs no stand-in holds (stand_ins)


def available_machine(kind: str, node: NodeFacts) -> tuple[str, list[str]]:
    """Proxmox's machine type, or its base where the node's QEMU (not Proxmox's) does not
    know the `+pveN` revision (its machine list lacks it; with no list, its version string
    does not say pve)."""
    base = re.sub(r"\+pve\d+", "", kind)
    lacks = kind not in node.machines and (base in node.machines if node.machines else
                                           "pve" not in node.qemu_version)
    if base != kind and lacks:
        return base, [f"machine type {kind} is Proxmox's; this QEMU has {base}: used that"]
    return kind, []


def x_vga(config: Mapping[str, str]) -> bool:
    """Does a hostpci entry pass a primary GPU (x-vga=1)? (It hides KVM from the guest.)"""
    for key, value in config.items():
        if HOSTPCI_KEY.match(key):
            with contextlib.suppress(PvefixError):
                if HostPci.parse(value, key).x_vga:
                    return True
    return False


def for_accel(cpu: str, accel: str, host: HostCpu) -> tuple[str, int | None, list[str]]:
    """The `-cpu` value for the accelerator, and the phys-bits the vCPU should get. Under TCG:
    no `enforce` or KVM-only flags, `host` becomes `max`, and the host's width and vendor are
    given explicitly (TCG knows neither)."""
    parts = [p for p in cpu.split(",") if p]
    model, props = parts[0], parts[1:]
    notes: list[str] = []
    wants_host_bits = any(p in ("host-phys-bits=true", "host-phys-bits=on") for p in props) or (
        model in ("host", "max") and not any(p.startswith("phys-bits=") for p in props))
    bits = next((int(p.split("=")[1]) for p in props
                 if re.fullmatch(r"phys-bits=\d+", p)), None)
    if wants_host_bits:
        bits = host.phys_bits
    if accel == "kvm":
        return cpu, bits, notes
    props = [p for p in props if p not in KVM_ONLY and not p.startswith(("hv_", "hv-"))
             and not p.startswith("host-phys-bits")]
    if model == "host":
        model = "max"
        notes.append("TCG has no `host` CPU model: `max` with the host's width and vendor "
                     "stands in for it")
    if wants_host_bits:
        if host.phys_bits is None:
            raise RehearseRefused("the node's phys-bits are unknown, and TCG cannot take "
                                  "them from the host: rehearse where KVM is usable")
        props = [p for p in props if not p.startswith("phys-bits=")]
        props.append(f"phys-bits={host.phys_bits}")
    if not any(p.startswith("vendor=") for p in props) and model in ("qemu64", "kvm64", "max"):
        if host.vendor in VENDORS:
            props.append(f"vendor={host.vendor}")
        else:
            notes.append("the node's CPU vendor is unknown: TCG reports its own")
    return ",".join([model, *props]), bits, notes


def firmware(planned: Mapping[str, str], node: NodeFacts, explicit_dir: bool,
             q35: bool) -> tuple[list[str], str, str | None, list[str]]:
    """The firmware arguments, its kind, the OVMF variables template to copy, notes. The OVMF
    code file is Proxmox's for the config (command.ovmf_files), looked up in the node's
    firmware folder; the variables are a fresh copy of the folder's template, never the VM's
    EFI disk."""
    files = set(node.firmware_files or ())
    folder = node.firmware_dir.rstrip("/")
    if (planned.get("bios") or "seabios") != "ovmf":
        if explicit_dir and "bios-256k.bin" in files:
            return ["-bios", f"{folder}/bios-256k.bin"], "seabios", None, []
        return [], "seabios", None, []
    name, template = ovmf_files(planned, q35)
    notes: list[str] = []
    # The node's own folder: exactly the file Proxmox's start opens (a missing one stops that
    # start too). A folder given with --firmware-dir holds one edk2 build: its variant stands in.
    others = ("OVMF_CODE_4M.fd" if "_4M" in name else name, "OVMF_CODE_4M.fd",
              "OVMF_CODE.fd") if explicit_dir else ()
    found = next((f for f in (name, *others) if f in files), None)
    if found is None:
        raise RehearseRefused(
            f"no OVMF code file {name} in {folder} on the node"
            + ("" if explicit_dir else ": Proxmox's start of this VM opens that file and "
               "stops without it (pve-edk2-firmware; 2 MiB images from 4.2023.08 on: "
               "pve-edk2-firmware-legacy)") + " (--firmware-dir names another folder)")
    if found != name:
        other = ("_4M" in found) != ("_4M" in name)
        notes.append(f"{name} is not in {folder}: used {found}, the folder's own edk2 build"
                     + (" (on a Proxmox node the 2 MiB OVMF_CODE.fd is a build of its own: "
                        "edk2 2023.02, pve-edk2-firmware-legacy, from pve-edk2-firmware "
                        "4.2023.08 on)" if other else ", other variant"))
        if ("_4M" in found) != ("_4M" in name):
            template = "OVMF_VARS_4M.fd" if "_4M" in found else "OVMF_VARS.fd"
        name = found
    if template not in files and template.endswith(".ms.fd"):
        template = template.replace(".ms.fd", ".fd")
    if template not in files:
        raise RehearseRefused(f"no OVMF variables template {template} in {folder} on the node")
    argv = ["-drive", f"if=pflash,unit=0,format=raw,readonly=on,file={folder}/{name}",
            "-drive", "if=pflash,unit=1,format=raw,file=vars.fd"]
    return argv, "ovmf", f"{folder}/{template}", notes


def memory_args(mem: Memory, numa: bool) -> tuple[list[str], str]:
    """`-m` and the RAM's backends (sparse files in the run folder), and the machine's
    `memory-backend=` property (empty with NUMA: the node's memdev holds the RAM)."""
    size = mem.static_mb
    if not numa and not mem.dimms:
        return ["-m", mem.m, "-object",
                f"memory-backend-file,id=ram0,size={size}M,mem-path=ram,share=on"], \
            ",memory-backend=ram0"
    argv = ["-m", mem.m,
            "-object", f"memory-backend-file,id=ram-node0,size={size}M,mem-path=ram,share=on",
            "-numa", "node,nodeid=0,cpus=0,memdev=ram-node0"]
    for n, dimm in enumerate(mem.dimms):
        # mem-path a folder: QEMU makes an unlinked sparse file there
        argv += ["-object", f"memory-backend-file,id=mem-dimm{n},size={dimm}M,mem-path=.,"
                 "share=on", "-device", f"pc-dimm,id=dimm{n},memdev=mem-dimm{n},node=0"]
    return argv, ""


def stand_ins(planned: Mapping[str, str], functions: Mapping[str, Sequence[tuple[str, int]]],
              q35: bool, shapes: Mapping[str, BarShape] | None = None,
              left_out: list[str] | None = None) -> list[StandIn]:
    """The stand-ins of the passed functions that have a 64-bit BAR. `functions` maps hostpciN
    to its (host address, largest 64-bit BAR size) pairs (a pool: its largest candidate);
    `shapes` (by host address) adds each one's I/O BAR and other 64-bit BARs: those are more
    functions of the entry's slot (after its own functions), as one device's BARs share its
    port. A slot has 8 functions: BARs beyond them are not booted, each entry with such BARs a
    line of `left_out` (the rehearsal is then not established)."""
    out: list[StandIn] = []
    keys = sorted((k for k in planned if HOSTPCI_KEY.match(k)), key=lambda k: (len(k), k))
    for key in keys:
        entry = HostPci.parse(planned[key], key)
        if entry.pcie and not q35:
            raise ProxmoxRefuses(f"{key}: pcie=1 needs a q35 machine (Proxmox refuses to "
                                 "start this config: 'q35 machine model is not enabled')")
        sized = [(host, size) for host, size in functions.get(key, ()) if size > 0]
        mine = _entry_stand_ins(key, entry, sized, shapes or {})
        bars = len(sized) + sum(len((shapes or {}).get(h, BarShape(s)).others) for h, s in sized)
        if bars > len(mine) and left_out is not None:
            left_out.append(f"{key} ({planned[key]}): {bars - len(mine)} of its functions'"
                            f" {bars} 64-bit BARs: a slot holds {SLOT_FUNCTIONS} stand-in"
                            " functions")
        out += mine
    return out


def _entry_stand_ins(key: str, entry: HostPci, sized: Sequence[tuple[str, int]],
                     shapes: Mapping[str, BarShape]) -> list[StandIn]:
    bus, slot = _hostpci_slot(entry.index, entry.pcie)
    one = len(sized) == 1
    extra = [(j, host, other) for j, (host, size) in enumerate(sized)
             for other in (shapes.get(host) or BarShape(size)).others]
    out: list[StandIn] = []
    for j, (host, size) in enumerate(sized):
        shape = shapes.get(host) or BarShape(size)
        fn = None if one and not extra else j
        addr = f"{slot:#x}" if fn is None else f"{slot:#x}.{fn}"
        out.append(StandIn(key if one else f"{key}.{j}", host, size, bus, addr, shape.io))
    for n, (j, host, other) in enumerate(extra[:SLOT_FUNCTIONS - len(sized)], start=1):
        ident = f"{key}-bar{n}" if one else f"{key}.{j}-bar{n}"
        out.append(StandIn(ident, host, other, bus, f"{slot:#x}.{len(sized) + n - 1}", False))
    return out


SLOT_FUNCTIONS = 8


def _hostpci_slot(index: int, pcie: bool) -> tuple[str, int]:
    """Where Proxmox puts hostpciN: slot 0 of root port ich9-pcie-port-(N+1) with pcie=1;
    else hostpci0-1 at slots 0x10-0x11 and hostpci2-3 at 0x1b-0x1c of pci.0, hostpci4-15 from
    slot 0xd of pci.2 (qemu-server PCI.pm's address maps)."""
    if pcie:
        return f"ich9-pcie-port-{index + 1}", 0
    if index < 4:
        return "pci.0", (0x10, 0x11, 0x1b, 0x1c)[index]
    return "pci.2", 0xd + index - 4


def buses(devices: Sequence[StandIn], q35: bool, i440fx: Sequence[tuple[str, int]] = ()
          ) -> list[str]:
    """The root ports and bridges of Proxmox's layout, as `-device` values (pvefix's own): on
    q35 the four root ports at 1c.0-3 and the four pci-bridges pci.0-pci.3 that Proxmox always
    has, one more port per pcie entry from hostpci4 on; on i440fx the pci-bridges Proxmox adds
    (`i440fx`: mmio.i440fx_bridges)."""
    if not q35:
        return [mmio.bridge_device(name, slot) for name, slot in i440fx]
    out: list[str] = []
    for n in range(1, 5):
        multi = ",multifunction=on" if n == 1 else ""
        out.append(f"pcie-root-port,id=ich9-pcie-port-{n},bus=pcie.0,addr=0x1c.{n - 1}"
                   f"{multi},port={n},chassis={n}")
    extra = sorted({int(d.bus.rsplit("-", 1)[1]) for d in devices
                    if d.bus.startswith("ich9-pcie-port-")} - {1, 2, 3, 4})
    for n in extra:
        slot, fn = 0x10 + (n - 5) // 8, (n - 5) % 8
        out.append(f"pcie-root-port,id=ich9-pcie-port-{n},bus=pcie.0,addr={slot:#x}.{fn},"
                   f"multifunction=on,port={n},chassis={n}")
    # pve-q35-4.0.cfg's DMI bridge and its four pci-bridges, there empty or not: each is
    # hotplug-capable and takes the firmware's padding in the 64-bit window (bar_verdict)
    out.append("i82801b11-bridge,id=pcidmi,bus=pcie.0,addr=0x1e")
    out += [f"pci-bridge,id=pci.{n},chassis_nr={n + 1},bus=pcidmi,addr={n + 1:#x}"
            for n in range(mmio.PVE_Q35_BRIDGES)]
    return out


def virtio_args(functions: Sequence[mmio.VirtioFunction]) -> tuple[list[str], list[str]]:
    """`-device` (and `-blockdev`) arguments for the VM's virtio functions, each on Proxmox's
    bus and slot with no backend behind it (a null block device for a disk, no network for a
    NIC), and notes. virtiofs needs a running virtiofsd: a virtio-rng-pci stands in for it, a
    function with the same kind of 64-bit BAR, on a slot QEMU picks as it does for virtiofs."""
    argv: list[str] = []
    notes: list[str] = []
    for f in functions:
        model = None
        if f.model == "virtio-blk-pci":
            argv += ["-blockdev", f"driver=null-co,node-name=null-{f.id},read-zeroes=on"]
            model = f"{f.model},drive=null-{f.id}"
        elif f.model == "vhost-user-fs-pci":
            model = "virtio-rng-pci"
            notes.append(f"{f.key}: a virtio-rng-pci stands in for virtiofs (no virtiofsd)")
        argv += ["-device", f.device(model)]
    return argv, notes


def device_args(devices: Sequence[StandIn], q35: bool,
                i440fx: Sequence[tuple[str, int]] = ()) -> list[str]:
    """`-device` arguments: the buses, then each stand-in (functions of one entry share its
    slot, as functions 0, 1, ...; the first says multifunction)."""
    argv: list[str] = []
    for value in buses(devices, q35, i440fx):
        argv += ["-device", value]
    for d in devices:
        where = f"id={d.id},bus={d.bus},addr={d.addr}" + (
            ",multifunction=on" if d.addr.endswith(".0") else "")
        if d.io:
            argv += ["-device", f"{STAND_IN},membar={d.size >> 20}M,{where}"]
        else:  # mem-path a folder: an unlinked sparse file there
            argv += ["-object", f"memory-backend-file,id=bar-{d.id},size={d.size >> 20}M,"
                     "mem-path=.,share=on", "-device", f"{NO_IO},memdev=bar-{d.id},{where}"]
    return argv


FIXED = ["-nodefaults", "-display", "none", "-no-reboot", "-smp", "1",
         "-serial", "file:serial.log", "-debugcon", "file:debugcon.log",
         "-global", "isa-debugcon.iobase=0x402", "-qmp", "unix:qmp.sock,server=on,wait=off",
         "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny"]


@dataclass(frozen=True)
class Inputs:
    """What a rehearsal is built from."""

    planned: Mapping[str, str]  # the config to rehearse (the next start's keys)
    functions: Mapping[str, Sequence[tuple[str, int]]]  # hostpciN -> (host, BAR size) pairs
    node: NodeFacts
    host: HostCpu
    accel: str  # "kvm" | "tcg"
    explicit_firmware_dir: bool = False
    cpu_models: Mapping[str, CpuModel] | None = None  # cpu-models.conf (None: not read)
    shapes: Mapping[str, BarShape] | None = None  # by host function (None: pci-testdev alone)


def _guest_bits(cpu: str) -> int | None:
    m = re.search(r"(?:^|,)guest-phys-bits=(\d+)", cpu)
    return int(m.group(1)) if m else None


def _qemu_before(version_line: str, release: tuple[int, int]) -> bool:
    m = re.match(r"(\d+)\.(\d+)", qemu_version_of(version_line))
    return m is not None and (int(m.group(1)), int(m.group(2))) < release


def build_job(i: Inputs) -> Job:
    """The rehearsal's QEMU arguments (run in its private folder: relative paths). Raises
    command.ProxmoxRefuses where Proxmox itself would not start the config."""
    qemu = qemu_version_of(i.node.qemu_version)
    proxmox = machine_of(i.planned, qemu, i.host.vendor)
    kind, notes = available_machine(proxmox, i.node)
    q35 = "q35" in kind
    extra = args_of(i.planned.get("args"))
    notes += extra.notes
    built = cpu_of(i.planned, i.cpu_models, model_vendors(), x_vga=x_vga(i.planned),
                   qemu=qemu, machine=proxmox)
    mem = memory_of(i.planned, built, i.host.phys_bits)
    cpu, bits, more = for_accel(extra.cpu or built.value, i.accel, i.host)
    notes += more
    guest = _guest_bits(cpu)
    if guest is not None and _qemu_before(i.node.qemu_version, (9, 0)):
        cpu = re.sub(r",guest-phys-bits=\d+", "", cpu)
        notes.append(f"this QEMU predates guest-phys-bits (9.0): the firmware was not told "
                     f"{guest} bits; the verdict still counts them")
    fw_argv, fw, template, more = firmware(i.planned, i.node, i.explicit_firmware_dir, q35)
    notes += more
    numa = (i.planned.get("numa") or "0") not in ("0", "")
    mem_argv, backend = memory_args(mem, numa)
    left_out: list[str] = []
    devices = stand_ins(i.planned, i.functions, q35, i.shapes, left_out)
    bridges = [] if q35 else mmio.i440fx_bridges(mmio.machine_version(kind), i.planned,
                                                 {d.bus for d in devices})
    virtio, more = virtio_args(mmio.virtio_functions(i.planned, q35, mmio.machine_version(kind)))
    notes += more
    accel = "kvm" if i.accel == "kvm" else "tcg,tb-size=64"
    argv = ["-accel", accel, "-machine", f"type={kind}{backend}", "-cpu", cpu, *mem_argv,
            *FIXED, *fw_argv, *device_args(devices, q35, bridges), *virtio, *extra.kept]
    return Job(argv=argv, accel=i.accel, machine=kind, cpu=cpu, ram_mb=mem.static_mb,
               firmware=fw, vars_template=template, stand_ins=devices, phys_bits=bits,
               notes=notes, guest_phys_bits=guest, host_bits=i.host.phys_bits,
               dimm_mb=sum(mem.dimms), left_out=left_out)
