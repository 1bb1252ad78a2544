"""The host cmdline's closed world: what pvefix does not model there, it never claims (pure).

Every token of the configured host cmdline (the effective one: `/etc/kernel/cmdline`'s first
line, or GRUB's two variables after its drop-ins) is classified by one table,
`pvefix/closedworld/kernel_params.py`: every kernel parameter that touches the IOMMU, PCI
resources or VFIO (the kernel's Documentation/admin-guide/kernel-parameters.txt), each option of
the comma-list parameters (`iommu=`, `amd_iommu=`, `intel_iommu=`, `pci=`) on its own, as their
parsers read them (by prefix, left to right). Each is *modelled* (the claims it feeds are
named), *inert* (it changes no claim pvefix makes, said why) or *unmodelled*. A token of one of
the IOMMU, PCI or VFIO name families that the table does not list is unmodelled too, never
passed over; a token outside them (`root=`, `quiet`, `console=`) touches none of these claims.

What follows from it:

- An unmodelled token makes every claim it touches "not established: kernel-param NAME" (a
  warning finding with the parameter's source), never a confident verdict. When it touches the
  host-iommu claim (`amd_iommu=force_enable`, `intel_iommu=sm_on`, `iommu=force`, `pci=off`,
  `mem_encrypt=`, ...), the host-iommu rule writes nothing: every host edit it plans rests on
  knowing whether the IOMMU is on after the reboot. One that touches only the IOMMU groups
  (`pcie_acs_override=`, `pci=disable_acs_redir=`), the start (`video=efifb:off`,
  `intremap=off`, `vfio_iommu_type1.allow_unsafe_interrupts=1`) or the BAR space
  (`kvm_amd.npt=0`) says so and leaves the host edit alone; for those claims the token, on the
  configured or the booted line, is a gap of the plan's closed world like a VM input
  (planner/closed.py): the rules making the claim give no verdict and its changes are not
  planned.
- `iommu=off` (the generic x86 option) is modelled as the kernel has it: arch/x86/kernel/
  pci-dma.c iommu_setup sets no_iommu, nothing later on the line clears it (`iommu=pt` only
  picks the default domain), and both drivers stop early (amd_iommu_detect,
  detect_intel_iommu), so the host boots with no IOMMU whatever follows, and Proxmox then
  refuses every passthrough start (qemu-server PCI.pm). pvefix removes it before adding
  `iommu=pt`, never appends `iommu=pt` after it; inside a combined value (`iommu=off,pt`) or a
  file it does not edit it writes nothing and an error says what to remove. `desired` never
  records an IOMMU-off token as required and forbids `iommu=off`, `amd_iommu=off` and
  `intel_iommu=off`, so `check` reports a host configured or booted with one as drift.
- Order and repeats are read as the kernel reads them: `amd_iommu=off` anywhere wins;
  `intel_iommu=` takes the last `on`/`off`; the default domain is the last of `iommu=pt`,
  `iommu=nopt` and `iommu.passthrough=`; `iommu.strict=`, `intel_iommu=strict` and
  `amd_iommu=fullflush` only make the translated domain flush strictly.
- Whether VT-d is on when the line gives no `intel_iommu=on`/`off` is the build's choice
  (CONFIG_INTEL_IOMMU_DEFAULT_ON: Debian's kernels set it, Proxmox's before 6.8 did not).
  pvefix reads the booted kernel's `/boot/config-$(uname -r)` (`NodeFacts.kernel_config`: the
  bundle's `boot/config-KERNEL`, `cat` over SSH, the collect script) and the change's evidence
  says which it relied on; not read, that verdict is not established and no host edit is
  planned (add `intel_iommu=on`, or give pvefix the file).

Held against the kernel itself: tests/conformance/test_kernel_judge.py boots Debian's 6.1 and
6.12 kernels (../shared/fw-lab's guest mode, an emulated VT-d or AMD-Vi) with command lines
generated over these tokens, their order, repeats and GRUB's quoting forms, and requires
pvefix's reading of each line, and of the line it would write, to be the kernel's: an IOMMU or
none, identity or translated.
"""

from __future__ import annotations

from pvefix.closedworld import not_established
from pvefix.closedworld.kernel_params import INTEL_DEFAULT, classify
from pvefix.cmdline.iommu import DEFAULT_ON_KEY, intel_default_on, intel_setting, off_tokens
from pvefix.cmdline.lint import CpuVendor
from pvefix.cmdline.tokens import Cmdline
from pvefix.planner.model import Finding
from pvefix.state import NodeFacts


def unmodelled(rule: str, line: Cmdline, where: str) -> tuple[list[Finding], list[str]]:
    """A finding per claim each unmodelled token of `line` touches (once per input and claim),
    and the raw tokens that leave the host-iommu claim not established."""
    findings: dict[str, Finding] = {}
    blocking: list[str] = []
    for token in line.tokens:
        for item in classify(token):
            if item.status != "unmodelled":
                continue
            if "host-iommu" in item.claims and token.raw not in blocking:
                blocking.append(token.raw)
            for claim in item.claims:
                found = not_established(
                    rule, item, claim,
                    f"{token.raw} is on the host cmdline ({where}) and pvefix does not model"
                    f" what it does to this claim, so it makes no verdict that rests on it.",
                    [f"{where}: {token.raw}"])
                findings.setdefault(found.id, found)
    return list(findings.values()), blocking


def rests_on_intel_default(line: Cmdline, vendor: CpuVendor | None) -> bool:
    """True when an Intel host's IOMMU after booting `line` is the build default's to decide:
    nothing on the line turns it off, and no intel_iommu=on/off is given."""
    return vendor == "intel" and not off_tokens(line, vendor) and intel_setting(line)[0] is None


def intel_default_basis(node: NodeFacts) -> str:
    """What the Intel IOMMU's default was read from, said plainly (for evidence)."""
    default = intel_default_on(node.kernel_config)
    config = f"/boot/config-{node.kernel_version or '?'}"
    if default is None:
        return f"{config} not read: the Intel IOMMU's build default is unknown"
    value = (node.kernel_config or {}).get(DEFAULT_ON_KEY, "not set")
    return (f"relied on {config}: {DEFAULT_ON_KEY}={value}, the Intel IOMMU is"
            f" {'on' if default else 'off'} unless the line says otherwise")


def intel_default_unknown(rule: str, node: NodeFacts, line: Cmdline) -> Finding:
    """The host-iommu claim, not established: it rests on a build default pvefix did not read."""
    config = f"/boot/config-{node.kernel_version or '$(uname -r)'}"
    return not_established(
        rule, INTEL_DEFAULT, "host-iommu",
        f"The host cmdline gives no intel_iommu=on or off, so the booted kernel's build default"
        f" decides whether the Intel IOMMU is on, and {config} was not read (Proxmox's own"
        f" builds turn it on from 6.8, per pve-docs; this build's file says). pvefix writes no"
        f" host edit that rests on it: add intel_iommu=on to the command line, or give pvefix"
        f" that file (the bundle's boot/ folder; `grep {DEFAULT_ON_KEY} {config}` on the host),"
        f" then plan again.",
        [f"configured: {line.render().strip()}"])
