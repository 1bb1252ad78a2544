"""The Linux kernel command line: a faithful model, pci= helpers, lint, and the host files.

    from pvefix.cmdline import Cmdline, ensure_pci_option, lint
    line = Cmdline.parse("root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet")
    line.ensure("iommu", "pt")          # True: appended as " iommu=pt"
    ensure_pci_option(line, "realloc")  # True: appended as " pci=realloc"
"""

from pvefix.cmdline.files import (
    BOOTLOADER_PARAMS,
    GRUB_LINUX,
    GRUB_LINUX_DEFAULT,
    GrubAssignment,
    GrubDefaultFile,
    KernelCmdlineFile,
    ProcCmdline,
)
from pvefix.cmdline.lint import (
    AMD_IOMMU_OPTIONS,
    CpuVendor,
    Finding,
    Severity,
    lint,
    parse_kernel_version,
)
from pvefix.cmdline.pci import (
    ReallocState,
    ensure_pci_option,
    pci_options,
    pci_realloc_state,
    realloc_option_state,
    replace_realloc_off,
)
from pvefix.cmdline.tokens import WHITESPACE, Cmdline, Token, normalize_name
from pvefix.paths import GRUB_DEFAULT, KERNEL_CMDLINE, PROC_CMDLINE

__all__ = [
    "AMD_IOMMU_OPTIONS",
    "BOOTLOADER_PARAMS",
    "GRUB_DEFAULT",
    "GRUB_LINUX",
    "GRUB_LINUX_DEFAULT",
    "KERNEL_CMDLINE",
    "PROC_CMDLINE",
    "WHITESPACE",
    "Cmdline",
    "CpuVendor",
    "Finding",
    "GrubAssignment",
    "GrubDefaultFile",
    "KernelCmdlineFile",
    "ProcCmdline",
    "ReallocState",
    "Severity",
    "Token",
    "ensure_pci_option",
    "lint",
    "normalize_name",
    "parse_kernel_version",
    "pci_options",
    "pci_realloc_state",
    "realloc_option_state",
    "replace_realloc_off",
]
