"""BAR space in the guest: the 64-bit MMIO window (phys-bits, firmware) and `pci=realloc`.

Large-BAR GPUs need a large 64-bit MMIO window in the guest: an RTX PRO 6000 has a 128 GiB
BAR1, an H200 a 256 GiB BAR. The firmware places that window inside the guest-physical address
space, whose width is the vCPU's phys-bits; the sizes differ by firmware (pvefix/planner/mmio.py
has the rules and their sources):
- OVMF makes the window 1/8 of the address space, at its top (else the classic 32 GiB, or
  `X-PciMmio64Mb`, above RAM); it caps phys-bits at 46 with 4-level paging, and at 40 when the
  vCPU has no 1 GiB pages, which is the case for Proxmox's qemu64/kvm64 models (x86-64-v2,
  -v2-AES, -v3, -v4, kvm64, qemu64, no cpu line) unless `flags=+pdpe1gb` is set. Proxmox's own
  code warns of it: "OVMF firmware might limit CPU 'phys-bits' to 40", at every start of such a
  model with phys-bits above 40 and no +pdpe1gb; where the cpu line pvefix leaves (or writes)
  still draws that warning, the plan says so and whether the cap matters for this VM.
- SeaBIOS places a window the size of all 64-bit BARs at the top of the address space; only
  phys-bits matter, and X-PciMmio64Mb does not exist there.
- QEMU refuses to start a VM whose RAM does not fit under phys-bits ("phys-bits too low").
Named models report 40 phys-bits unless `phys-bits=` says otherwise; `cpu: host` and
`phys-bits=host` report the host's.

Sizes count hostpci ENTRIES: a `mapping=` entry passes one device of its pool, picked at start,
and is sized by its largest candidate.

Inside the guest, on q35 each GPU sits behind its own root port whose bridge window the Linux
kernel sizes; `pci=realloc` lets it resize those windows. It cannot grow the window the firmware
gives, so it never replaces the VM-side fix, and it is a Linux option: Windows guests get the
VM-side fix only; a guest whose OS pvefix does not know gets a finding, not a guess.
"""

from __future__ import annotations

from pvefix.cmdline import Cmdline, GrubDefaultFile, ensure_pci_option, pci_realloc_state
from pvefix.errors import PvefixError
from pvefix.paths import GRUB_DEFAULT
from pvefix.planner import mmio
from pvefix.planner.context import Context, bar64_total
from pvefix.planner.model import (
    Change,
    Finding,
    GuestCmdlineChange,
    ManualChange,
    Risk,
    RuleResult,
    VmConfigChange,
)

NAME = "bar-space"
GiB = mmio.GiB
LARGE_BAR = 8 * GiB
fmt = mmio.fmt_size


def _firmware(ctx: Context) -> mmio.Firmware:
    return "ovmf" if (ctx.value("bios") or "seabios") == "ovmf" else "seabios"


