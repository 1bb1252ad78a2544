"""IOMMU groups: a passed device must be alone in its group (apart from its own functions).

VFIO assigns whole IOMMU groups. When a passed GPU shares its group with a device the VM does not
get (a NIC, a disk controller behind the same switch), the VM start fails or the other device is
taken from the host. The ACS override patch (`pcie_acs_override=`) splits groups by pretending
isolation the hardware may not provide; it never merges groups, and it is a no-op on ports that
already have ACS. This rule reports; it plans no change.

No device of the host in any IOMMU group means the running kernel has no IOMMU (off on the
command line, not enabled on an Intel host with a kernel before 6.8, or off in the firmware):
the groups cannot be judged, and Proxmox refuses every passthrough start until the host boots
with it ("cannot prepare PCI pass-through, IOMMU not present", qemu-server PCI.pm; a mapped
entry whose map line names an IOMMU group fails earlier, "PCI device mapping invalid (hardware
probably changed): unexpected property 'iommugroup' ...", as Proxmox's own daemons answered in
../shared/pve-api). That is an error finding, never "each passed device has its own IOMMU
group". A passed device without a group while others have one is a warning: VFIO cannot take
it.
"""

from __future__ import annotations

from pvefix.cmdline.iommu import (
    IOMMU_NOT_PRESENT,
    IOMMU_NOT_PRESENT_SOURCE,
    MAPPING_WITHOUT_GROUP,
)
from pvefix.planner.context import Context, Passed
from pvefix.planner.model import Finding, RuleResult

NAME = "iommu-groups"


def rule(ctx: Context) -> RuleResult:
    # A vGPU (mdev=) is created on its parent device, which stays with its host driver: VFIO
    # takes no IOMMU group for it (PCI.pm), so only whole devices are judged here.
    passed = [p for p in ctx.passed if not p.is_vgpu]
    if not passed:
        return RuleResult(rule=NAME, noop="only vGPU (mdev=) entries: Proxmox binds no whole"
                          " device to vfio-pci, so no IOMMU group is taken" if ctx.passed
                          else "no PCI device is passed through")
    passed_addrs = _surely_passed(passed)
    by_group: dict[int, list[str]] = {}
    for d in ctx.state.pci_devices:
        if d.iommu_group is not None and not d.is_bridge:
            by_group.setdefault(d.iommu_group, []).append(d.address)
    if ctx.state.pci_devices and not by_group:
        return RuleResult(rule=NAME, findings=[_groups_absent(ctx)])
    findings: list[Finding] = []
    for p in passed:
        for d in p.devices:
            if d.iommu_group is None:
                findings.append(_no_group(d.address, p.key))
                continue
            others = [a for a in by_group.get(d.iommu_group, [])
                      if a not in passed_addrs and a[:-2] != d.address[:-2]]
            if others:
                pool = p.is_pool and len(p.devices) > 1
                findings.append(Finding(
                    id=f"iommu.shared.{d.address}", rule=NAME, severity="warning",
                    title=f"IOMMU group {d.iommu_group} is shared",
                    detail=f"{d.address} ({p.key}) shares IOMMU group {d.iommu_group} with"
                    f" {', '.join(others)}, which the VM "
                    + ("may not get: the entry passes ONE device of mapping"
                       f" {p.entry.mapping}, picked at start, and the VM has too few of its"
                       " entries to take every device of the group" if pool
                       else "does not get")
                    + ": Proxmox binds the whole group to vfio-pci at start"
                    " (PCI.pm prepare_pci_device, pci_dev_group_bind_to_vfio), taking the"
                    " others from the host. Pass those devices too, move the card to another"
                    " slot, or (weakening isolation) use the ACS override, which only splits"
                    " groups on ports without real ACS.",
                    evidence=[f"group {d.iommu_group}: {', '.join(by_group[d.iommu_group])}"]))
    if ctx.state.pci_devices and any(not p.devices for p in passed):
        findings.append(_unknown_devices(ctx, passed))
    if findings:
        return RuleResult(rule=NAME, findings=findings)
    return RuleResult(rule=NAME, noop=_noop(passed))


