"""BAR space in the guest: the 64-bit MMIO window (phys-bits) and `pci=realloc`.

Large-BAR GPUs need a large 64-bit MMIO window in the guest: an RTX PRO 6000 has a 128 GiB
BAR1, an H200 a 256 GiB BAR. The firmware (OVMF or SeaBIOS) places that window above the
guest's RAM, inside the guest-physical address space, whose size is set by the CPU's phys-bits.
QEMU gives named CPU models 40 bits (1 TiB) unless told otherwise; `cpu: host` or
`phys-bits=host` gives the host's (48-52 bits on current EPYC and Xeon). When RAM plus the GPUs'
BARs do not fit, the guest kernel logs `BAR N: can't assign; no space` / `failed to assign` and
the NVIDIA driver `This PCI I/O region assigned to your NVIDIA device is invalid`.

Two fixes, for two different problems:
- the window itself: `phys-bits=host` on the `cpu` line (planned as a VM config change), or on
  OVMF `args: -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=N` (root@pam only; mentioned);
- the placement inside it: on q35 each GPU sits behind its own root port whose bridge window the
  guest kernel must size; `pci=realloc` on the guest kernel cmdline lets it resize those bridge
  windows. Its limit: it cannot grow the host-bridge window the firmware gives, so it never
  replaces the phys-bits fix.
Guest changes are planned as guest-cmdline changes when pvefix has a way into the guest (SSH
or the guest agent), otherwise as manual steps with exact commands.
"""

from __future__ import annotations

import re

from pvefix.cmdline import Cmdline, ensure_pci_option, pci_realloc_state
from pvefix.planner.context import Context
from pvefix.planner.model import Change, Finding, Risk, RuleResult
from pvefix.vmconfig import PropertyString

NAME = "bar-space"
GiB = 1 << 30
LARGE_BAR = 8 * GiB
DEFAULT_PHYS_BITS = 40  # QEMU's default for named CPU models under KVM


def _ram_bytes(memory: str | None) -> int:
    if not memory:
        return 512 << 20
    m = re.search(r"(?:^|current=)(\d+)", memory)
    return int(m.group(1)) << 20 if m else 512 << 20


def _fmt(size: int) -> str:
    if size >= 1 << 40 and size % (1 << 40) == 0:
        return f"{size >> 40} TiB"
    return f"{size / GiB:g} GiB"


