"""Closed world: the host kernel parameters that touch the IOMMU, PCI resources or VFIO.

The list is the kernel's own (Documentation/admin-guide/kernel-parameters.txt, the entries
tagged IOMMU, PCI, DMAR, AMD/Intel IOMMU, VFIO module parameters, and the framebuffer ones that
hold a GPU) with each parameter's parser named in `source`. An entry is one parameter
(`pcie_acs_override`) or one option of a comma-list parameter (`iommu=off`, `pci=realloc`):
`iommu=`, `amd_iommu=`, `intel_iommu=` and `pci=` are read option by option by their parsers,
so each option is its own input.

A token is in scope when its name (dashes as underscores, as kernel/params.c compares them)
belongs to one of `FAMILIES`; an option or parameter of a family that the table does not list is
unmodelled and touches what its family touches (`classify`). A token outside every family (root=,
quiet, console=, ...) is not a parameter of this kind: it touches none of pvefix's claims.

The KVM modules' parameters (`kvm.`, `kvm_intel.`, `kvm_amd.`) are a family too: pvefix's
address-width model (min of the vCPU's phys-bits, the host's and guest-phys-bits) is the one of
two-dimensional paging, so `kvm_intel.ept=0` / `kvm_amd.npt=0` (shadow paging) leave bar-space
not established, and an unlisted member is unmodelled for bar-space and the start. The common
ones on passthrough hosts (`kvm.ignore_msrs`, `kvm.report_ignored_msrs`, `*.nested`, ...) are
listed inert, each with its source. Decided on purpose, outside the KVM family:
- `mem=`: in (unmodelled, start): RAM beyond it is left out of the e820 map, and without
  `memmap=` the kernel may place PCI resources there (kernel-parameters.txt, mem=).
- `memmap=`: in (unmodelled, start): it reserves or adds e820 ranges, which moves where the host
  places PCI resources.
- `nokaslr`: in, inert: it only fixes where the kernel itself is loaded and mapped.
- `mitigations=`: in, inert: CPU vulnerability mitigations (and KVM's nx_huge_pages=auto with
  them); performance only, no address width, IOMMU, PCI or VFIO claim.
A module parameter is also set by `options MODULE NAME=VALUE` in /etc/modprobe.d, which pvefix
does not read (only /sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts is read as a
fact): a `kvm_amd npt=0` set there is not seen, and the claims it touches read as modelled.
"""

from __future__ import annotations

from pvefix.closedworld.model import Claim, Input, Status
from pvefix.cmdline.iommu import kstrtobool
from pvefix.cmdline.tokens import Token, normalize_name

_DOC = "Documentation/admin-guide/kernel-parameters.txt"
_PCI_DMA = "arch/x86/kernel/pci-dma.c iommu_setup"
_AMD = "drivers/iommu/amd/init.c parse_amd_iommu_options"
_INTEL = "drivers/iommu/intel/iommu.c intel_iommu_setup"
_CORE = "drivers/iommu/iommu.c"
_PCI = "drivers/pci/pci.c pci_setup"
_VFIO = "drivers/vfio/pci/vfio_pci.c, drivers/vfio/vfio_iommu_type1.c module parameters"


def _p(name: str, status: Status, claims: tuple[Claim, ...], why: str, source: str) -> Input:
    return Input(kind="kernel-param", name=name, status=status, claims=claims, why=why,
                 source=source)


_HOST: tuple[Claim, ...] = ("host-iommu", "drift")
_TRANSLATED = ("changes only how a translated domain flushes its IOTLB (strict or lazy): the"
               " IOMMU stays on and the default domain stays translated, which is all the"
               " host-iommu verdict says.")

