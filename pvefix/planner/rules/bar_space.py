"""BAR space in the guest: the 64-bit MMIO window (phys-bits, firmware) and `pci=realloc`.

Large-BAR GPUs need a large 64-bit MMIO window in the guest: an RTX PRO 6000 has a 128 GiB
BAR1, an H200 a 256 GiB BAR. The firmware places that window inside the guest-physical address
space, whose width is the vCPU's phys-bits; the sizes differ by firmware (pvefix/planner/mmio.py
has the rules and their sources):
- Whether the firmware places them is planner/bar_verdict.py's verdict(), judged by the real
  firmware in CI (tests/conformance/test_firmware_window.py, ../shared/fw-lab): OVMF's window is
  1/8 of a trusted address space at its top (below AMD's 1012 GiB reservation on edk2 2025.02),
  else the classic 32 GiB or `X-PciMmio64Mb` above RAM (exact from edk2 2025.02, a minimum
  before; one that does not fit hangs OVMF); it caps phys-bits at 46 (47 on 2022.11) and at 40
  without 1 GiB pages. SeaBIOS 1.16.2 places just above RAM, unchecked; 1.16.3 at the top of a
  trusted width, capped at 46. QEMU refuses to start when RAM plus q35's 32 GiB 64-bit hole
  does not fit phys-bits. Versions come from the host (pve-edk2-firmware; the SeaBIOS of
  pve-qemu-kvm); where they, or 1 GiB pages, are not known and decide, the verdict is "must be
  measured". Proxmox warns "OVMF firmware might limit CPU 'phys-bits' to 40" at every start of
  a qemu64/kvm64-based model with phys-bits above 40 and no +pdpe1gb; the plan says so.
Named models report 40 phys-bits unless `phys-bits=` says otherwise; `cpu: host` and
`phys-bits=host` report the host's. The machine judged is the one the plan leaves: an i440fx VM
with GPU entries is judged on the q35 the q35 rule moves it to (its version kept; the evidence
says "on pc-q35-X.Y (planned)"), so a cpu change that q35 needs is planned with it.

The OVMF build is the one the VM runs: `efidisk0: ...,efitype=4m` gets the 4 MiB images of the
installed pve-edk2-firmware, any other VM the 2 MiB image, which from 4.2023.08 on is a prebuilt
edk2 2023.02 (pve-edk2-firmware-legacy; qemu-server OVMF.pm get_ovmf_files). The window holds
more than the GPUs: every modern virtio function (the balloon unless `balloon: 0`, virtio NICs,
disks and SCSI controllers, the agent's serial, ...) has a 64-bit BAR there, so an X-PciMmio64Mb
window of exactly the GPUs' size loses a GPU (fw-lab, --topo proxmox); the size offered leaves
room, and a leftover X-PciMmio64Mb whose removal lets OVMF's own window fit is offered for removal.
So do the VM's hotplug-capable bridges: Proxmox's q35 always has four root ports
(ich9-pcie-port-1..4, empty ones included; `hostpciN,pcie=1` sits on port N+1) and four SHPC
pci-bridges (pci.0-pci.3, qemu-server pve-q35-4.0.cfg), and both edk2 builds measured (2022.11,
2025.02) reserve 1/256 of a window above 32 GiB, rounded up to a power of two, for each bridge
(an empty root port, every pci-bridge; a port holding a GPU takes no more than the GPU needs);
SeaBIOS 1.16.3 reserves 1/2048 of the top for each when RAM lies above 4 GiB. An exact or
near-exact window then places one BAR fewer (fw-lab runs in tests/planner/hotplug_pad_runs.json);
on an edk2 build not measured the verdict there is "must be measured". GPU entries count as
holding their port (the pcie rule gives them pcie=1 on q35).

On i440fx Proxmox adds two SHPC pci-bridges (pci.1, pci.2) to every machine from 2.3 on, which
OVMF pads the same way (fw-lab, --machine pc: 1x128G in an exact 128 GiB window placed alone,
not with the two bridges). What SeaBIOS gives them with RAM above 4 GiB is not measured: there
the verdict is "must be measured".

OVMF can run out of I/O port space before the window: each root port whose GPU has an I/O BAR
and each pci-bridge with a device that has one (every virtio function there is transitional)
takes a 4 KiB I/O window, and where they do not fit OVMF drops the device that takes the most
resources, a GPU. fw-lab on edk2 2022.11 and 2025.02 dropped one at 10 windows and placed all at
9 (tests/planner/io_space_runs.json; pvefix/planner/io_space.py): bar.io-space says so.

Sizes count hostpci ENTRIES: a `mapping=` entry passes one device of its pool, picked at start,
and is sized by its largest candidate. Each device counts as one block of its 64-bit BARs' sum
rounded up to a power of two: its root port's window is aligned to its largest BAR, so a GPU
with a 128 GiB and a 32 MiB BAR takes 256 GiB of the window (SeaBIOS pciinit.c sizes it so).

Inside the guest, on q35 each GPU sits behind its own root port whose bridge window the Linux
kernel sizes; `pci=realloc` lets it resize those windows. It cannot grow the window the firmware
gives, so it never replaces the VM-side fix, and it is a Linux option: Windows guests get the
VM-side fix only; a guest whose OS pvefix does not know gets a finding, not a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pvefix.cmdline import Cmdline, GrubDefaultFile, ensure_pci_option, pci_realloc_state
from pvefix.errors import PvefixError
from pvefix.paths import CPU_MODELS, GRUB_DEFAULT
from pvefix.planner import bar_verdict, io_space, mmio
from pvefix.planner.context import Context, Passed, bar64_total
from pvefix.planner.model import (
    Change,
    Finding,
    GuestCmdlineChange,
    ManualChange,
    Risk,
    RuleResult,
    VmConfigChange,
)
from pvefix.vmconfig import Machine

NAME = "bar-space"
GiB = mmio.GiB
LARGE_BAR = 8 * GiB
fmt = mmio.fmt_size


def _firmware(ctx: Context) -> mmio.Firmware:
    return "ovmf" if (ctx.value("bios") or "seabios") == "ovmf" else "seabios"


def _version(ctx: Context, firmware: mmio.Firmware) -> str | None:
    """The firmware build the VM's next start runs: OVMF's depends on its efidisk0's efitype
    (mmio.ovmf_build), SeaBIOS is pve-qemu-kvm's."""
    node = ctx.state.node
    if firmware == "ovmf":
        return mmio.ovmf_build(node.edk2_version, ctx.value("efidisk0"))
    return mmio.seabios_of(node.qemu_version)


