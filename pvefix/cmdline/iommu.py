"""What a kernel command line does to the host's IOMMU: on, off, and the default DMA domain.

Read from the kernel's own parsers:

- `iommu=` (arch/x86/kernel/pci-dma.c iommu_setup): comma-separated, by prefix; `off` sets
  no_iommu, and nothing on the line clears it (`pt`/`nopt` only pick the default domain). Both
  IOMMU drivers stop early on no_iommu (drivers/iommu/amd/init.c amd_iommu_detect,
  drivers/iommu/intel/dmar.c detect_intel_iommu): a line with `iommu=off` anywhere boots with no
  IOMMU, whatever comes after it. Judged by a real kernel: ../shared/fw-lab's guest mode.

- `amd_iommu=` (drivers/iommu/amd/init.c parse_amd_iommu_options): comma-separated options,
  each matched by prefix; `off` sets amd_iommu_disabled and nothing on the line clears it again.
- `intel_iommu=` (drivers/iommu/intel/iommu.c intel_iommu_setup): comma-separated, by prefix;
  `on` clears dmar_disabled, `off` sets it, so the last of the two wins. Proxmox kernels before
  6.8 leave the Intel IOMMU off unless `intel_iommu=on` is given (pve-docs
  qm-pci-passthrough.adoc); from 6.8 on it is on by default. That default is a build option,
  CONFIG_INTEL_IOMMU_DEFAULT_ON (drivers/iommu/intel/Kconfig), which Debian's kernels set and
  Proxmox's before 6.8 did not: where the host's /boot/config-$(uname -r) was read, it decides
  (`intel_default_on`).
- `iommu=pt` / `iommu=nopt` (arch/x86/kernel/pci-dma.c iommu_setup) and `iommu.passthrough=`
  (drivers/iommu/iommu.c iommu_set_def_domain_type, a kstrtobool) all set the default domain
  type: identity (passthrough) or translated. They are early parameters read in command line
  order, so the last one wins; `iommu.passthrough=1` does exactly what `iommu=pt` does.

Proxmox refuses every passthrough start without an IOMMU: qemu-server PCI.pm
prepare_pci_device dies with "cannot prepare PCI pass-through, IOMMU not present" when
/sys/class/iommu is empty (PVE::SysFSTools::check_iommu_support); a mapped entry whose map line
names an IOMMU group fails before that, in the mapping's check (checked against Proxmox's own
daemons, ../shared/pve-api).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pvefix.cmdline.lint import INTEL_IOMMU_DEFAULT_ON, CpuVendor, parse_kernel_version
from pvefix.cmdline.tokens import Cmdline, Token

IOMMU_NOT_PRESENT = "cannot prepare PCI pass-through, IOMMU not present"
IOMMU_NOT_PRESENT_SOURCE = "qemu-server src/PVE/QemuServer/PCI.pm prepare_pci_device"
# A mapped entry fails earlier on such a host when its map line names an IOMMU group (Proxmox
# writes one): parse_hostpci -> PVE::Mapping::PCI::assert_valid finds the device in no group.
MAPPING_WITHOUT_GROUP = (
    "PCI device mapping invalid (hardware probably changed): unexpected property 'iommugroup'"
    " configured for device ..."
)

IntelState = Literal["on", "off"]


def _options(token: Token) -> list[str]:
    return [opt for opt in (token.value or "").split(",") if opt]


def generic_off_tokens(cmdline: Cmdline) -> list[Token]:
    """The generic `iommu=` tokens with an `off` option: each one leaves the host with no IOMMU,
    whatever the vendor and whatever follows on the line."""
    return [t for t in cmdline.named("iommu") if any(o.startswith("off") for o in _options(t))]


def amd_off_tokens(cmdline: Cmdline) -> list[Token]:
    """The `amd_iommu=` tokens with an `off` option: each one disables the AMD IOMMU."""
    return [t for t in cmdline.named("amd_iommu") if any(o.startswith("off") for o in _options(t))]


def intel_setting(cmdline: Cmdline) -> tuple[IntelState | None, Token | None]:
    """The last `on`/`off` the line gives `intel_iommu=` and the token that gives it."""
    state: IntelState | None = None
    decider: Token | None = None
    for token in cmdline.named("intel_iommu"):
        for option in _options(token):
            if option.startswith("on"):
                state, decider = "on", token
            elif option.startswith("off"):
                state, decider = "off", token
    return state, decider


KernelConfig = Mapping[str, str]
DEFAULT_ON_KEY = "CONFIG_INTEL_IOMMU_DEFAULT_ON"



def intel_default_on(kernel_config: KernelConfig | None) -> bool | None:
    """Whether the booted kernel's build turns VT-d on without `intel_iommu=on`, from its
    /boot/config (the CONFIG_* lines); None when that file was not read. A Kconfig bool that is
    not set is absent from the file's CONFIG_ lines: off."""
    if kernel_config is None:
        return None
    return (kernel_config.get("CONFIG_INTEL_IOMMU") == "y"
            and kernel_config.get(DEFAULT_ON_KEY) == "y")


