"""pcie=1 on every hostpci entry that passes a PCIe GPU, never activated before q35.

Why: without `pcie=1` a passed GPU sits on the root bus as a conventional PCI device even on
q35: the guest driver sees no PCIe link (speed and width read as unknown), cannot use PCIe
capabilities and, with several GPUs, cannot reason about their topology. With `pcie=1` each
entry gets its own PCIe root port.

`pcie=1` needs q35. Proxmox does not check it when the config is written, only when the VM
starts (`q35 machine model is not enabled`), and a failed start leaves the new config in place.
So this change always requires the q35 change (or an existing q35 machine) and is never
activated before it. Undo: remove `,pcie=1` (restart again).
"""

from __future__ import annotations

from pvefix.planner.context import Context
from pvefix.planner.model import Change, Risk, RuleResult, VmConfigChange
from pvefix.planner.rules import q35

NAME = "pcie"


def rule(ctx: Context) -> RuleResult:
    if not ctx.gpu_entries:
        return RuleResult(rule=NAME, noop=ctx.no_gpu_reason())
    if any(p.entry.legacy_igd for p in ctx.passed):
        return RuleResult(rule=NAME, noop="legacy-igd keeps this VM on i440fx; pcie=1 needs q35")
    if ctx.machine_error or ctx.machine.family not in ("i440fx", "q35"):
        return RuleResult(rule=NAME, noop="the machine is not an x86 machine pvefix can move")
    needs_q35 = ctx.machine.family != "q35"
    changes: list[Change] = []
    for p in ctx.gpu_entries:
        if p.entry.pcie:
            continue
        before = p.entry.raw
        after = p.entry.with_option("pcie", "1")
        names = sorted({d.address for d in p.devices if d.is_display})
        changes.append(
            VmConfigChange(
                id=f"vm.{p.key}.pcie", rule=NAME, key=p.key, before=before, after=after,
                reason="A PCIe GPU passed without pcie=1 appears to the guest as a PCI device.",
                risk=Risk(
                    level="low",
                    text="Needs q35: on i440fx the VM would fail to start with 'q35 machine model"
                    " is not enabled'. Planned together with (never before) the q35 change."),
                evidence=[
                    f"{p.key}: {before}",
                    (
                        f"mapping {p.entry.mapping} on {ctx.state.vm.node}: "
                        if p.entry.mapping
                        else "GPU: "
                    )
                    + ", ".join(names)],
                inverse=f"{p.key}: {before}", disruption="vm-restart",
                requires=[q35.CHANGE_ID] if needs_q35 else [], needs_root_pam=p.entry.is_raw,
                effect=(
                    "Takes effect at the next cold start. Gives the GPU a PCIe root port; it does"
                    " not by itself make GPU peer-to-peer work (see the topology finding)."
                ),
            )
        )
    if not changes:
        return RuleResult(rule=NAME, noop="every GPU entry already has pcie=1")
    return RuleResult(rule=NAME, changes=changes)
