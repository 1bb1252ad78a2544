"""The rehearsal's QEMU command line, from `qm showcmd VMID --pretty` and the planned config (pure).

Proxmox's own answer for today's config (`qm showcmd`) gives the machine type, the `-cpu`
value, `-m` and the OVMF code file. Where the plan changes a key, the part it decides is built
from the planned config instead, as qemu-server builds it (the tests hold each such part
against Proxmox's own config_to_command, the oracle's `cmd`):

- `machine`: `-machine type=...` (a `+pveN` revision kept in the style of the node's QEMU);
- `cpu`: `-cpu MODEL,...`: the x86-64-v* models as `qemu64` plus their flags, `kvm64` with
  `+lahf_lm,+sep`, the VM's `flags`, `phys-bits=N` or `host-phys-bits=true`, `enforce` and the
  KVM paravirtual flags under KVM;
- `memory`: the RAM size;
- `bios`, `efidisk0`: OVMF or SeaBIOS, and which OVMF build (2 MiB or 4 MiB);
- `args`: only `-fw_cfg name=opt/ovmf/...` (X-PciMmio64Mb) and `-global ...pci-hole64...` are
  kept: they move the 64-bit window; every other word of `args` is left out (said in a note);
- `hostpciN` (pcie): each passed function becomes a stand-in device `pci-testdev,membar=SIZE`
  (a 64-bit prefetchable BAR with no memory behind it) of its largest 64-bit BAR, on the root
  port `ich9-pcie-port-(N+1)` where `pcie=1` (on q35), or on the PCI bridge `pci.0`/`pci.1`
  (hostpci0-3 / 4-15), the buses qemu-server uses. pvefix adds those ports and bridges itself
  (Proxmox's `-readconfig` file is not needed).

Everything else of the VM is left out: disks, NICs, display, USB, vfio, hugepages, NUMA pinning,
the VM's QMP sockets and pid file. RAM is one memory-backend-file on a sparse file in the run's
private folder (`share=on`; the firmware touches little of it). Under TCG (no usable /dev/kvm)
QEMU ignores `host-phys-bits` and reports its own CPU vendor, so the host's width and vendor are
given explicitly, from the node's facts; `enforce` and the KVM-only flags are dropped there.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pvefix.errors import PvefixError
from pvefix.planner.mmio import ram_bytes, read_cpu
from pvefix.vmconfig import HostPci, PropertyString
from pvefix.vmconfig.args import split_words
from pvefix.vmconfig.hostpci import HOSTPCI_KEY

# QEMU options that take no value (everything else in `qm showcmd` takes one)
_FLAGS = frozenset({"-daemonize", "-no-shutdown", "-nodefaults", "-no-reboot", "-nographic",
                    "-S", "-enable-kvm", "-no-hpet", "-no-acpi", "-no-user-config"})
# qemu-server CPUConfig.pm: the flags each built-in model adds to its reported QEMU model
_V2 = ("+pni", "+popcnt", "+sse4.1", "+sse4.2", "+ssse3")
_V3 = (*_V2, "+aes", "+avx", "+avx2", "+bmi1", "+bmi2", "+f16c", "+fma", "+abm", "+movbe",
       "+xsave")
MODEL_FLAGS: dict[str, tuple[str, ...]] = {
    "kvm64": ("+lahf_lm", "+sep"),
    "x86-64-v2": _V2,
    "x86-64-v2-AES": (*_V2, "+aes"),
    "x86-64-v3": _V3,
    "x86-64-v4": (*_V3, "+avx512f", "+avx512bw", "+avx512cd", "+avx512dq", "+avx512vl"),
}
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


def parse_showcmd(text: str) -> list[str]:
    """`qm showcmd VMID [--pretty]`: the command's words (the binary first)."""
    joined = re.sub(r"\\\n", " ", text.strip())
    try:
        words = shlex.split(joined)
    except ValueError as exc:
        raise PvefixError(f"qm showcmd printed no command line pvefix can read: {exc}") from None
    if not words or not words[0].startswith("/"):
        raise PvefixError("qm showcmd printed no command line pvefix can read: "
                          f"{text.strip()[:200]!r}")
    return words


def options(words: Sequence[str]) -> list[tuple[str, str | None]]:
    """The options of a QEMU command line (binary left out), each with its value."""
    out: list[tuple[str, str | None]] = []
    i = 1
    while i < len(words):
        name = words[i]
        if name in _FLAGS or not name.startswith("-") or i + 1 >= len(words):
            out.append((name, None))
            i += 1
        else:
            out.append((name, words[i + 1]))
            i += 2
    return out


def first(opts: Sequence[tuple[str, str | None]], name: str) -> str | None:
    return next((v for n, v in opts if n == name), None)


# -- the parts ------------------------------------------------------------------------------