_GENERIC = (
    _p("iommu=off", "modelled", _HOST, "sets no_iommu; nothing later on the line clears it, and"
       " the AMD and Intel drivers detect nothing: no IOMMU, whatever follows (pvefix removes"
       " it).", f"{_PCI_DMA}; amd_iommu_detect; detect_intel_iommu"),
    _p("iommu=pt", "modelled", _HOST, "default domain identity for host-owned devices; the"
       " last of iommu=pt/nopt/iommu.passthrough= wins.", _PCI_DMA),
    _p("iommu=nopt", "modelled", _HOST, "default domain translated; the last of iommu=pt/nopt/"
       "iommu.passthrough= wins.", _PCI_DMA),
    _p("iommu.passthrough", "modelled", _HOST, "a kstrtobool: 1 is iommu=pt, 0 is iommu=nopt;"
       " the last one on the line wins.", f"{_CORE} iommu_set_def_domain_type"),
    _p("iommu.strict", "modelled", ("host-iommu",), _TRANSLATED, f"{_CORE} iommu_dma_setup"),
    _p("iommu.forcedac", "inert", (), "where host DMA addresses are allocated (above 4 GiB"
       " first); no claim pvefix makes depends on it.", f"{_CORE} iommu_dma_forcedac_setup"),
    *(_p(f"iommu={o}", "unmodelled", ("host-iommu",), "a GART/swiotlb-era option of the"
         " generic iommu= parser whose interplay with the AMD and Intel drivers pvefix does not"
         " model.", _PCI_DMA)
      for o in ("force", "noforce", "biomerge", "panic", "nopanic", "merge", "nomerge",
                "forcesac", "allowdac", "nodac", "usedac", "soft", "calgary", "fullflush",
                "nofullflush", "noagp", "noaperture", "memaper", "allowed")),
)

_AMD_INPUTS = (
    _p("amd_iommu=off", "modelled", _HOST, "disables the AMD IOMMU; nothing on the line turns"
       " it back on (pvefix removes it).", _AMD),
    _p("amd_iommu=on", "modelled", ("host-iommu",), "not an option: the kernel logs 'Unknown"
       " option' and ignores it (the AMD IOMMU is on by default); pvefix removes the noise.",
       _AMD),
    _p("amd_iommu=fullflush", "modelled", ("host-iommu",), _TRANSLATED, _AMD),
    _p("amd_iommu=force_isolation", "unmodelled", ("iommu-groups",), "forbids the driver to"
       " lift isolation: the groups after the reboot may differ from the booted ones.", _AMD),
    _p("amd_iommu=force_enable", "unmodelled", ("host-iommu",), "forces the IOMMU on where the"
       " driver would keep it off for a firmware quirk.", _AMD),
    _p("amd_iommu=pgtbl_v1", "unmodelled", ("host-iommu",), "picks the page table format;"
       " its effect on the default domain is not modelled.", _AMD),
    _p("amd_iommu=pgtbl_v2", "unmodelled", ("host-iommu",), "picks the v2 (guest) page table"
       " format; its effect on the default domain is not modelled.", _AMD),
    _p("amd_iommu=irtcachedis", "unmodelled", ("start",), "disables the interrupt remapping"
       " table cache.", _AMD),
    _p("amd_iommu=nohugepages", "inert", (), "page sizes of the IOMMU's mappings only.", _AMD),
    _p("amd_iommu=v2_pgsizes_only", "inert", (), "page sizes of the IOMMU's mappings only.",
       _AMD),
    _p("amd_iommu_dump", "inert", (), "prints the ACPI IVRS table at boot.", _DOC),
    _p("amd_iommu_intr", "unmodelled", ("start",), "interrupt remapping mode (legacy or vAPIC)"
       " for the devices a VM is given.", "drivers/iommu/amd/init.c parse_amd_iommu_intr"),
    *(_p(n, "unmodelled", ("host-iommu", "iommu-groups"), "overrides the firmware's IVRS table"
         " entries: whether the IOMMU initialises, and what it sees.", "drivers/iommu/amd/"
         "init.c parse_ivrs_*") for n in ("ivrs_ioapic", "ivrs_hpet", "ivrs_acpihid")),
)