def rule(ctx: Context) -> RuleResult:
    gpus = ctx.gpus
    if not gpus:
        return RuleResult(rule=NAME, noop="no GPU is passed through")
    bars64 = [(g.address, b) for g in gpus for b in g.bars if b.is_64bit]
    largest = max((b.size for _, b in bars64), default=0)
    guest = ctx.state.guest
    bar_errors = list(guest.bar_errors) if guest else []
    if largest < LARGE_BAR and not bar_errors:
        return RuleResult(
            rule=NAME, noop=f"largest GPU BAR is {_fmt(largest)}: fits any guest MMIO window"
        )
    changes: list[Change] = []
    findings: list[Finding] = []
    total64 = sum(b.size for _, b in bars64)
    ram = _ram_bytes(ctx.cfg.main.get("memory"))
    cpu_raw = ctx.cfg.main.get("cpu")
    cpu = PropertyString.parse(cpu_raw or "kvm64", default_key="cputype")
    cputype = cpu.get("cputype") or "kvm64"
    phys = cpu.get("phys-bits")
    evidence = [
        f"{len(gpus)} GPU(s), 64-bit BARs {_fmt(total64)} in all, largest {_fmt(largest)}",
        f"guest RAM {_fmt(ram)}",
        f"cpu: {cpu_raw}" if cpu_raw else "no cpu line (kvm64)",
    ]
    if cputype == "host" or phys == "host":
        bits_text = "the host's phys-bits"
        too_small = False
    else:
        bits = int(phys) if phys and phys.isdigit() else DEFAULT_PHYS_BITS
        bits_text = f"{bits} phys-bits ({_fmt(1 << bits)} of guest-physical space)"
        # RAM, the 32-bit hole below 4 GiB, and the BARs (each naturally aligned) must fit.
        need = ram + 4 * GiB + total64 + largest
        too_small = need > (1 << bits)
        evidence.append(f"{bits_text}; RAM + BARs need about {_fmt(need)}")
    if too_small:
        cpu.set("phys-bits", "host")
        after = cpu.render()
        changes.append(
            Change(
                id="vm.cpu.phys-bits",
                rule=NAME,
                target="vm-config",
                key="cpu",
                before=cpu_raw,
                after=after,
                reason=(
                    f"With {bits_text} the guest cannot place {_fmt(total64)} of GPU BARs above"
                    f" {_fmt(ram)} of RAM; phys-bits=host gives it the host's address width."
                ),
                risk=Risk(
                    level="low",
                    text=(
                        "phys-bits=host breaks live migration to CPUs with other address widths"
                        " (a VM with passthrough cannot live-migrate anyway). On OVMF with"
                        " qemu64/kvm64 the firmware may still cap it at 40 bits without the"
                        " pdpe1gb flag."
                    ),
                ),
                evidence=evidence,
                inverse=f"cpu: {cpu_raw}" if cpu_raw else "delete the cpu key",
                disruption="vm-restart",
                effect="Takes effect at the next cold start; the firmware then sizes the 64-bit"
                " MMIO window from the larger address space.",
            )
        )
        if (ctx.cfg.main.get("bios") or "seabios") == "ovmf":
            findings.append(
                Finding(
                    id="bar.ovmf-mmio64",
                    rule=NAME,
                    severity="info",
                    title="Alternative: OVMF's X-PciMmio64Mb",
                    detail=(
                        "Instead of phys-bits, OVMF's 64-bit MMIO window can be set directly:"
                        f" args: -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string={(total64 * 2) >> 20}"
                        " (root@pam only, since it is `args`)."
                    ),
                )
            )
    q35_planned = ctx.machine.family != "q35"
    behind_ports = ctx.machine.family == "q35" or q35_planned
    guest_line = guest.cmdline if guest and guest.cmdline is not None else None
    realloc = pci_realloc_state(Cmdline.parse(guest_line)) if guest_line is not None else None
    if guest_line is None and not bar_errors and not q35_planned:
        # Already q35 and nothing seen in the guest: pvefix cannot tell whether the guest boots
        # with pci=realloc, so it says so instead of planning the same manual step forever.
        findings.append(
            Finding(
                id="bar.guest-unknown",
                rule=NAME,
                severity="info",
                title="Guest cmdline not known",
                detail=(
                    "The GPUs have large BARs behind q35 root ports; check that the guest boots"
                    " with pci=realloc and logs no BAR errors (`cat /proc/cmdline`, `dmesg | grep"
                    " -i BAR`), or give pvefix a way into the guest (or a probe report)."
                ),
                evidence=evidence,
            )
        )
    elif bar_errors or (behind_ports and largest >= LARGE_BAR):
        if realloc == "on":
            return RuleResult(
                rule=NAME,
                changes=changes,
                findings=findings,
                noop=None if changes else "guest already boots with pci=realloc",
            )
        ev = list(evidence)
        ev += [f"guest kernel: {e}" for e in bar_errors[:5]]
        if guest_line is not None:
            ev.append(f"guest /proc/cmdline: {guest_line}")
        after_line = None
        if guest_line is not None:
            line = Cmdline.parse(guest_line)
            ensure_pci_option(line, "realloc")
            after_line = line.render()
        has_access = ctx.state.access.guest is not None
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
                " itself (that is the phys-bits / X-PciMmio64Mb fix)."
            ),
        )
        if has_access:
            changes.append(
                Change(
                    id="guest.cmdline.pci_realloc",
                    target="guest-cmdline",
                    after=after_line or "pci=realloc",
                    inverse="remove pci=realloc from the guest's GRUB_CMDLINE_LINUX_DEFAULT and"
                    " run update-grub",
                    file="/etc/default/grub",
                    refresh_command=["update-grub"],
                    **common,
                )
            )
        else:
            changes.append(
                Change(
                    id="guest.cmdline.pci_realloc",
                    target="manual",
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
            )
    if not changes:
        if any(f.id == "bar.guest-unknown" for f in findings):
            reason = "the MMIO window is large enough; the guest's cmdline is out of reach"
        else:
            reason = f"GPU BARs fit: {'; '.join(evidence)}"
        return RuleResult(rule=NAME, noop=reason, findings=findings)
    return RuleResult(rule=NAME, changes=changes, findings=findings)