def _pow2(size: int) -> int:
    return 1 << max(size - 1, 1).bit_length()


def _kvm_may_report_guest_bits(ctx: Context) -> bool:
    """QEMU 9.0+ passes KVM's guest-phys-bits to the vCPU (target/i386/kvm/kvm-cpu.c), which
    Linux 6.10+ reports; OVMF (edk2 >= 202408) then trusts any width. Unknown versions: maybe."""
    node = ctx.state.node
    qemu = re.match(r"(\d+)", node.qemu_version or "")
    kernel = re.match(r"(\d+)\.(\d+)", node.kernel_version or "")
    return (qemu is None or int(qemu.group(1)) >= 9) and (
        kernel is None or (int(kernel.group(1)), int(kernel.group(2))) >= (6, 10))


@dataclass(frozen=True)
class Vm:
    """What the verdict needs of this VM besides its cpu line and X-PciMmio64Mb."""

    firmware: mmio.Firmware
    version: str | None
    vendor: bar_verdict.Vendor | None
    ram: int
    bars: tuple[int, ...]
    machine: str
    kvm_guest_bits: bool
    others64: int = 0  # the window space its other devices' 64-bit BARs take (mmio.py)
    padded_buses: int = 0  # its hotplug-capable bridges the firmware pads (mmio.hotplug_buses)

    def shapes(self, ctx: Context, cpu: mmio.CpuLine,
               mmio64_mb: int | None) -> list[tuple[str, bar_verdict.Shape]] | None:
        """The VM as the firmware may see it with `cpu`, one shape per reading of what is not
        known (1 GiB pages of a model pvefix does not know; guest-phys-bits from KVM); None
        when the vCPU's width is the host's and not known."""
        node = ctx.state.node
        bits = mmio.guest_bits(cpu, node.cpu_phys_bits)
        if bits is None or cpu.custom_unknown:
            return None
        one_g = mmio.has_1g_pages(cpu, node.cpu_flags)
        own = cpu.prop.get("guest-phys-bits")
        gpbs: list[int | None] = [int(own)] if own and own.isdigit() else (
            [None, bits] if self.kvm_guest_bits else [None])
        out = []
        for pdpe1gb in ([one_g] if one_g is not None else [False, True]):
            for gpb in gpbs:
                label = (f"{'with' if pdpe1gb else 'without'} 1 GiB pages" if one_g is None
                         else "") + (f", KVM reporting guest-phys-bits {gpb}" if gpb and not own
                                     else "")
                out.append((label.strip(", ") or "as read", bar_verdict.Shape(
                    self.firmware, self.version, self.vendor, bits, pdpe1gb, self.ram,
                    self.bars, self.machine, gpb,
                    mmio64_mb if self.firmware == "ovmf" else None, self.others64,
                    self.padded_buses)))
        return out

    def judge(self, ctx: Context, cpu: mmio.CpuLine, mmio64_mb: int | None) -> Judged | None:
        """The verdict for `cpu`; None when the vCPU's width is the host's and not known."""
        shapes = self.shapes(ctx, cpu, mmio64_mb)
        if shapes is None:
            return None
        verdict = bar_verdict.combine([(label, bar_verdict.verdict(s)) for label, s in shapes])
        return Judged(verdict, shapes[0][1].phys_bits, cpu)


@dataclass(frozen=True)
class Judged:
    verdict: bar_verdict.Verdict
    bits: int
    cpu: mmio.CpuLine

    def describe(self) -> str:
        return f"{self.bits} phys-bits: {self.verdict.why}"


def _vm(ctx: Context, bars: tuple[int, ...], firmware: mmio.Firmware) -> Vm:
    cpu_vendor = ctx.state.node.cpu_vendor
    vendor: bar_verdict.Vendor | None = (
        "amd" if cpu_vendor == "AuthenticAMD"
        else "intel" if cpu_vendor == "GenuineIntel" else None)
    judged = judged_machine(ctx)
    q35 = judged.family == "q35"
    version = mmio.machine_version(judged.type)
    machine = "q35" if q35 else "pc"
    if judged.version:
        machine = f"pc-{'q35' if machine == 'q35' else 'i440fx'}-{judged.version}"
    return Vm(firmware, _version(ctx, firmware), vendor,
              mmio.ram_bytes(ctx.value("memory")), bars, machine,
              _kvm_may_report_guest_bits(ctx),
              mmio.OTHER_BAR * len(mmio.virtio_functions(ctx.values, q35, version)),
              mmio.hotplug_buses(q35, _port_holders(ctx), version, ctx.values))