_INTEL_INPUTS = (
    _p("intel_iommu=on", "modelled", _HOST, "clears dmar_disabled; the last of on/off wins;"
       " without either the build default decides (CONFIG_INTEL_IOMMU_DEFAULT_ON, read from the"
       " host's /boot/config).", _INTEL),
    _p("intel_iommu=off", "modelled", _HOST, "sets dmar_disabled; the last of on/off wins"
       " (pvefix removes it).", _INTEL),
    _p("intel_iommu=strict", "modelled", ("host-iommu",), _TRANSLATED, _INTEL),
    _p("intel_iommu=igfx_off", "unmodelled", ("iommu-groups", "start"), "leaves the integrated"
       " graphics outside the IOMMU: its group and its passthrough are not modelled.", _INTEL),
    _p("intel_iommu=sm_on", "unmodelled", ("host-iommu",), "scalable mode on.", _INTEL),
    _p("intel_iommu=sm_off", "unmodelled", ("host-iommu",), "scalable mode off.", _INTEL),
    _p("intel_iommu=tboot_noforce", "unmodelled", ("host-iommu",), "lets intel_iommu=off hold"
       " under tboot, which otherwise forces the IOMMU on.", _INTEL),
    _p("intel_iommu=sp_off", "inert", (), "page sizes of the IOMMU's mappings only.", _INTEL),
    _p("intel_iommu=forcedac", "inert", (), "as iommu.forcedac: where host DMA addresses are"
       " allocated.", _INTEL),
    _p("intremap", "unmodelled", ("start",), "interrupt remapping: without it VFIO refuses to"
       " assign a device unless vfio_iommu_type1.allow_unsafe_interrupts=1.",
       "drivers/iommu/irq_remapping.c setup_irqremap; drivers/vfio/vfio_iommu_type1.c"),
)

_VFIO_INPUTS = (
    _p("vfio-pci.ids", "modelled", ("drift",), "binds the listed IDs to vfio-pci at boot;"
       " Proxmox binds every passed device itself at start (PCI.pm), so pvefix's verdicts do"
       " not rest on it; desired records it.", _VFIO),
    _p("vfio_iommu_type1.allow_unsafe_interrupts", "unmodelled", ("start",), "lets VFIO assign"
       " devices without interrupt remapping.", _VFIO),
    _p("vfio_iommu_type1.dma_entry_limit", "unmodelled", ("start",), "caps the DMA mappings"
       " of one VM's container.", _VFIO),
    *(_p(f"vfio-pci.{o}", "unmodelled", ("start",), "changes how vfio-pci handles the device"
         " a VM is given.", _VFIO)
      for o in ("disable_vga", "disable_idle_d3", "nointxmask", "enable_sriov",
                "disable_denylist")),
    _p("vfio.enable_unsafe_noiommu_mode", "unmodelled", ("host-iommu", "start"), "VFIO"
       " without an IOMMU: no isolation at all.", "drivers/vfio/vfio_main.c"),
    _p("pcie_acs_override", "unmodelled", ("iommu-groups",), "the Proxmox kernel's ACS"
       " override patch: splits IOMMU groups after the reboot (never merges them); the groups"
       " it makes are not modelled.", "Proxmox kernel patches (pve-kernel)"),
)

_RESOURCES: tuple[Claim, ...] = ("start",)
_ACS: tuple[Claim, ...] = ("iommu-groups",)
_PCI_OPTIONS: tuple[tuple[str, tuple[Claim, ...], str], ...] = (
    ("off", ("host-iommu", "iommu-groups", "start"), "no PCI probing at all."),
    ("nommconf", ("iommu-groups", "start"), "no extended config space: ACS and resizable"
     " BAR capabilities are not seen."),
    ("realloc", _RESOURCES, "host bridge windows reassigned: where the GPU's BARs land."),
    ("nocrs", _RESOURCES, "host bridge windows from the firmware's _CRS ignored."),
    ("use_crs", _RESOURCES, "host bridge windows from _CRS."),
    ("assign-busses", _RESOURCES, "bus numbers reassigned."),
    ("hpmmiosize", _RESOURCES, "hotplug bridge window sizes."),
    ("hpmmioprefsize", _RESOURCES, "hotplug bridge window sizes."),
    ("hpmemsize", _RESOURCES, "hotplug bridge window sizes."),
    ("resource_alignment", _RESOURCES, "BAR alignment forced per device."),
    ("nobar", _RESOURCES, "BARs the firmware left unassigned are not assigned."),
    ("norom", _RESOURCES, "ROM BARs not assigned."),
    ("big_root_window", _RESOURCES, "a large 64-bit root window (AMD)."),
    ("nomsi", _RESOURCES, "no MSI: a passed device's interrupts fall back to INTx."),
    ("disable_acs_redir", _ACS, "ACS redirect disabled on the named ports: the IOMMU groups"
     " after the reboot change."),
    ("config_acs", _ACS, "ACS controls forced on the named ports: the IOMMU groups after the"
     " reboot change."),
    ("noats", ("host-iommu",), "no Address Translation Services for any device."),
)
_PCI_INPUTS = (
    *(_p(f"pci={o}", "unmodelled", claims, why, _PCI) for o, claims, why in _PCI_OPTIONS),
    _p("pci=noaer", "inert", (), "PCIe error reporting only.", _PCI),
)