def _describe(w: mmio.Window) -> str:
    if w.guest_bits is None:
        return "the host's phys-bits (not in the facts read)"
    text = f"{w.guest_bits} phys-bits"
    if w.fw_bits is not None and w.fw_bits != w.guest_bits:
        text += f", {w.fw_bits} as {w.firmware.upper()} uses them"
    if w.firmware == "seabios" and w.guest_bits is not None:
        text += f" ({fmt(1 << w.guest_bits)} of address space; SeaBIOS puts the BARs at its top)"
    elif w.window is not None:
        text += f" (window: {fmt(w.window)})"
    return text


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
        evidence=[f"cpu: {planned}", "bios: ovmf"],
    )
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
                findings=findings,
            )
        return RuleResult(rule=NAME, noop="no GPU among the passed devices")
    sized = [(p, d) for p in entries for d in p.sized]
    total64 = sum(bar64_total(d) for _, d in sized)
    largest = max((b.size for _, d in sized for b in d.bars if b.is_64bit), default=0)
    guest = ctx.state.guest
    bar_errors = list(guest.bar_errors) if guest else []
    if largest < LARGE_BAR and not bar_errors:
        return RuleResult(
            rule=NAME,
            noop=f"largest GPU BAR is {fmt(largest)}: fits any guest MMIO window",
            findings=findings,
        )
    node = ctx.state.node
    firmware = _firmware(ctx)
    ram = mmio.ram_bytes(ctx.value("memory"))
    cpu_raw = ctx.value("cpu")
    cpu = mmio.read_cpu(cpu_raw)
    mmio64_mb = mmio.mmio64_mb_of(ctx.value("args"))
    common = mmio.Inputs(
        firmware=firmware, ram=ram, bars=total64, vendor=node.cpu_vendor,
        host_bits=node.cpu_phys_bits, host_flags=node.cpu_flags,
        mmio64_mb=mmio64_mb if firmware == "ovmf" else None,
    )
    now = common.window(cpu)
    evidence = [
        f"{len(entries)} GPU entr{'y' if len(entries) == 1 else 'ies'}, 64-bit BARs"
        f" {fmt(total64)} in all, largest {fmt(largest)}",
        f"guest RAM {fmt(ram)}; firmware {firmware.upper()}"
        + (f" (X-PciMmio64Mb={mmio64_mb})" if mmio64_mb and firmware == "ovmf" else ""),
        f"cpu: {cpu_raw}" if cpu_raw else "no cpu line (kvm64)",
        f"today: {_describe(now)}",
    ]
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
            + "; ".join(f"mapping {m}: {', '.join(keys)}" for m, keys in by_map.items())
        )
    changes: list[Change] = []
    if now.fits is False:
        change, more = _window_change(ctx, cpu, now, common, evidence)
        findings += more
        if change is not None:
            changes.append(change)
    elif now.check:
        findings.append(
            Finding(
                id="bar.window-unverified", rule=NAME, severity="warning",
                title="The 64-bit MMIO window could not be established",
                detail=f"RAM and BARs fit {_describe(now)}, but {now.check}.",
                evidence=evidence,
            )
        )
    elif now.fits is None:
        findings.append(
            Finding(
                id="bar.window-unverified", rule=NAME, severity="info",
                title="The 64-bit MMIO window depends on the host's address width",
                detail=(
                    "The VM uses the host's phys-bits, which are not in the facts read; check"
                    f" `grep -m1 'address sizes' /proc/cpuinfo` on {node.name}: RAM plus"
                    f" {fmt(total64)} of BARs must fit."
                ),
                evidence=evidence,
            )
        )
    realloc_changes, realloc_findings = _guest_side(ctx, evidence, bar_errors, largest)
    changes += realloc_changes
    findings += realloc_findings
    if not changes:
        if any(f.id == "bar.guest-unknown" for f in findings):
            reason = "the MMIO window is large enough; the guest's cmdline is out of reach"
        elif any(f.severity == "error" for f in findings):
            reason = "no VM config change can make the BARs fit (see findings)"
        else:
            reason = f"GPU BARs fit: {'; '.join(evidence)}"
        return RuleResult(rule=NAME, noop=reason, findings=findings)
    return RuleResult(rule=NAME, changes=changes, findings=findings,
                      guest_files_after=_guest_files_after(ctx, changes))


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
        id="devices.unknown-here",
        rule=NAME,
        severity="warning",
        title="Passed devices are not in the facts read",
        detail=(
            f"{', '.join(p.key for p in keys)} name devices that the facts read from {node} do"
            " not hold (a VM of another node, or a bundle of another host?). pvefix cannot size"
            " their BARs or tell whether they are GPUs; read the VM's own node (pvefix plan on"
            " the node the VM lives on, or a bundle collected there)."
        ),
        evidence=[f"{p.key}: {p.entry.raw}" + (f" ({p.problem})" if p.problem else "")
                  for p in keys],
    )


def _too_small(window: mmio.Window, setting: str, evidence: list[str], more: str = "") -> Finding:
    """No cpu line pvefix can write makes RAM and BARs fit: what remains is said."""
    return Finding(
        id="bar.window-too-small", rule=NAME, severity="error",
        title=f"The GPUs' BARs do not fit even with {setting}",
        detail=f"With {_describe(window)} RAM plus BARs do not fit{more}. Fewer GPUs or less RAM"
        " in this VM is what remains.",
        evidence=evidence,
    )