def judged_machine(ctx: Context) -> Machine:
    """The machine the verdict judges: the one the plan leaves, so q35 where the q35 rule
    moves an i440fx VM with GPU entries (not with legacy-igd, which stays on i440fx)."""
    machine = ctx.machine
    if (machine.family == "i440fx" and not ctx.machine_error and ctx.gpu_entries
            and not any(p.entry.legacy_igd for p in ctx.passed)):
        return Machine.parse(machine.to_q35())
    return machine


def judged_label(ctx: Context) -> str:
    """How the evidence names the machine judged: today's, or the q35 the plan moves to."""
    judged = judged_machine(ctx)
    return "today" if judged.family == ctx.machine.family else f"on {judged.type} (planned)"


def _port_holders(ctx: Context) -> set[int]:
    """The N of each `hostpciN` that sits on a root port of its own: `pcie=1` entries, and the
    GPU entries, which the pcie rule gives pcie=1 on q35 (its plan is the state judged)."""
    out = set()
    for p in ctx.passed:
        index = p.key.removeprefix("hostpci")
        if index.isdigit() and (p.entry.pcie or p.is_gpu):
            out.add(int(index))
    return out


def rule(ctx: Context) -> RuleResult:
    result = _rule(ctx)
    planned = next((c.after for c in result.changes
                    if c.target == "vm-config" and c.key == "cpu"), ctx.value("cpu"))
    cpu = mmio.read_cpu(planned)
    if not mmio.proxmox_warns_40_bits(_firmware(ctx), cpu, ctx.state.node.cpu_phys_bits):
        return result
    warning = Finding(
        id="bar.ovmf-40-bit-warning", rule=NAME, severity="info",
        title="Proxmox warns at each start: OVMF might limit phys-bits to 40",
        detail=f"With cpu: {planned} on OVMF, qemu-server logs \"OVMF firmware might limit CPU"
        " 'phys-bits' to 40 - enable the 'pdpe1gb' CPU flag\" at every start (CPUConfig.pm"
        " check_phys_bits_above_40_compat: a qemu64/kvm64-based model, phys-bits above 40, no"
        " +pdpe1gb). OVMF does cap the guest's address space at 40 bits (1 TiB) without 1 GiB"
        " pages; that matters only when RAM plus the GPUs' BARs need more, which this rule"
        " checks. Adding +pdpe1gb to the cpu flags silences it where the host CPU has pdpe1gb.",
        evidence=[f"cpu: {planned}", "bios: ovmf"])
    return result.model_copy(update={"findings": [*result.findings, warning]})


def _rule(ctx: Context) -> RuleResult:
    if not ctx.passed:
        return RuleResult(rule=NAME, noop="no hostpci entries")
    entries = ctx.gpu_entries
    unknown = ctx.unknown_entries
    findings: list[Finding] = []
    if unknown:
        findings.append(_unknown_finding(ctx))
    if not entries:
        if unknown:
            return RuleResult(
                rule=NAME,
                noop="the passed devices are not in the facts read here; BAR sizes unknown",
                findings=findings)
        return RuleResult(rule=NAME, noop=ctx.no_gpu_reason().replace(
            "no GPU is passed through", "no GPU among the passed devices"))
    sized = [(p, d) for p in entries for d in p.sized]
    total64 = sum(bar64_total(d) for _, d in sized)
    largest = max((b.size for _, d in sized for b in d.bars if b.is_64bit), default=0)
    guest = ctx.state.guest
    bar_errors = list(guest.bar_errors) if guest else []
    if largest < LARGE_BAR and not bar_errors and not unknown:
        return RuleResult(
            rule=NAME, noop=f"largest GPU BAR is {fmt(largest)}: fits any guest MMIO window",
            findings=findings)
    vm, cpu, mmio64_mb = window_inputs(ctx)
    above = _above_host(ctx, cpu)
    # args' -cpu that pvefix cannot read is the VM's CPU: its width is unknown, not kvm64's
    unread = ctx.args_cpu is not None and ctx.cpu is None
    now = None if above is not None or unread else vm.judge(ctx, cpu, mmio64_mb)
    evidence = _evidence(ctx, entries, vm, total64, largest, cpu, mmio64_mb, now)
    changes: list[Change] = []
    if above is not None:
        findings.append(above.model_copy(update={"evidence": evidence}))
    elif now is None:
        findings.append(_width_unknown(ctx, cpu, total64, evidence))
    elif now.verdict.outcome == "must-be-measured":
        findings.append(_unverified(ctx, vm, now, evidence))
    elif now.verdict.outcome != "fits":
        change, more = _window_change(ctx, vm, now, mmio64_mb, evidence)
        findings += more
        if change is not None:
            changes.append(change)
    io = _io_space(ctx, vm, evidence)
    if io is not None:
        findings.append(io)
    realloc_changes, realloc_findings = _guest_side(ctx, evidence, bar_errors, largest)
    changes += realloc_changes
    findings += realloc_findings
    if not changes:
        noop = _noop(above, now, findings, evidence, judged_label(ctx))
        if unknown:  # their BARs are in no sum: no verdict covers them
            noop = (f"not established: the BARs of {', '.join(p.key for p in unknown)} are"
                    f" unknown here (not in the facts read); of the others: {noop}")
        return RuleResult(rule=NAME, noop=noop, findings=findings)
    return RuleResult(rule=NAME, changes=changes, findings=findings,
                      guest_files_after=_guest_files_after(ctx, changes))