def intel_needs_on(kernel_version: str | None, kernel_config: KernelConfig | None = None) -> bool:
    """True when this kernel's Intel IOMMU is off by default: from its build config when read,
    else on a Proxmox kernel older than 6.8 (pve-docs)."""
    default = intel_default_on(kernel_config)
    if default is not None:
        return not default
    if kernel_version is None:
        return False
    version, is_pve = parse_kernel_version(kernel_version)
    return is_pve and version < INTEL_IOMMU_DEFAULT_ON


def off_tokens(cmdline: Cmdline, vendor: CpuVendor | None) -> list[Token]:
    """The tokens that leave this vendor's IOMMU off (both vendors' when it is unknown), the
    generic `iommu=off` first."""
    found: list[Token] = generic_off_tokens(cmdline)
    if vendor in ("amd", None):
        found += amd_off_tokens(cmdline)
    if vendor in ("intel", None):
        state, _ = intel_setting(cmdline)
        if state == "off":
            found += [t for t in cmdline.named("intel_iommu")
                      if any(o.startswith("off") for o in _options(t))]
    return found


def iommu_enabled(cmdline: Cmdline, vendor: CpuVendor | None, kernel_version: str | None,
                  kernel_config: KernelConfig | None = None) -> bool:
    """Whether a kernel booted with this line brings the IOMMU up (firmware permitting)."""
    if off_tokens(cmdline, vendor):
        return False
    if vendor == "intel" and intel_needs_on(kernel_version, kernel_config):
        return intel_setting(cmdline)[0] == "on"
    return True


def _bool(text: str | None) -> bool | None:
    """The kernel's kstrtobool: y/Y/1/on true, n/N/0/off false, anything else unparsed."""
    if not text:
        return None
    if text[0] in "yY1":
        return True
    if text[0] in "nN0":
        return False
    if text[:2].lower() == "on":
        return True
    if text[:2].lower() == "of":
        return False
    return None


#: The kernel's kstrtobool, for the closed world's boolean module parameters (kvm_intel.ept).
kstrtobool = _bool


def passthrough_token(cmdline: Cmdline) -> Token | None:
    """The token that makes the default DMA domain identity (iommu=pt, iommu.passthrough=1),
    when the last of the tokens that decide it does; None when translated or not set."""
    decider: Token | None = None
    for token, name in zip(cmdline.tokens, cmdline.names(), strict=True):
        if name == "iommu":
            for option in _options(token):
                if option.startswith("nopt"):
                    decider = None
                elif option.startswith("pt"):
                    decider = token
        elif name == "iommu.passthrough":
            value = _bool(token.value)
            if value is not None:
                decider = token if value else None
    return decider