def _window_change(
    ctx: Context,
    cpu: mmio.CpuLine,
    now: mmio.Window,
    common: mmio.Inputs,
    evidence: list[str],
) -> tuple[Change | None, list[Finding]]:
    """The cpu-line change that makes RAM and BARs fit, or findings saying why none does."""
    node = ctx.state.node
    findings: list[Finding] = []
    if now.ram_fits is False:
        findings.append(
            Finding(
                id="bar.ram-exceeds-phys-bits", rule=NAME, severity="error",
                title=f"RAM exceeds the address space of {now.guest_bits} phys-bits",
                detail=(
                    f"{fmt(now.ram_end)} of guest-physical RAM space do not fit"
                    f" {now.guest_bits} phys-bits ({fmt(1 << (now.guest_bits or 0))}); QEMU"
                    " (7.1 and later) refuses to start such a VM with 'phys-bits too low'"
                    " (hw/i386/pc.c pc_memory_init)"
                    + (
                        "; the running instance predates this config or that QEMU."
                        if ctx.running
                        else "."
                    )
                ),
                evidence=evidence,
            )
        )
    if cpu.host_like and cpu.phys in (None, "host"):
        findings.append(_too_small(now, "the host's phys-bits", evidence,
                                   "; no cpu setting can widen it further"))
        return None, findings
    prop = mmio.read_cpu(cpu.raw).prop
    prop.set("phys-bits", "host")
    add_1g = common.firmware == "ovmf" and cpu.qemu64_family and cpu.flag("pdpe1gb") != "+"
    if add_1g:
        prop.set("flags", ";".join(mmio.with_flag(cpu, "pdpe1gb")))
    after = prop.render()
    new = common.window(mmio.read_cpu(after))
    host_flags = node.cpu_flags
    if add_1g and host_flags is not None and "pdpe1gb" not in host_flags:
        findings.append(
            Finding(
                id="bar.host-no-1g-pages", rule=NAME, severity="error",
                title="The host CPU offers no 1 GiB pages (pdpe1gb)",
                detail=(
                    f"OVMF needs 1 GiB pages to go past 40 phys-bits, and {node.name}'s CPU flags"
                    " lack pdpe1gb; Proxmox starts QEMU with `enforce`, so +pdpe1gb would stop"
                    " the VM from starting. SeaBIOS (no 1 GiB-page cap) is the remaining way."
                ),
                evidence=evidence,
            )
        )
        return None, findings
    if new.fits is False:
        findings.append(_too_small(new, "phys-bits=host", evidence))
        return None, findings
    why = (
        f"With {_describe(now)} the guest cannot hold {fmt(common.ram)} of RAM and"
        f" {fmt(common.bars)} of GPU BARs"
        + ("; " + "; ".join(now.caps) if now.caps else "")
        + ". phys-bits=host gives the vCPU the host's address width"
        + (
            ", and +pdpe1gb gives it 1 GiB pages, without which OVMF caps phys-bits at 40"
            " (Proxmox warns of exactly this for qemu64/kvm64 models on OVMF)."
            if add_1g
            else "."
        )
    )
    risk = [
        "phys-bits=host breaks live migration to hosts with another address width (a VM with"
        " passthrough cannot live-migrate anyway)."
    ]
    if add_1g:
        risk.append(
            "+pdpe1gb needs 1 GiB-page support in the host CPU"
            + (
                f" ({node.name} has it)."
                if host_flags is not None
                else f": check `grep -wm1 pdpe1gb /proc/cpuinfo` on {node.name}; Proxmox starts"
                " QEMU with `enforce`, so without it the VM does not start."
            )
        )
    if new.check:
        risk.append(f"Not established: {new.check}.")
    if new.guest_bits is None:
        risk.append(
            f"The host's address width is not in the facts read; it decides the window: check"
            f" `grep -m1 'address sizes' /proc/cpuinfo` on {node.name}."
        )
    effect = (
        f"At the next cold start the vCPU reports {_describe(new)}"
        + (f"; {'; '.join(new.caps)}" if new.caps else "")
        + ". The firmware then places the BARs in that window."
    )
    findings += _mmio64_alternative(cpu, now, common)
    findings.append(
        Finding(
            id="bar.cpu-host-alternative", rule=NAME, severity="info",
            title="Alternative: cpu: host",
            detail=(
                "`cpu: host` also reports the host's phys-bits and its 1 GiB pages; it shows the"
                " guest the exact host CPU (every flag), so the VM can only move to hosts with"
                " the same CPU, and guest software may behave per host model."
            ),
        )
    )
    change = VmConfigChange(
        id="vm.cpu.phys-bits",
        rule=NAME,
        key="cpu",
        before=cpu.raw,
        after=after,
        reason=why,
        risk=Risk(level="low" if host_flags is not None or not add_1g else "medium",
                  text=" ".join(risk)),
        evidence=[*evidence, f"after: {_describe(new)}"],
        inverse=f"cpu: {cpu.raw}" if cpu.raw else "delete the cpu key",
        disruption="vm-restart",
        effect=effect,
    )
    return change, findings


