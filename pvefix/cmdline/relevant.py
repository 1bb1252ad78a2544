"""The kernel parameters that matter for passthrough: what a desired state pins of a cmdline
(`pvefix desired`, `pvefix check`) and what a host reboot must activate when the configured
cmdline holds them and the booted one does not (the planner's activation-only phase)."""

from __future__ import annotations

from pvefix.cmdline.tokens import Cmdline, normalize_name

# Kernel parameters that matter for passthrough (compared dash/underscore-insensitively).
RELEVANT = frozenset(normalize_name(n) for n in (
    "iommu", "amd_iommu", "intel_iommu", "iommu.passthrough", "iommu.strict", "pci",
    "pcie_acs_override", "pcie_aspm", "vfio-pci.ids", "vfio-pci.disable_vga",
    "vfio_iommu_type1.allow_unsafe_interrupts", "kvm.ignore_msrs", "kvm_amd.avic",
    "video", "initcall_blacklist", "nofb", "nomodeset", "modprobe.blacklist",
    "rd.driver.blacklist", "hugepagesz", "default_hugepagesz", "hugepages",
))


def relevant_parameters(line: Cmdline) -> tuple[str, ...]:
    """The passthrough-relevant tokens of a cmdline, as `name` or `name=value`, in order."""
    out: list[str] = []
    for token in line.tokens:
        if normalize_name(token.name) not in RELEVANT:
            continue
        text = token.name if token.value is None else f"{token.name}={token.value}"
        if any(c.isspace() for c in text) or '"' in text:
            continue  # a quoted value with spaces cannot be one desired-file parameter
        if text not in out:
            out.append(text)
    return tuple(out)


def relevant_differ(configured: Cmdline, running: Cmdline) -> bool:
    """Do the two lines differ in a passthrough-relevant parameter (names compared as the
    kernel reads them: `-` and `_` alike; order and repeats aside)?"""
    return _relevant_set(configured) != _relevant_set(running)


def _relevant_set(line: Cmdline) -> set[tuple[str, str | None]]:
    return {(normalize_name(t.name), t.value) for t in line.tokens
            if normalize_name(t.name) in RELEVANT}