def machine_type(showcmd_type: str | None, today: str | None, planned: str | None,
                 machines: frozenset[str]) -> tuple[str, list[str]]:
    """The QEMU machine type: the showcmd one, or the planned `machine` key's when it changes.
    A `+pveN` revision is kept where the node's QEMU is Proxmox's (showcmd has one) and left
    out where the node's QEMU does not know it."""
    notes: list[str] = []
    pve = bool(showcmd_type and "+pve" in showcmd_type)
    if showcmd_type and (planned or "") == (today or ""):
        kind = showcmd_type
    else:
        kind = PropertyString.parse(planned or "pc", default_key="type").get("type") or "pc"
        if pve and "+pve" not in kind:
            kind += "+pve0"
    if machines and kind not in machines:
        base = kind.split("+pve", 1)[0]
        if base != kind and base in machines:
            notes.append(f"machine type {kind} is Proxmox's; this QEMU has {base}: used that")
            kind = base
    return kind, notes


def cpu_from_config(value: str | None, x_vga: bool = False) -> str:
    """The `-cpu` value qemu-server builds for the VM's `cpu` line (under KVM); `kvm=off` also
    when a hostpci entry has x-vga=1. The Hyper-V enlightenments of Windows guests (`hv_*`)
    are left out: they do not move a BAR."""
    cpu = read_cpu(value)
    if cpu.reported == "custom":
        raise RehearseRefused(f"cpu: {cpu.cputype} is a custom CPU model (cpu-models.conf); "
                              "pvefix rehearse does not build those: rehearse today's config "
                              "(`qm showcmd` has it) or use a built-in model")
    parts = [cpu.reported if cpu.qemu64_family else cpu.cputype]
    parts += MODEL_FLAGS.get(cpu.cputype, ())
    parts += [f for f in cpu.flags if f[:1] in "+-"]
    if not cpu.host_like:
        parts.append("enforce")
    if cpu.hidden or x_vga:
        parts.append("kvm=off")
    parts += ["+kvm_pv_eoi", "+kvm_pv_unhalt"]
    if cpu.phys == "host":
        parts.append("host-phys-bits=true")
    elif cpu.phys:
        parts.append(f"phys-bits={cpu.phys}")
    return ",".join(dict.fromkeys(parts))


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


def ram_mb(showcmd_m: str | None, today: str | None, planned: str | None) -> int:
    """The RAM size in MiB: showcmd's `-m`, or the planned `memory` key's when it changes."""
    if showcmd_m and (today or "") == (planned or ""):
        m = re.match(r"(?:size=)?(\d+)([MG]?)", showcmd_m)
        if m:
            return int(m.group(1)) << (10 if m.group(2) == "G" else 0)
    return ram_bytes(planned) >> 20


# Only these two shapes are kept: a number for OVMF's 64-bit window, or the hole's size. A
# `file=` (the node's own files into the guest) or any other option is left out.
_FW_CFG_MMIO = re.compile(r"name=opt/ovmf/X-PciMmio64Mb,string=[0-9]{1,9}")
_HOLE64 = re.compile(r"[A-Za-z0-9_-]+\.pci-hole64-size=[0-9]{1,20}[KMGT]?")


def mmio_args(args: str | None) -> tuple[list[str], list[str]]:
    """The words of `args` that move the 64-bit window (kept), and a note on the rest."""
    if not args:
        return [], []
    words = [w.text for w in split_words(args)]
    kept: list[str] = []
    dropped: list[str] = []
    i = 0
    while i < len(words):
        name = words[i]
        value = words[i + 1] if i + 1 < len(words) else ""
        keep = bool((name == "-fw_cfg" and _FW_CFG_MMIO.fullmatch(value)) or (
            name == "-global" and _HOLE64.fullmatch(value)))
        (kept if keep else dropped).extend([name, value] if value else [name])
        i += 2 if value and name.startswith("-") else 1
    notes = ([f"args: left out of the rehearsal (no BAR placement effect known): "
              f"{shlex.join(dropped)}"] if dropped else [])
    return kept, notes


def firmware(opts: Sequence[tuple[str, str | None]], planned: Mapping[str, str],
             node: NodeFacts, explicit_dir: bool) -> tuple[list[str], str, str | None, list[str]]:
    """The firmware arguments, its kind, the OVMF variables template to copy, notes. The OVMF
    code file is showcmd's (its name looked up in the node's firmware folder); the variables are
    a fresh copy of the folder's template, never the VM's EFI disk."""
    files = set(node.firmware_files or ())
    folder = node.firmware_dir.rstrip("/")
    if (planned.get("bios") or "seabios") != "ovmf":
        if explicit_dir and "bios-256k.bin" in files:
            return ["-bios", f"{folder}/bios-256k.bin"], "seabios", None, []
        return [], "seabios", None, []
    efidisk = PropertyString.parse(planned.get("efidisk0") or "", default_key="file")
    small = efidisk.get("efitype") != "4m" and "efidisk0" in planned
    code = _pflash_code(opts) or ("OVMF_CODE.fd" if small else "OVMF_CODE_4M.fd")
    name = code.rsplit("/", 1)[-1]
    notes: list[str] = []
    if name not in files:
        fallback = "OVMF_CODE.fd" if "_4M" not in name else "OVMF_CODE_4M.fd"
        if fallback not in files:
            raise RehearseRefused(f"no OVMF code file {name} in {folder} on the node "
                                  f"(--firmware-dir names the folder)")
        notes.append(f"{name} is not in {folder}: used {fallback} (same build, other variant)")
        name = fallback
    four = "_4M" in name
    template = "OVMF_VARS_4M.fd" if four else "OVMF_VARS.fd"
    if four and efidisk.get("pre-enrolled-keys") == "1" and "OVMF_VARS_4M.ms.fd" in files:
        template = "OVMF_VARS_4M.ms.fd"
    if template not in files:
        raise RehearseRefused(f"no OVMF variables template {template} in {folder} on the node")
    argv = ["-drive", f"if=pflash,unit=0,format=raw,readonly=on,file={folder}/{name}",
            "-drive", "if=pflash,unit=1,format=raw,file=vars.fd"]
    return argv, "ovmf", f"{folder}/{template}", notes