def _noop(above: Finding | None, now: Judged | None, findings: list[Finding],
          evidence: list[str], where: str = "today") -> str:
    """Why no change is planned, from what the rule found."""
    if above is not None:
        return f"no BAR verdict: {above.title}"
    if any(f.id == "bar.window-unverified" for f in findings):
        return "whether the GPU BARs fit is not known until measured (see findings)"
    if any(f.id == "bar.guest-unknown" for f in findings):
        return "the MMIO window is large enough; the guest's cmdline is out of reach"
    if any(f.severity == "error" for f in findings):
        return "no VM config change can make the BARs fit (see findings)"
    if any(f.id == "bar.io-space" for f in findings) and now is not None and (
            now.verdict.outcome == "fits"):
        return ("the 64-bit window holds the GPU BARs, but OVMF's I/O port space may not"
                " hold the VM's I/O windows, and OVMF then drops a GPU (see findings)")
    if now is not None and now.verdict.outcome != "fits":
        said = "as configured" if where == "today" else where
        return (f"the GPU BARs do not fit {said} ({now.describe()}); the way out"
                " is args, which pvefix does not write (see findings)")
    return f"GPU BARs fit: {'; '.join(evidence)}"


def window_inputs(ctx: Context) -> tuple[Vm, mmio.CpuLine, int | None]:
    """The VM as bar-space judges it: sizes, firmware, vCPU, X-PciMmio64Mb (the firmware
    conformance test boots the same shapes)."""
    sized = [d for p in ctx.gpu_entries for d in p.sized]
    bars = tuple(_pow2(bar64_total(d)) for d in sized if bar64_total(d))
    vm = _vm(ctx, bars, _firmware(ctx))
    cpu = mmio.read_cpu(ctx.cpu, ctx.cpu_models)  # args' -cpu when there is one
    return vm, cpu, mmio.mmio64_mb_of(ctx.value("args"))


def _above_host(ctx: Context, cpu: mmio.CpuLine) -> Finding | None:
    """phys-bits set above the host's address width: QEMU only warns ("Host physical bits
    does not match phys-bits property", target/i386/host-cpu.c) and starts, the firmware then
    places BARs at guest addresses the host cannot map (EPT/NPT reach only the host's width),
    so no window verdict holds: flagged, never "fits". A guest-phys-bits at or below the
    host's does not clear it: SeaBIOS and OVMF before edk2 202408 place the window by
    phys-bits alone. What the guest can use is `bar_verdict.usable_phys_bits` (the lowest of
    phys-bits, the host's and guest-phys-bits), the one place that says it."""
    host = ctx.state.node.cpu_phys_bits
    phys = cpu.phys
    if host is None or not phys or not phys.isdigit():
        return None
    own = cpu.prop.get("guest-phys-bits")
    gpb = int(own) if own and own.isdigit() and int(own) > 0 else None
    if int(phys) <= (bar_verdict.usable_phys_bits(int(phys), host) or 0):
        return None
    usable = bar_verdict.usable_phys_bits(int(phys), host, gpb)
    said = f"phys-bits={phys}" + (f" (guest-phys-bits={gpb})" if gpb is not None else "")
    return Finding(
        id="bar.phys-bits-above-host", rule=NAME, severity="error",
        title=f"{said} is above the host's {host} address bits",
        detail=f"The vCPU reports {phys} address bits on a host that has {host}; the guest can"
        f" use {usable} (the lowest of phys-bits, the host's and guest-phys-bits). QEMU starts"
        " it with a warning, and the firmware may place the 64-bit window, and the GPUs' BARs,"
        f" above {host} bits, where the host cannot map them (guest-phys-bits holds back only"
        " OVMF from edk2 202408 on); the guest then hangs or the GPU fails. Set"
        f" phys-bits={host} or phys-bits=host in `cpu` (pvefix does not judge a window it"
        " cannot map).")


def _evidence(ctx: Context, entries: list[Passed], vm: Vm, total64: int, largest: int,
              cpu: mmio.CpuLine, mmio64_mb: int | None, now: Judged | None) -> list[str]:
    node = ctx.state.node
    fw = vm.firmware.upper() + (f" {vm.version}" if vm.version else ", version not read")
    evidence = [
        f"{len(entries)} GPU entr{'y' if len(entries) == 1 else 'ies'}, 64-bit BARs"
        f" {fmt(total64)} in all, largest {fmt(largest)}",
        f"guest RAM {fmt(vm.ram)}; firmware {fw}"
        + (f" (X-PciMmio64Mb={mmio64_mb})" if mmio64_mb and vm.firmware == "ovmf" else ""),
        f"cpu: {cpu.raw}" if cpu.raw else
        f"args: -cpu {ctx.args_cpu} (QEMU keeps the last -cpu; pvefix cannot read it)"
        if ctx.args_cpu is not None else "no cpu line (kvm64)"]
    if cpu.model is not None:
        m = cpu.model
        evidence.append(f"custom model {m.name} ({CPU_MODELS}): reported-model"
                        f" {m.reported_model}, phys-bits {m.phys_bits or 'unset'}, flags"
                        f" {';'.join(m.flags) or 'none'}, hidden {int(bool(m.hidden))}")
    if now is not None:
        evidence.append(f"{judged_label(ctx)}: {now.describe()}")
    if node.cpu_phys_bits is not None:
        evidence.append(f"host {node.name}: {node.cpu_phys_bits} address bits")
    pools = [p for p in entries if p.is_pool and len(p.devices) > 1]
    if pools:
        by_map: dict[str, list[str]] = {}
        for p in pools:
            by_map.setdefault(f"{p.entry.mapping} ({len(p.devices)} devices)", []).append(p.key)
        evidence.append(
            "a mapping entry passes ONE device of its pool, picked at start, and is sized by its"
            " largest candidate: "
            + "; ".join(f"mapping {m}: {', '.join(keys)}" for m, keys in by_map.items()))
    return evidence


