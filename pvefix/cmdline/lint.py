"""Findings about a kernel command line: invalid, no-op, duplicated or risky parameters.

Every finding has a stable `code` (documented in docs/cmdline.md) that other code and users can
match on; the message says what the kernel really does with the parameter.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal

from pydantic import BaseModel, ConfigDict

from pvefix.cmdline.pci import pci_realloc_state, realloc_option_state
from pvefix.cmdline.tokens import Cmdline, Token
from pvefix.errors import ValidationError

Severity = Literal["error", "warning", "info"]
CpuVendor = Literal["amd", "intel"]


class Finding(BaseModel):
    """One observation about a command line; `token` is the raw text it is about."""

    model_config = ConfigDict(frozen=True)

    code: str
    severity: Severity
    message: str
    token: str | None = None
    source: str | None = None
    line: int | None = None


# drivers/iommu/amd/init.c parse_amd_iommu_options: comma-separated, each matched by prefix.
AMD_IOMMU_OPTIONS = (
    "off",
    "force_isolation",
    "force_enable",
    "fullflush",
    "pgtbl_v1",
    "pgtbl_v2",
    "irtcachedis",
    "nohugepages",
    "v2_pgsizes_only",
)

# Parameters whose every occurrence is applied on top of the previous ones (several consoles,
# pci= options, IOMMU flags, memory maps, initrds...): repeating them with different values is
# normal, so they are not reported as conflicts. Names are in normalized (underscore) form.
ACCUMULATING = frozenset(
    {
        "console",
        "earlycon",
        "pci",
        "iommu",
        "amd_iommu",
        "intel_iommu",
        "video",
        "memmap",
        "acpi_osi",
        "hugepagesz",
        "hugepages",
        "initrd",
        "ip",
        "modprobe.blacklist",
        "systemd.setenv",
        "rd.luks.uuid"}
)

# Proxmox kernels enable the Intel IOMMU by default from this version on.
INTEL_IOMMU_DEFAULT_ON = (6, 8)

_KVER = re.compile(r"^(\d+)\.(\d+)")


def parse_kernel_version(version: str) -> tuple[tuple[int, int], bool]:
    """(major, minor) of a `uname -r` string and whether it is a Proxmox kernel (`-pve`)."""
    match = _KVER.match(version.strip())
    if match is None:
        raise ValidationError(f"not a kernel version: {version!r}", source="kernel_version")
    return (int(match.group(1)), int(match.group(2))), version.strip().endswith("-pve")


def lint(cmdline: Cmdline, *, kernel_version: str | None = None,
         cpu_vendor: CpuVendor | None = None) -> list[Finding]:
    """All findings about `cmdline`, in command line order within each check.

    `kernel_version` (`uname -r`, e.g. "6.8.12-4-pve") lets the linter judge `intel_iommu=on`;
    `cpu_vendor` lets it say when `intel_iommu=on` is missing on an older Proxmox kernel.
    """
    if kernel_version is not None:
        parse_kernel_version(kernel_version)  # a bad version fails here, whatever the line
    src = cmdline.source
    findings: list[Finding] = []
    if cmdline.unterminated_quote:
        findings.append(
            Finding(
                code="unterminated-quote", severity="error",
                message="a '\"' is never closed: the kernel reads the rest of the line as one "
                "value, so later parameters are lost",
                token=cmdline.tokens[-1].raw if cmdline.tokens else None, source=src))
    names = cmdline.names()
    intel_off = False  # an intel_iommu=off earlier on the line: a later `on` undoes it
    for token, name in zip(cmdline.tokens, names, strict=True):
        if name in _CHECKED and not (name == "intel_iommu" and intel_off):
            findings.extend(_check_token(token, name, kernel_version))
        if name == "intel_iommu":
            intel_off = intel_off or any(o.startswith("off") for o in _options(token))
    findings.extend(_check_intel_missing(cmdline, kernel_version, cpu_vendor))
    findings.extend(_check_repeats(cmdline))
    if pci_realloc_state(cmdline) == "off":
        findings.append(
            Finding(
                code="pci-realloc-off", severity="info",
                message="pci=realloc=off: the kernel will not resize bridge windows; in a guest "
                "with large-BAR GPUs this can leave BARs unassigned ('can't assign; no space')",
                token=_last_realloc_off(cmdline)))
    where = {"source": src, "line": cmdline.line}
    return [f.model_copy(update=where) if src and not f.source else f for f in findings]


# The parameters `_check_token` has something to say about (normalized names).
_CHECKED = frozenset({"amd_iommu", "intel_iommu", "iommu", "pcie_acs_override"})


def _check_token(token: Token, name: str, kernel_version: str | None) -> list[Finding]:
    if name == "amd_iommu":
        return _check_amd_iommu(token)
    if name == "intel_iommu":
        return _check_intel_iommu(token, kernel_version)
    if name == "iommu" and token.value is not None and "pt" in token.value.split(","):
        return [
            Finding(
                code="iommu-pt", severity="info",
                message="iommu=pt gives host-owned devices an identity (passthrough) DMA "
                "domain; GPUs assigned to a VM through VFIO always get their own translated "
                "domain, so it changes neither guest P2P nor guest DMA latency. Harmless.",
                token=token.raw)]
    if name == "pcie_acs_override":
        return [
            Finding(
                code="pcie-acs-override", severity="warning",
                message="pcie_acs_override pretends PCIe ports isolate devices that they may "
                "not isolate: it splits IOMMU groups (it never merges them) and weakens the "
                "isolation between devices that can still talk to each other",
                token=token.raw)]
    return []


def _options(token: Token) -> list[str]:
    return [opt for opt in (token.value or "").split(",") if opt]


def _check_amd_iommu(token: Token) -> list[Finding]:
    findings: list[Finding] = []
    value = token.value or ""
    pos = 0
    for option in value.split(","):
        rest = value[pos:]  # the kernel logs the rest of the string from the bad option on
        pos += len(option) + 1
        if not option or option.startswith(AMD_IOMMU_OPTIONS):
            continue
        log = f"AMD-Vi: Unknown option - '{rest}'"
        if option == "on":
            findings.append(
                Finding(
                    code="amd-iommu-on", severity="error",
                    message="amd_iommu=on is not a valid value: the kernel logs "
                    f"`{log}` and ignores it. The AMD IOMMU is on by default; remove it.",
                    token=token.raw))
        else:
            findings.append(
                Finding(
                    code="amd-iommu-unknown-option", severity="error",
                    message=f"amd_iommu option {option!r} is unknown: the kernel logs `{log}` "
                    f"and ignores it. Valid options: {', '.join(AMD_IOMMU_OPTIONS)}.",
                    token=token.raw))
    return findings


def _check_intel_iommu(token: Token, kernel_version: str | None) -> list[Finding]:
    """intel_iommu=on where the build default is on already. Not said of an `on` that follows
    an `off` (in this token or an earlier one, `lint`): intel_iommu_setup applies the options
    in turn, the last of on/off wins, so that `on` is what keeps the IOMMU on."""
    options = _options(token)
    ons = [i for i, o in enumerate(options) if o.startswith("on")]
    if kernel_version is None or not ons or any(
            o.startswith("off") for o in options[:ons[-1]]):
        return []
    version, is_pve = parse_kernel_version(kernel_version)
    if not is_pve or version < INTEL_IOMMU_DEFAULT_ON:
        return []  # on older Proxmox kernels (and unknown builds) it may be needed
    return [
        Finding(
            code="intel-iommu-on-noop", severity="info",
            message=f"intel_iommu=on is a no-op on Proxmox kernel {kernel_version.strip()}: "
            "Proxmox's kernel builds enable the Intel IOMMU by default from 6.8 on (pve-docs);"
            " this build's own default is CONFIG_INTEL_IOMMU_DEFAULT_ON in its /boot/config",
            token=token.raw)]


def _check_intel_missing(cmdline: Cmdline, kernel_version: str | None,
                         cpu_vendor: CpuVendor | None) -> list[Finding]:
    if cpu_vendor != "intel" or kernel_version is None:
        return []
    version, is_pve = parse_kernel_version(kernel_version)
    if not is_pve or version >= INTEL_IOMMU_DEFAULT_ON:
        return []
    enabled = any(
        opt.startswith("on") for t in cmdline.named("intel_iommu") for opt in _options(t))
    if enabled:
        return []
    return [
        Finding(
            code="intel-iommu-missing", severity="warning",
            message=f"Proxmox kernel {kernel_version.strip()} is older than 6.8: the Intel "
            "IOMMU stays off unless the command line has intel_iommu=on")]


def _check_repeats(cmdline: Cmdline) -> list[Finding]:
    findings: list[Finding] = []
    # Only names given more than once can repeat or conflict; counting them is one C pass.
    names = cmdline.names()
    repeated = {name for name, n in Counter(names).items() if n > 1}
    by_name: dict[str, list[Token]] = {}
    for token, name in zip(cmdline.tokens, names, strict=True):
        if name in repeated:
            by_name.setdefault(name, []).append(token)
    for name, tokens in by_name.items():
        counts: dict[str | None, int] = {}
        first_repeat: dict[str | None, Token] = {}
        for token in tokens:
            counts[token.value] = counts.get(token.value, 0) + 1
            if counts[token.value] == 2:
                first_repeat[token.value] = token
        seen = set(counts)
        # One finding per repeated parameter (not one per repeat), so a line that says
        # `quiet` 100k times gets one finding, in the order the first repeats appear.
        for value, token in first_repeat.items():
            n = counts[value]
            repeats = "twice; the repeat is" if n == 2 else f"{n} times; the repeats are"
            findings.append(
                Finding(
                    code="duplicate-parameter", severity="info",
                    message=f"{_show(token)} appears {repeats} redundant", token=token.raw))
        if len(seen) > 1 and name not in ACCUMULATING:
            last = tokens[-1]
            values = ", ".join(_show(t) for t in tokens)
            findings.append(
                Finding(
                    code="conflicting-parameter", severity="warning",
                    message=f"{last.name} is set with different values ({values}); the kernel "
                    f"applies them in order, so the last one wins: {_show(last)}",
                    token=last.raw))
    return findings


def _show(token: Token) -> str:
    return token.name if token.value is None else f"{token.name}={token.value}"


def _last_realloc_off(cmdline: Cmdline) -> str | None:
    raws = [
        t.raw
        for t in cmdline.named("pci")
        if any(realloc_option_state(o) == "off" for o in _options(t))]
    return raws[-1] if raws else None