def _pflash_code(opts: Sequence[tuple[str, str | None]]) -> str | None:
    """The OVMF code file of showcmd: `-drive if=pflash,unit=0,...,file=F` or the
    `-blockdev` whose node-name is pflash0."""
    for name, value in opts:
        if name == "-drive" and value and "if=pflash" in value and "unit=0" in value:
            m = re.search(r"(?:^|,)file=([^,]+)", value)
            if m:
                return m.group(1)
        if name == "-blockdev" and value and value.startswith("{") and "pflash0" in value:
            try:
                data = json.loads(value)
            except json.JSONDecodeError:
                continue
            if data.get("node-name") == "pflash0":
                inner = data.get("file")
                if isinstance(inner, dict) and isinstance(inner.get("filename"), str):
                    return str(inner["filename"])
    return None


def stand_ins(planned: Mapping[str, str], functions: Mapping[str, Sequence[tuple[str, int]]],
              q35: bool) -> list[StandIn]:
    """One stand-in per passed function that has a 64-bit BAR. `functions` maps hostpciN to its
    (host address, largest 64-bit BAR size) pairs (a pool: its largest candidate)."""
    out: list[StandIn] = []
    keys = sorted((k for k in planned if HOSTPCI_KEY.match(k)), key=lambda k: (len(k), k))
    for key in keys:
        entry = HostPci.parse(planned[key], key)
        if entry.pcie and not q35:
            raise PvefixError(f"{key}: pcie=1 needs a q35 machine (Proxmox refuses to start "
                              "this config: 'q35 machine model is not enabled')")
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
    q35's four ports at 1c.0-3 that Proxmox always has, one more port per pcie entry from
    hostpci4 on, and the PCI bridges pci.0/pci.1)."""
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
        if used & {"pci.0", "pci.1"}:
            out.append("i82801b11-bridge,id=pcidmi,bus=pcie.0,addr=0x1e")
            out.append("pci-bridge,id=pci.0,chassis_nr=1,bus=pcidmi,addr=0x1")
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
         "-global", "isa-debugcon.iobase=0x402", "-qmp", "unix:qmp.sock,server=on,wait=off"]


@dataclass(frozen=True)
class Inputs:
    """What a rehearsal is built from."""

    showcmd: Sequence[str]  # `qm showcmd` of today's config, as words
    today: Mapping[str, str]  # today's config (the keys of the section that starts)
    planned: Mapping[str, str]  # the config to rehearse
    functions: Mapping[str, Sequence[tuple[str, int]]]  # hostpciN -> (host, BAR size) pairs
    node: NodeFacts
    host: HostCpu
    accel: str  # "kvm" | "tcg"
    explicit_firmware_dir: bool = False


def build_job(i: Inputs) -> Job:
    """The rehearsal's QEMU arguments (run in its private folder: relative paths)."""
    opts = options(i.showcmd)
    shown_type = PropertyString.parse(first(opts, "-machine") or "", default_key="type")
    kind, notes = machine_type(shown_type.get("type"), i.today.get("machine"),
                               i.planned.get("machine"), i.node.machines)
    q35 = "q35" in kind
    shown_cpu = first(opts, "-cpu")
    if shown_cpu and i.today.get("cpu") == i.planned.get("cpu"):
        cpu = shown_cpu
    else:
        cpu = cpu_from_config(i.planned.get("cpu"), x_vga(i.planned))
    cpu, bits, more = for_accel(cpu, i.accel, i.host)
    notes += more
    size = ram_mb(first(opts, "-m"), i.today.get("memory"), i.planned.get("memory"))
    fw_argv, fw, template, more = firmware(opts, i.planned, i.node, i.explicit_firmware_dir)
    notes += more
    kept, more = mmio_args(i.planned.get("args"))
    notes += more
    devices = stand_ins(i.planned, i.functions, q35)
    accel = "kvm" if i.accel == "kvm" else "tcg,tb-size=64"
    argv = ["-accel", accel, "-machine", f"type={kind},memory-backend=ram0", "-cpu", cpu,
            "-m", str(size), "-object",
            f"memory-backend-file,id=ram0,size={size}M,mem-path=ram,share=on",
            *FIXED, *fw_argv, *device_args(devices, q35), *kept]
    return Job(argv=argv, accel=i.accel, machine=kind, cpu=cpu, ram_mb=size, firmware=fw,
               vars_template=template, stand_ins=devices, phys_bits=bits, notes=notes)