def _width_unknown(ctx: Context, cpu: mmio.CpuLine, total64: int,
                   evidence: list[str]) -> Finding:
    node = ctx.state.node.name
    if ctx.args_cpu is not None and ctx.cpu is None:
        detail = (f"args sets the VM's CPU, `-cpu {ctx.args_cpu}`, with a property pvefix does"
                  " not read (QEMU keeps the last -cpu, so `cpu` does not decide): the vCPU's"
                  " address width, and so the window, is not known; the verdict must be"
                  f" measured: `pvefix rehearse {ctx.state.vm.vmid}`, or boot the VM and check"
                  " the guest's `dmesg | grep -i 'BAR .*no space'`.")
    elif cpu.custom_unknown:
        detail = (f"cpu: {cpu.cputype} is a custom model whose definition was not read: read"
                  f" {CPU_MODELS} on {node} (its phys-bits, flags and reported-model decide the"
                  " vCPU's address width); the window verdict must be measured until then:"
                  f" `pvefix rehearse {ctx.state.vm.vmid}` boots the firmware on {node} with"
                  " the model as Proxmox resolves it (docs/rehearse.md).")
    else:
        detail = ("The VM uses the host's phys-bits, which are not in the facts read; check"
                  f" `grep -m1 'address sizes' /proc/cpuinfo` on {node}: RAM plus"
                  f" {fmt(total64)} of BARs must fit.")
    return Finding(id="bar.window-unverified", rule=NAME, severity="info",
                   title="The 64-bit MMIO window depends on facts not read", detail=detail,
                   evidence=evidence)


def _io_space(ctx: Context, vm: Vm, evidence: list[str]) -> Finding | None:
    """OVMF's I/O port space, measured to run out at 10 bridge I/O windows (io_space.py)."""
    if vm.firmware != "ovmf":
        return None
    q35 = judged_machine(ctx).family == "q35"
    w = io_space.io_windows(ctx, q35, _port_holders(ctx) if q35 else set())
    if w.count < io_space.IO_WINDOWS_DROPPED:
        return None
    measured = io_space.edk2_measured(vm.version)
    parts = ([f"{len(w.ports)} root ports whose GPU has an I/O BAR ({', '.join(w.ports)})"]
             if w.ports else []) + (
        [f"{len(w.bridges)} pci-bridges with a device that has one ({', '.join(w.bridges)})"]
        if w.bridges else [])
    return Finding(
        id="bar.io-space", rule=NAME, severity="warning",
        title=f"OVMF's I/O port space may not hold the VM's {w.count} I/O windows",
        detail=f"At the next start {' and '.join(parts)} each take a 4 KiB I/O window (a"
        " virtio function behind a pci-bridge is transitional, with a legacy I/O BAR). When"
        " the windows do not fit, OVMF drops the device that takes the most resources, a GPU,"
        " and its BARs are never programmed."
        + (f" fw-lab measured that at {io_space.IO_WINDOWS_DROPPED} windows on OVMF"
           f" {vm.version} (and every BAR placed at {io_space.IO_WINDOWS_PLACED});"
           if measured else
           f" fw-lab measured it at {io_space.IO_WINDOWS_DROPPED} windows on edk2 2022.11 and"
           f" 2025.02, not on OVMF {vm.version or '(version not read)'}: must be measured;")
        + f" rehearse it: `pvefix rehearse {ctx.state.vm.vmid}` boots the firmware with"
        " stand-ins that copy each GPU's I/O BAR, beside the VM's virtio functions. Fewer"
        " windows: the VM's devices on fewer pci-bridges (the balloon, the agent, virtio0-5,"
        " net0-5 and virtio-scsi-pci's controller sit on pci.0; rng0 and net6+ on pci.1,"
        " virtio6+ on pci.2, virtio-scsi-single's controllers on pci.3).",
        evidence=[*evidence, f"I/O windows: {w.count} (root ports {len(w.ports)},"
                  f" pci-bridges {len(w.bridges)})"],
    )


def _unverified(ctx: Context, vm: Vm, now: Judged, evidence: list[str]) -> Finding:
    node = ctx.state.node.name
    read = []
    if vm.version is None or not bar_verdict.version_known(vm.firmware, vm.version):
        read.append("`pveversion -v | grep -E 'pve-edk2-firmware|pve-qemu-kvm'`"
                    if vm.version is None else f"which {vm.firmware.upper()} build"
                    f" {vm.version} is (not one fw-lab measured)")
    return Finding(
        id="bar.window-unverified", rule=NAME, severity="warning",
        title="Whether the firmware places the BARs must be measured",
        detail=f"With {now.bits} phys-bits {now.verdict.why}."
        + (f" Read on {node}: {'; '.join(read)}." if read else "")
        + f" Until then the verdict must be measured: rehearse it, `pvefix rehearse"
        f" {ctx.state.vm.vmid}` (the firmware booted on {node} with a stand-in of each GPU's"
        " BAR size; docs/rehearse.md), or boot the VM and check the guest's"
        " `dmesg | grep -i 'BAR .*no space'`.",
        evidence=evidence)