_OTHER = (
    _p("pcie_aspm", "inert", (), "link power management only.", "drivers/pci/pcie/aspm.c"),
    _p("pcie_ports", "inert", (), "which PCIe port services (AER, hotplug, PME) the kernel"
       " drives.", "drivers/pci/pcie/portdrv.c"),
    _p("mem_encrypt", "unmodelled", ("host-iommu", "start"), "AMD SME: DMA to encrypted memory"
       " goes through the IOMMU; its interplay with passthrough is not modelled.",
       "arch/x86/mm/mem_encrypt_identity.c"),
    _p("efi", "inert", (), "EFI runtime services and the memory map (and the stub's early PCI"
       " DMA gate); no IOMMU, PCI resource or VFIO claim pvefix makes depends on them.",
       "drivers/firmware/efi/efi.c parse_efi_cmdline"),
    _p("swiotlb", "inert", (), "the bounce-buffer pool's size.", "kernel/dma/swiotlb.c"),
    *(_p(n, "unmodelled", ("start",), why, _DOC) for n, why in (
        ("video", "a host framebuffer (efifb, vesafb, simplefb) on the passed GPU holds its BAR"
         " and can make the start fail; pvefix does not model which framebuffer holds what."),
        ("initcall_blacklist", "skips kernel init calls (sysfb_init: the boot framebuffer that"
         " can hold a passed GPU's BAR); not modelled."))),
    *(_p(n, "inert", (), "keeps host drivers off devices; Proxmox unbinds whatever driver holds"
         " a passed device at start (qemu-server PCI.pm), so no claim rests on it.", _DOC)
      for n in ("nomodeset", "nofb", "modprobe.blacklist", "module_blacklist",
                "rd.driver.blacklist")),
)

_X86 = "arch/x86/kvm/x86.c"
_VMX = "arch/x86/kvm/vmx/vmx.c"
_SVM = "arch/x86/kvm/svm/svm.c"
_SHADOW = ("shadow paging: KVM then reports the host's MAXPHYADDR (reduced by SME/TME key bits)"
           " and no GuestPhysAddrSize in CPUID 0x80000008, so QEMU sets no guest-phys-bits, and"
           " guest addresses are no longer bounded by the host's MAXPHYADDR (52 bits): the usable"
           " width min(vCPU phys-bits, host phys-bits, guest-phys-bits) that the BAR verdict uses"
           " holds for EPT/NPT only.")
_SHADOW_SRC = ("arch/x86/kvm/cpuid.c __do_cpuid_func 0x80000008; arch/x86/kvm/mmu.h"
               " kvm_mmu_max_gfn; QEMU target/i386/kvm/kvm-cpu.c kvm_set_guest_phys_bits")
_TDP_ON = ("the default (two-dimensional paging where the CPU has it): the address width pvefix"
           " models.")
_NESTED = ("nested virtualisation for guests whose CPU carries vmx/svm; no address width,"
           " passthrough start or IOMMU claim depends on it.")
_POSTED = ("whether a passed device's interrupts are posted to the vCPU or injected by KVM;"
           " VFIO assigns the device and the VM starts either way (the IRQ bypass falls back to"
           " injection).")