def _noop(passed: list[Passed]) -> str:
    """Why the groups are fine: each device alone, or sharing only with the VM's own."""
    slots: dict[int, set[str]] = {}
    for d in (d for p in passed for d in p.devices):
        if d.iommu_group is not None:
            slots.setdefault(d.iommu_group, set()).add(d.address[:-2])
    groups = ", ".join(map(str, sorted(slots)))
    if not slots:
        return "no PCI device facts were read: the IOMMU groups are unknown"
    shared = [str(g) for g, s in sorted(slots.items()) if len(s) > 1]
    if shared:
        return ("no passed device shares its IOMMU group with a device the VM does not get"
                f" (groups {groups}; {', '.join(shared)} holds several of the VM's devices)")
    return f"each passed device has its own IOMMU group ({groups})"


def _surely_passed(passed: list[Passed]) -> set[str]:
    """The devices the VM gets whichever devices its mapping entries pick: every raw entry's,
    and a mapping's candidates where the VM has an entry for each of them (PCI.pm
    choose_hostpci_devices gives each entry one free device of its mapping)."""
    out = {d.address for p in passed if not p.is_pool for d in p.devices}
    entries: dict[str, list[Passed]] = {}
    for p in passed:
        if p.is_pool and p.entry.mapping:
            entries.setdefault(p.entry.mapping, []).append(p)
    for group in entries.values():
        candidates = {d.address[:-2] for d in group[0].devices}
        if len(group) >= len(candidates):
            out.update(d.address for d in group[0].devices)
    return out


def _unknown_devices(ctx: Context, passed: list[Passed]) -> Finding:
    """Passed entries with no device read: their groups are unknown (and why, when the facts
    are of another node than the VM's)."""
    state = ctx.state
    return Finding(
        id="iommu.unknown-devices", rule=NAME, severity="warning",
        title="Passed devices not found on the host",
        detail=f"No sysfs facts for {', '.join(p.key for p in passed if not p.devices)}, so"
        " their IOMMU groups are unknown: " + (
            f"the VM lives on node {state.vm.node} and the facts read are of"
            f" {state.node.name}; read {state.vm.node}'s own facts."
            if state.node.name != state.vm.node else "check the ids and the mapping."),
        evidence=[f"{p.key}: {p.entry.raw}" for p in passed if not p.devices])


def _groups_absent(ctx: Context) -> Finding:
    """No device of the host in any IOMMU group: the running kernel has no IOMMU."""
    return Finding(
        id="iommu.groups-absent", rule=NAME, severity="error",
        title="The host has no IOMMU groups: its IOMMU is off",
        detail=f"None of the {len(ctx.state.pci_devices)} PCI devices read on"
        f" {ctx.state.node.name} is in an IOMMU group, so the running kernel has no IOMMU"
        " (turned off on the kernel command line, not enabled there on an Intel host with"
        " a kernel before 6.8, or disabled in the firmware: VT-d / AMD-Vi). Proxmox refuses"
        f' every passthrough start until the host boots with it: "{IOMMU_NOT_PRESENT}"'
        f" ({IOMMU_NOT_PRESENT_SOURCE}), and a mapped entry fails first with"
        f' "{MAPPING_WITHOUT_GROUP}" (its map line names a group the device no longer has).'
        f' This VM\'s start fails with "{_start_refusal(ctx)}".'
        " The groups of the passed devices cannot be judged before then.",
        evidence=[f"{p.key}: {', '.join(d.address for d in p.devices) or p.entry.raw}"
                  for p in ctx.passed])


def _no_group(address: str, key: str) -> Finding:
    return Finding(
        id=f"iommu.no-group.{address}", rule=NAME, severity="warning",
        title=f"{address} is in no IOMMU group",
        detail=f"{address} ({key}) has no iommu_group in sysfs while other devices have one: the"
        " IOMMU does not cover it, and VFIO cannot take a device without a group.",
        evidence=[f"{address}: no iommu_group"])


def _start_refusal(ctx: Context) -> str:
    """Proxmox's message for this VM's start on a host without IOMMU groups: PCI.pm
    parse_hostpci checks each mapped entry (hostpci0 first) with PVE::Mapping::PCI
    assert_valid, whose first map line of this node naming an `iommugroup` fails (its path, a
    whole device as `.0`); with none, prepare_pci_device's "IOMMU not present"."""
    for p in sorted(ctx.passed, key=lambda p: p.entry.index):
        mapping = ctx.state.mapping(p.entry.mapping) if p.entry.mapping else None
        for entry in mapping.for_node(ctx.state.vm.node) if mapping else []:
            if entry.iommugroup is not None:
                path = entry.paths[0] + (".0" if entry.multifunction else "")
                return (
                    "PCI device mapping invalid (hardware probably changed): unexpected"
                    f" property 'iommugroup' configured for device '{path}'"
                )
    return IOMMU_NOT_PRESENT