def guest_grub_after(text: str, path: str = GRUB_DEFAULT) -> str:
    """The guest's GRUB defaults file with pci=realloc in effect: GrubDefaultFile handles the
    quoting, `pci=realloc=off` and the rest of the file as for the host (ParseError if it
    cannot)."""
    grub = GrubDefaultFile.parse(text, f"guest {path}")
    grub.ensure_pci_option("realloc")
    return grub.render()


def _guest_files_after(ctx: Context, changes: list[Change]) -> dict[str, str]:
    """The guest files a guest-cmdline change rewrites, whole, as they will read afterwards (a
    file pvefix did not read, or cannot parse, is left out: apply then refuses to edit it)."""
    guest = ctx.state.guest
    out: dict[str, str] = {}
    for c in changes:
        fact = guest.files.get(c.file) if guest is not None and c.file else None
        if c.target != "guest-cmdline" or fact is None or fact.text is None:
            continue
        try:
            out[c.file] = guest_grub_after(fact.text, c.file)
        except PvefixError:
            continue
    return out


def _unknown_finding(ctx: Context) -> Finding:
    node = ctx.state.node.name
    keys = [p for p in ctx.unknown_entries]
    return Finding(
        id="devices.unknown-here", rule=NAME, severity="warning",
        title="Passed devices are not in the facts read",
        detail=f"{', '.join(p.key for p in keys)} name devices that the facts read from {node} do"
        " not hold (a VM of another node, or a bundle of another host?). pvefix cannot size"
        " their BARs or tell whether they are GPUs; read the VM's own node (pvefix plan on"
        " the node the VM lives on, or a bundle collected there).",
        evidence=[f"{p.key}: {p.entry.raw}" + (f" ({p.problem})" if p.problem else "")
                  for p in keys])


def _now_finding(ctx: Context, now: Judged, evidence: list[str]) -> Finding | None:
    """What today's verdict means, when QEMU refuses the VM or the firmware hangs."""
    v = now.verdict
    if v.outcome == "qemu-refuses":
        return Finding(
            id="bar.ram-exceeds-phys-bits", rule=NAME, severity="error",
            title=f"RAM exceeds the address space of {now.bits} phys-bits",
            detail=f"{v.why}: QEMU (7.1 and later) counts the RAM's end plus the 64-bit PCI hole"
            " (32 GiB on q35, 2 GiB on i440fx; hw/i386/pc.c pc_memory_init)"
            + ("; the running instance predates this config or that QEMU." if ctx.running
               else "."),
            evidence=evidence)
    if v.outcome == "firmware-hangs":
        return Finding(
            id="bar.firmware-hangs", rule=NAME, severity="error",
            title="This VM will not boot: OVMF hangs",
            detail=f"{v.why} (edk2 MemDetect.c: the classic window must fit the width OVMF"
            " trusts; fw-lab runs D06, D09, D12, G04, G05 hang with no output).",
            evidence=evidence)
    return None


def _cpu_candidate(ctx: Context, vm: Vm, now: Judged) -> tuple[str, bool] | None:
    """The cpu line phys-bits=host (+pdpe1gb on OVMF), and whether +pdpe1gb was added; None
    when it would start the same vCPU (a restart for nothing) or the model is the host's."""
    cpu = now.cpu
    if cpu.host_like and cpu.phys in (None, "host"):
        return None
    prop = mmio.read_cpu(cpu.raw).prop
    prop.set("phys-bits", "host")
    add_1g = vm.firmware == "ovmf" and cpu.qemu64_family and cpu.flag("pdpe1gb") != "+"
    if add_1g:
        prop.set("flags", ";".join(mmio.with_flag(cpu, "pdpe1gb")))
    after = prop.render()
    if mmio.read_cpu(after, ctx.cpu_models).qemu_cpu() == cpu.qemu_cpu():
        return None
    return after, add_1g


def _window_change(ctx: Context, vm: Vm, now: Judged, mmio64_mb: int | None,
                   evidence: list[str]) -> tuple[Change | None, list[Finding]]:
    """The cpu-line change that makes RAM and BARs fit, or findings saying what does."""
    node = ctx.state.node
    findings = [f for f in [_now_finding(ctx, now, evidence)] if f is not None]
    candidate = _cpu_candidate(ctx, vm, now)
    mmio_fix = _mmio64_fix(ctx, vm, now, mmio64_mb)
    new = None
    if candidate is not None:
        after, add_1g = candidate
        if add_1g and node.cpu_flags is not None and "pdpe1gb" not in node.cpu_flags:
            findings.append(_no_1g_pages(ctx, evidence))
            if mmio_fix is not None:
                findings.append(mmio_fix.model_copy(update={"severity": "warning"}))
            return None, findings
        new = vm.judge(ctx, mmio.read_cpu(after, ctx.cpu_models), mmio64_mb)
    if candidate is None or (new is not None and new.verdict.outcome not in (
            "fits", "must-be-measured")):
        if mmio_fix is not None:
            return None, [*findings, mmio_fix.model_copy(update={"severity": "warning"})]
        setting = "phys-bits=host" if candidate is not None else "the host's phys-bits"
        findings.append(_too_small(new or now, setting, evidence))
        return None, findings
    if mmio_fix is not None:
        findings.append(mmio_fix)
    findings.append(_cpu_host_alternative())
    return _cpu_change(ctx, now, new, candidate, evidence), findings


