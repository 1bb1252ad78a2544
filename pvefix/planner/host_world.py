"""The host cmdline's closed world, as the host-iommu rule applies it (pure).

Every token of the configured (effective) host cmdline is classified by
`pvefix.closedworld.kernel_params.classify`. An unmodelled one makes each claim it touches "not
established" (a finding, `closedworld.not_established`); one that touches the host-iommu claim
stops the rule from writing anything, since every host edit rests on that verdict. Where the
verdict rests on the Intel IOMMU's build default (no intel_iommu=on/off on the line), the
booted kernel's /boot/config decides, and the rule says which it relied on; not read, the
verdict is not established.
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
                    [f"{where}: {token.raw}"],
                )
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
        f" decides whether the Intel IOMMU is on, and {config} was not read. pvefix writes no"
        f" host edit that rests on it: add intel_iommu=on to the command line, or give pvefix"
        f" that file (the bundle's boot/ folder; `grep {DEFAULT_ON_KEY} {config}` on the host),"
        f" then plan again.",
        [f"configured: {line.render().strip()}"],
    )