def _mmio64_alternative(
    cpu: mmio.CpuLine, now: mmio.Window, common: mmio.Inputs
) -> list[Finding]:
    """OVMF's X-PciMmio64Mb, offered only where a classic window of that size fits under the
    phys-bits OVMF uses (it sizes the window; it cannot widen the address space)."""
    if common.firmware != "ovmf" or now.ram_fits is False:
        return []
    size = 1 << max(common.bars - 1, 1).bit_length()  # natural alignment: a power of two
    mb = max(size >> 20, 1)
    trial = mmio.Inputs(**{**common.__dict__, "mmio64_mb": mb}).window(cpu)
    if trial.fits is not True:
        return []
    return [
        Finding(
            id="bar.ovmf-mmio64", rule=NAME, severity="info",
            title="Alternative: OVMF's X-PciMmio64Mb",
            detail=(
                f"Keeping the cpu line, OVMF's classic 64-bit window can be sized directly: args:"
                f" -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string={mb} ({fmt(size)} above RAM, under"
                f" {_describe(now)}). `args` is root@pam only."
            ),
        )
    ]


def _guest_side(
    ctx: Context, evidence: list[str], bar_errors: list[str], largest: int
) -> tuple[list[Change], list[Finding]]:
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
                detail=(
                    f"ostype is '{ctx.ostype}'. If the guest is Linux, it should boot with"
                    " pci=realloc (the kernel then resizes the root ports' bridge windows); set"
                    " `ostype: l26` (or give pvefix a way into the guest) and plan again."
                ),
            )
        ]
    guest_line = guest.cmdline if guest and guest.cmdline is not None else None
    realloc = pci_realloc_state(Cmdline.parse(guest_line)) if guest_line is not None else None
    if guest_line is None and not bar_errors and not q35_planned:
        # Already q35 and nothing seen in the guest: pvefix cannot tell whether the guest boots
        # with pci=realloc, so it says so instead of planning the same manual step forever.
        return [], [
            Finding(
                id="bar.guest-unknown", rule=NAME, severity="info",
                title="Guest cmdline not known",
                detail=(
                    "The GPUs have large BARs behind q35 root ports; check that the guest boots"
                    " with pci=realloc and logs no BAR errors (`cat /proc/cmdline`, `dmesg | grep"
                    " -i BAR`), or give pvefix a way into the guest (or a probe report)."
                ),
                evidence=evidence,
            )
        ]
    if realloc == "on":
        return [], []
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
        + (" pci=realloc=off is set today and forbids it." if realloc == "off" else "")
    )
    common = dict(
        rule=NAME,
        key="pci",
        before=guest_line,
        reason=reason,
        risk=Risk(
            level="low",
            text="Only the guest kernel is affected; a wrong grub edit in the guest is the"
            " main risk (keep console access).",
        ),
        evidence=ev,
        disruption="guest-reboot",
        effect=(
            "Lets the guest re-place BARs inside the MMIO window; it cannot grow the window"
            " itself (that is the VM-side phys-bits fix)."
        ),
    )
    if ctx.state.access.guest is not None:
        return [
            GuestCmdlineChange(
                id="guest.cmdline.pci_realloc",
                after=after_line or "pci=realloc",
                inverse="remove pci=realloc from the guest's GRUB_CMDLINE_LINUX_DEFAULT and"
                " run update-grub",
                file=GRUB_DEFAULT,
                refresh_command=["update-grub"],
                **common,
            )
        ], []
    return [
        ManualChange(
            id="guest.cmdline.pci_realloc",
            after=after_line or "... pci=realloc",
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
                'dmesg | grep -iE "BAR .*(no space|failed to assign)|NVRM: .*invalid"',
            ],
            **common,
        )
    ], []