def _no_1g_pages(ctx: Context, evidence: list[str]) -> Finding:
    return Finding(
        id="bar.host-no-1g-pages", rule=NAME, severity="error",
        title="The host CPU offers no 1 GiB pages (pdpe1gb)",
        detail=f"OVMF needs 1 GiB pages to go past 40 phys-bits, and {ctx.state.node.name}'s CPU"
        " flags lack pdpe1gb; Proxmox starts QEMU with `enforce`, so +pdpe1gb would stop the VM"
        " from starting. SeaBIOS 1.16.3 with phys-bits of 41 or more (no 1 GiB-page cap) is the"
        " remaining way.",
        evidence=evidence)


def _too_small(judged: Judged, setting: str, evidence: list[str]) -> Finding:
    """Neither a cpu line nor X-PciMmio64Mb makes RAM and BARs fit: what remains is said."""
    gpb = judged.cpu.prop.get("guest-phys-bits")
    capped = (f" guest-phys-bits={gpb} caps the width OVMF uses (edk2 202408 and later read it):"
              " a larger value (vIOMMU aw-bits must cover it) widens the window." if gpb else "")
    return Finding(
        id="bar.window-too-small", rule=NAME, severity="error",
        title=f"The GPUs' BARs do not fit even with {setting}",
        detail=f"With {judged.describe()}; no X-PciMmio64Mb fits either.{capped} Otherwise fewer"
        " GPUs or less RAM in this VM is what remains.",
        evidence=evidence)


def _cpu_host_alternative() -> Finding:
    return Finding(
        id="bar.cpu-host-alternative", rule=NAME, severity="info", title="Alternative: cpu: host",
        detail="`cpu: host` also reports the host's phys-bits and its 1 GiB pages; it shows the"
        " guest the exact host CPU (every flag), so the VM can only move to hosts with the same"
        " CPU, and guest software may behave per host model.")


def _cpu_change(ctx: Context, now: Judged, new: Judged | None, candidate: tuple[str, bool],
                evidence: list[str]) -> Change:
    node = ctx.state.node
    after, add_1g = candidate
    ram = fmt(mmio.ram_bytes(ctx.value("memory")))
    why = (
        f"With {now.describe()}, the guest cannot hold {ram}"
        " of RAM and the GPUs' BARs. phys-bits=host gives the vCPU the host's address width"
        + (", and +pdpe1gb gives it 1 GiB pages, without which OVMF caps phys-bits at 40"
           " (Proxmox warns of exactly this for qemu64/kvm64 models on OVMF)." if add_1g else "."))
    risk = ["phys-bits=host breaks live migration to hosts with another address width (a VM with"
            " passthrough cannot live-migrate anyway)."]
    if add_1g:
        risk.append(
            "+pdpe1gb needs 1 GiB-page support in the host CPU"
            + (f" ({node.name} has it)." if node.cpu_flags is not None
               else f": check `grep -wm1 pdpe1gb /proc/cpuinfo` on {node.name}; Proxmox starts"
               " QEMU with `enforce`, so without it the VM does not start."))
    if new is None:
        risk.append(f"The host's address width is not in the facts read; it decides the window:"
                    f" check `grep -m1 'address sizes' /proc/cpuinfo` on {node.name}.")
    elif new.verdict.outcome == "must-be-measured":
        # VM config changes are phase 1 (planner/plan.py PHASE_SLOTS).
        risk.append(f"Not established: {new.verdict.why}; rehearse it before applying:"
                    f" `pvefix rehearse {ctx.state.vm.vmid} --phase 1` (or `pvefix apply"
                    f" {ctx.state.vm.vmid} --phase 1 --rehearse`).")
    after_text = new.describe() if new is not None else "the host's phys-bits"
    return VmConfigChange(
        id="vm.cpu.phys-bits", rule=NAME, key="cpu", before=now.cpu.raw, after=after, reason=why,
        risk=Risk(level="low" if node.cpu_flags is not None or not add_1g else "medium",
                  text=" ".join(risk)),
        evidence=[*evidence, f"after: {after_text}"],
        inverse=f"cpu: {now.cpu.raw}" if now.cpu.raw else "delete the cpu key",
        disruption="vm-restart", effect=f"At the next cold start the vCPU reports {after_text}.")


def _mmio64_fix(ctx: Context, vm: Vm, now: Judged, mmio64_mb: int | None) -> Finding | None:
    """OVMF's X-PciMmio64Mb sized to the BARs (a power of two, at least 32 GiB), offered only
    where the verdict says the firmware then places them (it sizes the window; it cannot widen
    the address space; one that does not fit hangs OVMF)."""
    if vm.firmware != "ovmf" or now.verdict.outcome == "qemu-refuses":
        return None
    if mmio64_mb is not None:
        gone = _mmio64_removed(ctx, vm, now, mmio64_mb)
        if gone is not None:
            return gone
    need = sum(vm.bars) + vm.others64
    if vm.padded_buses:  # each hotplug-capable bridge takes 1/256 of the window (bar_verdict)
        need += vm.padded_buses * bar_verdict.hotplug_pad(_pow2(need))
    size = max(_pow2(need), 32 * GiB)
    mb = size >> 20
    if mb == mmio64_mb:
        return None
    trial = vm.judge(ctx, now.cpu, mb)
    if trial is None or trial.verdict.outcome != "fits":
        return None
    line = f"-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string={mb}"
    how = f"replace X-PciMmio64Mb={mmio64_mb} by" if mmio64_mb else "add to args:"
    return _mmio64_offer(
        ctx, "OVMF's X-PciMmio64Mb of the right size fits",
        f"Keeping the cpu line, {how} {line} ({fmt(size)}): {trial.describe()}."
        " From edk2 2025.02 the value is the exact window (a smaller one replaces the 1/8"
        " dynamic window), before it a minimum; `args` is root@pam only.")