_KVM = (
    _p("kvm_intel.ept=0", "unmodelled", ("bar-space",), _SHADOW, f"{_VMX} enable_ept;"
       f" {_SHADOW_SRC}"),
    _p("kvm_intel.ept=1", "inert", (), _TDP_ON, f"{_VMX} enable_ept"),
    _p("kvm_amd.npt=0", "unmodelled", ("bar-space",), _SHADOW, f"{_SVM} npt_enabled;"
       f" {_SHADOW_SRC}"),
    _p("kvm_amd.npt=1", "inert", (), _TDP_ON, f"{_SVM} npt_enabled"),
    _p("kvm_intel.allow_smaller_maxphyaddr", "inert", (), "whether KVM intercepts guest page"
       " faults to raise the reserved-bit faults a vCPU phys-bits below the host's implies;"
       " the VM starts with any phys-bits either way, and pvefix already counts a BAR usable"
       " only below the vCPU's phys-bits.", f"{_VMX} allow_smaller_maxphyaddr;"
       f" arch/x86/kvm/vmx/vmx.h vmx_need_pf_intercept; {_X86} KVM_CAP_SMALLER_MAXPHYADDR"),
    _p("kvm_intel.nested", "inert", (), _NESTED, f"{_VMX} nested"),
    _p("kvm_amd.nested", "inert", (), _NESTED, f"{_SVM} nested"),
    _p("kvm_intel.enable_apicv", "inert", (), _POSTED, f"{_VMX} enable_apicv;"
       " arch/x86/kvm/vmx/posted_intr.c"),
    _p("kvm_amd.avic", "inert", (), _POSTED, f"{_SVM} avic; arch/x86/kvm/svm/avic.c"),
    _p("kvm.ignore_msrs", "inert", (), "a guest's access to an MSR KVM does not handle is"
       " dropped (reads 0) instead of a #GP: what a guest OS survives, not the address width,"
       " the start QEMU makes or the IOMMU.", f"{_X86} kvm_msr_ignored_check"),
    _p("kvm.report_ignored_msrs", "inert", (), "whether the ignored MSR accesses are logged.",
       f"{_X86} kvm_msr_ignored_check"),
    *(_p(f"kvm.{n}", "inert", (), "the iTLB multihit mitigation (executable huge pages split);"
         " performance only.", "arch/x86/kvm/mmu/mmu.c")
      for n in ("nx_huge_pages", "nx_huge_pages_recovery_ratio",
                "nx_huge_pages_recovery_period_ms")),
    _p("kvm.tdp_mmu", "inert", (), "which implementation of two-dimensional paging KVM runs;"
       " the guest address limits are the same (they depend on EPT/NPT being on only).",
       "arch/x86/kvm/mmu/mmu.c; arch/x86/kvm/mmu.h kvm_mmu_max_gfn"),
    _p("kvm.halt_poll_ns", "inert", (), "how long a halted vCPU polls before it sleeps;"
       " latency only.", "virt/kvm/kvm_main.c"),
    _p("kvm.enable_pmu", "inert", (), "whether guests get a virtual PMU; no claim depends on"
       " it.", _X86),
)

# Outside every family, decided on purpose (see the module docstring).
_MEMORY = (
    _p("mem", "unmodelled", ("start",), "RAM beyond it leaves the e820 map; without memmap= the"
       " kernel may place PCI resources there: where the GPU's BARs land.", f"{_DOC} mem="),
    _p("memmap", "unmodelled", ("start",), "reserves or adds e820 ranges: where the host places"
       " PCI resources.", f"{_DOC} memmap="),
    _p("nokaslr", "inert", (), "only where the kernel itself is loaded and mapped.", _DOC),
    _p("mitigations", "inert", (), "CPU vulnerability mitigations (and KVM's nx_huge_pages=auto"
       " with them): performance only.", _DOC),
)

# Boolean KVM parameters on by default, classified by value (the kernel's kstrtobool; bare is
# on): `kvm_intel.ept=0` is shadow paging, `kvm_intel.ept=1` the default.
_BY_VALUE = frozenset({"kvm_intel.ept", "kvm_amd.npt"})

