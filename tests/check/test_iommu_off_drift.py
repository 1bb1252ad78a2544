"""A host cmdline that turns the IOMMU off is never what `desired` requires, and `check` never
calls a host configured or booted with it "no drift" (issue 33; arch/x86/kernel/pci-dma.c
iommu_setup: `iommu=off` sets no_iommu, nothing later clears it)."""

from __future__ import annotations

import pytest

from pvefix.check.compare import compare_node
from pvefix.desired.derive import node_desired
from pvefix.hosttree import resolve_scenario
from pvefix.observed import ObservedNode
from pvefix.paths import KERNEL_CMDLINE, PROC_CMDLINE
from pvefix.sources.bundle import read_bundle
from pvefix.state import FileFact

BASE = read_bundle(resolve_scenario("kpro6"), 100)
ROOT = "root=ZFS=rpool/ROOT/pve-1 boot=zfs"


def _desired(configured: str, running: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    state = BASE.model_copy(update={"files": {
        **BASE.files,
        KERNEL_CMDLINE: FileFact.of(KERNEL_CMDLINE, configured + "\n"),
        PROC_CMDLINE: FileFact.of(PROC_CMDLINE, running + "\n"),
    }})
    node = node_desired(state)
    assert node is not None
    return node.cmdline.required, node.cmdline.forbidden


@pytest.mark.parametrize("off", ["iommu=off", "amd_iommu=off", "iommu=off,pt"])
def test_an_iommu_off_token_is_never_required(off: str) -> None:
    required, forbidden = _desired(f"{ROOT} {off} iommu=pt", ROOT)
    assert off not in required, required
    assert "iommu=pt" in required or off == "iommu=off,pt"
    assert {"iommu=off", "amd_iommu=off", "intel_iommu=off"} <= set(forbidden)


def test_a_host_booted_with_iommu_off_is_drift_even_when_the_config_is_fixed() -> None:
    _, forbidden = _desired(f"{ROOT} iommu=pt", f"{ROOT} iommu=off iommu=pt")
    rule = node_desired(BASE.model_copy(update={"files": {
        **BASE.files, KERNEL_CMDLINE: FileFact.of(KERNEL_CMDLINE, f"{ROOT} iommu=pt\n")}}))
    assert rule is not None and "iommu=off" in forbidden
    node = ObservedNode(name="kpro6", loader="systemd-boot", configured=f"{ROOT} iommu=pt",
                        running=f"{ROOT} iommu=off iommu=pt")
    items = {i.property: i for i in compare_node(rule, node)}
    item = items["cmdline iommu=off (forbidden)"]
    assert item.status == "drift", item
    assert item.where == "booted", item