def _mmio64_removed(ctx: Context, vm: Vm, now: Judged, mmio64_mb: int) -> Finding | None:
    """Where OVMF's own window (X-PciMmio64Mb removed) places every BAR: offer that."""
    trial = vm.judge(ctx, now.cpu, None)
    if trial is None or trial.verdict.outcome != "fits":
        return None
    line = f"-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string={mmio64_mb}"
    return _mmio64_offer(
        ctx, "Without X-PciMmio64Mb OVMF's own window fits",
        f"Keeping the cpu line, remove {line} from args: {trial.describe()}. From edk2"
        " 2025.02 the value is the exact window, which replaces the larger 1/8 dynamic one;"
        " `args` is root@pam only.")


def _mmio64_offer(ctx: Context, title: str, detail: str) -> Finding:
    """The one info finding that offers an X-PciMmio64Mb edit (a size, or its removal)."""
    return Finding(id="bar.ovmf-mmio64", rule=NAME, severity="info", title=title,
                   detail=detail, evidence=[f"args: {ctx.value('args') or '(none)'}"])


def _guest_side(ctx: Context, evidence: list[str], bar_errors: list[str],
                largest: int) -> tuple[list[Change], list[Finding]]:
    """pci=realloc in a Linux guest; a finding for a guest whose OS pvefix does not know."""
    guest = ctx.state.guest
    q35_planned = ctx.machine.family != "q35"
    behind_ports = ctx.machine.family == "q35" or q35_planned
    if not (bar_errors or (behind_ports and largest >= LARGE_BAR)):
        return [], []
    if ctx.is_windows:
        return [], []
    if ctx.os_unknown:
        return [], [
            Finding(
                id="bar.guest-os-unknown", rule=NAME, severity="info",
                title="Guest OS not known: pci=realloc not planned",
                detail=f"ostype is '{ctx.ostype}'. If the guest is Linux, it should boot with"
                " pci=realloc (the kernel then resizes the root ports' bridge windows); set"
                " `ostype: l26` (or give pvefix a way into the guest) and plan again.")]
    guest_line = guest.cmdline if guest and guest.cmdline is not None else None
    realloc = pci_realloc_state(Cmdline.parse(guest_line)) if guest_line is not None else None
    if guest_line is None and not bar_errors and not q35_planned:
        # Already q35 and nothing seen in the guest: pvefix cannot tell whether the guest boots
        # with pci=realloc, so it says so instead of planning the same manual step forever.
        return [], [
            Finding(
                id="bar.guest-unknown", rule=NAME, severity="info", title="Guest cmdline not known",
                detail="The GPUs have large BARs behind q35 root ports; check that the guest boots"
                " with pci=realloc and logs no BAR errors (`cat /proc/cmdline`, `dmesg | grep"
                " -i BAR`), or give pvefix a way into the guest (or a probe report).",
                evidence=evidence)]
    if realloc == "on":
        return [], []
    return [_realloc_change(ctx, evidence, bar_errors, guest_line, realloc)], []


def _realloc_change(ctx: Context, evidence: list[str], bar_errors: list[str],
                    guest_line: str | None, realloc: str | None) -> Change:
    """pci=realloc added to the guest's command line: by pvefix where it has a way into the
    guest, else as the steps to do there."""
    ev = list(evidence)
    ev += [f"guest kernel: {e}" for e in bar_errors[:5]]
    if guest_line is not None:
        ev.append(f"guest /proc/cmdline: {guest_line}")
    after_line = None
    if guest_line is not None:
        line = Cmdline.parse(guest_line)
        ensure_pci_option(line, "realloc")
        after_line = line.render()
    reason = (
        "The guest kernel must size a bridge window for each GPU's root port; pci=realloc lets"
        " it resize windows the firmware made too small."
        + (" BAR assignment errors were seen in the guest." if bar_errors else "")
        + (" pci=realloc=off is set today and forbids it." if realloc == "off" else ""))
    common = dict(
        rule=NAME, key="pci", before=guest_line, reason=reason,
        risk=Risk(
            level="low",
            text="Only the guest kernel is affected; a wrong grub edit in the guest is the"
            " main risk (keep console access)."),
        evidence=ev, disruption="guest-reboot",
        effect="Lets the guest re-place BARs inside the MMIO window; it cannot grow the window"
        " itself (that is the VM-side phys-bits fix).")
    if ctx.state.access.guest is not None:
        return GuestCmdlineChange(
            id="guest.cmdline.pci_realloc", after=after_line or "pci=realloc",
            inverse="remove pci=realloc from the guest's GRUB_CMDLINE_LINUX_DEFAULT and"
            " run update-grub",
            file=GRUB_DEFAULT, refresh_command=["update-grub"], **common)
    return ManualChange(
        id="guest.cmdline.pci_realloc", after=after_line or "... pci=realloc",
        inverse="remove pci=realloc again and run update-grub in the guest",
        commands=[
            "# inside the guest, as root (Debian/Ubuntu):",
            "sed -n 's/^GRUB_CMDLINE_LINUX_DEFAULT=//p' /etc/default/grub",
            "# add pci=realloc inside those quotes (replace pci=realloc=off if"
            " present), e.g. with: editor /etc/default/grub",
            "update-grub",
            "# RHEL/Fedora/Rocky instead:",
            "grubby --update-kernel=ALL --args=pci=realloc",
            "# after the next boot, check:",
            "cat /proc/cmdline",
            'dmesg | grep -iE "BAR .*(no space|failed to assign)|NVRM: .*invalid"'],
        **common)
