"""The rehearsal's QEMU command line, from the config the VM's next start runs (pure).

The placement-deciding parts (machine type, `-cpu`, `-m` and memory hotplug, the OVMF code
file, `args`) are Proxmox's, built as qemu-server builds them (pvefix/rehearse/command.py),
never read from `qm showcmd` (which activates a stopped VM's volumes). Here they are joined
with what stands in for the VM's devices:

- `hostpciN` (pcie): each passed function becomes a stand-in device `pci-testdev,membar=SIZE`
  (a 64-bit prefetchable BAR with no memory behind it) of its largest 64-bit BAR, on the root
  port `ich9-pcie-port-(N+1)` where `pcie=1` (on q35), or on the PCI bridge `pci.0`/`pci.1`
  (hostpci0-3 / 4-15), the buses qemu-server uses. pvefix adds those ports and bridges itself
  (Proxmox's `-readconfig` file is not needed), on q35 all four fixed root ports and all four
  pci-bridges, empty ones included: the firmware reserves 64-bit window space for each.

Everything else of the VM is left out: disks, NICs, display, USB, vfio, hugepages, NUMA pinning,
the VM's QMP sockets and pid file. RAM is a memory-backend-file on a sparse file in the run's
private folder (`share=on`; the firmware touches little of it); memory hotplug's DIMMs are
backed by unlinked sparse files there. Under TCG (no usable /dev/kvm) QEMU ignores
`host-phys-bits` and reports its own CPU vendor, so the host's width and vendor are given
explicitly, from the node's facts; `enforce` and the KVM-only flags are dropped there. QEMU runs
with `-sandbox on` (seccomp: no spawning, no privilege changes, no obsolete system calls).
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
STAND_IN = "pci-testdev"  # BAR2 = membar: a 64-bit prefetchable container, no memory
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
class StandIn:
    """One passed function's stand-in: its QEMU id, the host function, the BAR size, the bus."""

    id: str
    host: str
    size: int
    bus: str


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
              q35: bool) -> list[StandIn]:
    """One stand-in per passed function that has a 64-bit BAR. `functions` maps hostpciN to its
    (host address, largest 64-bit BAR size) pairs (a pool: its largest candidate)."""
    out: list[StandIn] = []
    keys = sorted((k for k in planned if HOSTPCI_KEY.match(k)), key=lambda k: (len(k), k))
    for key in keys:
        entry = HostPci.parse(planned[key], key)
        if entry.pcie and not q35:
            raise ProxmoxRefuses(f"{key}: pcie=1 needs a q35 machine (Proxmox refuses to "
                                 "start this config: 'q35 machine model is not enabled')")
        sized = [(host, size) for host, size in functions.get(key, ()) if size > 0]
        index = entry.index
        bus = (f"ich9-pcie-port-{index + 1}" if entry.pcie
               else "pci.0" if index < 4 else "pci.1")
        for j, (host, size) in enumerate(sized):
            ident = key if len(sized) == 1 else f"{key}.{j}"
            out.append(StandIn(ident, host, size, bus))
    return out


def buses(devices: Sequence[StandIn], q35: bool) -> list[str]:
    """The root ports and bridges the stand-ins sit on, as `-device` values (pvefix's own:
    q35's four ports at 1c.0-3 and four PCI bridges pci.0-pci.3 that Proxmox always has, one
    more port per pcie entry from hostpci4 on; i440fx: the bridge pci.1 where used)."""
    out: list[str] = []
    used = {d.bus for d in devices}
    if q35:
        for n in range(1, 5):
            multi = ",multifunction=on" if n == 1 else ""
            out.append(f"pcie-root-port,id=ich9-pcie-port-{n},bus=pcie.0,addr=0x1c.{n - 1}"
                       f"{multi},port={n},chassis={n}")
        extra = sorted(int(b.rsplit("-", 1)[1]) for b in used
                       if b.startswith("ich9-pcie-port-") and int(b.rsplit("-", 1)[1]) > 4)
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
    if "pci.1" in used:
        parent = "pcidmi" if q35 else "pci.0"
        out.append(f"pci-bridge,id=pci.1,chassis_nr=2,bus={parent},addr=0x{2 if q35 else 0x1e:x}")
    return out


def device_args(devices: Sequence[StandIn], q35: bool) -> list[str]:
    """`-device` arguments: the buses, then each stand-in (functions of one entry share its
    root port's slot, as functions 0, 1, ...)."""
    argv: list[str] = []
    for value in buses(devices, q35):
        argv += ["-device", value]
    count = {b: sum(1 for d in devices if d.bus == b) for b in {d.bus for d in devices}}
    taken: dict[str, int] = {}
    for d in devices:
        n = taken.get(d.bus, 0)
        taken[d.bus] = n + 1
        if d.bus.startswith("ich9-pcie-port-"):
            multi = ",multifunction=on" if n == 0 and count[d.bus] > 1 else ""
            where = f"bus={d.bus},addr=0x0.{n}{multi}"
        else:
            where = f"bus={d.bus},addr={0x10 + n:#x}"
        argv += ["-device", f"{STAND_IN},membar={d.size >> 20}M,id={d.id},{where}"]
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
    devices = stand_ins(i.planned, i.functions, q35)
    accel = "kvm" if i.accel == "kvm" else "tcg,tb-size=64"
    argv = ["-accel", accel, "-machine", f"type={kind}{backend}", "-cpu", cpu, *mem_argv,
            *FIXED, *fw_argv, *device_args(devices, q35), *extra.kept]
    return Job(argv=argv, accel=i.accel, machine=kind, cpu=cpu, ram_mb=mem.static_mb,
               firmware=fw, vars_template=template, stand_ins=devices, phys_bits=bits,
               notes=notes, guest_phys_bits=guest, host_bits=i.host.phys_bits,
               dimm_mb=sum(mem.dimms))