# Not a token: the Intel IOMMU's state when the line gives no intel_iommu=on/off. Modelled from
# the booted kernel's build config (NodeFacts.kernel_config); not established when not read.
INTEL_DEFAULT = _p("CONFIG_INTEL_IOMMU_DEFAULT_ON", "modelled", ("host-iommu",), "the build"
                   " default decides: CONFIG_INTEL_IOMMU_DEFAULT_ON, which Debian's kernels set"
                   " and Proxmox's before 6.8 did not.", "drivers/iommu/intel/Kconfig;"
                   " /boot/config-$(uname -r)")

INPUTS: tuple[Input, ...] = (INTEL_DEFAULT, *_GENERIC, *_AMD_INPUTS, *_INTEL_INPUTS, *_VFIO_INPUTS,
                             *_PCI_INPUTS, *_OTHER, *_KVM, *_MEMORY)

# The name families in scope, and what an unlisted parameter or option of each touches.
FAMILIES: dict[str, tuple[Claim, ...]] = {
    "iommu": ("host-iommu",), "amd_iommu": ("host-iommu",), "intel_iommu": ("host-iommu",),
    "ivrs_": ("host-iommu",), "dmar": ("host-iommu",), "intremap": ("start",),
    "pci": ("iommu-groups", "start"), "pcie": ("iommu-groups", "start"),
    "vfio": ("start",), "mem_encrypt": ("host-iommu", "start"), "sme": ("host-iommu", "start"),
    "video": ("start",), "sysfb": ("start",),
    "kvm.": ("bar-space", "start"), "kvm_intel.": ("bar-space", "start"),
    "kvm_amd.": ("bar-space", "start"),
}
# Comma-list parameters whose parser reads each option on its own, by prefix.
_OPTION_LISTS = frozenset({"iommu", "amd_iommu", "intel_iommu", "pci"})
_BY_NAME = {normalize_name(i.name): i for i in INPUTS}


def _family(name: str) -> tuple[Claim, ...] | None:
    found = [f for f in FAMILIES if name.startswith(f)]
    return FAMILIES[max(found, key=len)] if found else None


def _unlisted(name: str, claims: tuple[Claim, ...]) -> Input:
    return _p(name, "unmodelled", claims, "not in pvefix's table of kernel parameters: what it"
              " does is not modelled.", _DOC)


def _option(name: str, option: str) -> Input:
    """One option of a comma-list parameter, matched by prefix as its parser does (`pci=` by
    the option's name before any `=`, `:` or digit it carries)."""
    key = option.split("=", 1)[0].split(":", 1)[0]
    exact = _BY_NAME.get(normalize_name(f"{name}={key}"))
    if exact is not None:
        return exact
    listed = [i for i in INPUTS if normalize_name(i.name).startswith(f"{name}=")
              and option.startswith(i.name.split("=", 1)[1])]
    if listed and name != "pci":
        return max(listed, key=lambda i: len(i.name))
    return _unlisted(f"{name}={key}", _family(name) or ("host-iommu",))


def _by_value(name: str, value: str | None, claims: tuple[Claim, ...]) -> Input:
    """A boolean parameter by its value (bare is on); a value the kernel cannot parse makes the
    module refuse to load, which is not modelled."""
    on = True if value is None else kstrtobool(value)
    if on is None:
        return _unlisted(name, claims)
    return _BY_NAME[f"{name}={int(on)}"]


def classify(token: Token) -> list[Input]:
    """The classified inputs one host cmdline token is (one per option of a comma-list
    parameter); [] when the token is not a parameter of this kind (root=, quiet, ...)."""
    name = normalize_name(token.name)
    claims = _family(name)
    if claims is None and name not in _BY_NAME:
        return []
    if name in _OPTION_LISTS and token.value is not None:
        return [_option(name, o) for o in token.value.split(",") if o] or [
            _unlisted(f"{name}=", claims or ("host-iommu",))]
    if name in _BY_VALUE:
        return [_by_value(name, token.value, claims or ())]
    whole = _BY_NAME.get(name)
    return [whole if whole is not None else _unlisted(name, claims or ("host-iommu",))]
