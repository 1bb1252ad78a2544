"""Audit round 2: claims of the plan's text that the case files (ids and no-op reasons) do not
pin, on the situations of the audit2-* case files."""

from __future__ import annotations

from pvefix.planner import plan
from pvefix.planner.model import PlanOptions

from .loader import CASES, build_state, load_case


def _finding(case_name: str, finding_id: str) -> tuple[str, list[str]]:
    case = load_case(CASES / f"{case_name}.json")
    result = plan(build_state(case), PlanOptions(**case.get("options", {})))
    found = [f for f in result.findings if f.id == finding_id]
    assert len(found) == 1, [f.id for f in result.findings]
    return found[0].detail, list(found[0].evidence)


def test_a_raw_entry_of_several_gpus_passes_them_all_not_one_of_a_pool() -> None:
    # qemu-server PCI.pm: the ids of a raw `host=a;b` entry are one alternative, all passed
    # as functions of one slot; only a mapping picks one of its devices at start
    _, evidence = _finding("audit2-raw-entry-of-two-gpus", "topology.root-complexes")
    assert "all of pci0000:00 + pci0000:20: hostpci0" in evidence, evidence
    assert not any("one of" in e or "pool" in e for e in evidence), evidence


def test_the_x_vga_advice_offers_no_clique_map_for_a_gpu_that_takes_no_clique() -> None:
    # the CLI refuses --clique-map for an entry that passes no NVIDIA GPU (QEMU gives
    # x-nv-gpudirect-clique to NVIDIA devices only): the advice must not offer it
    detail, _ = _finding("audit2-intel-off-then-on-arc-xvga", "p2p.kvm-hidden")
    assert "--clique-map to declare" not in detail, detail
    assert "hostpci0 is no NVIDIA GPU" in detail, detail
    assert "remove x-vga=1" in detail, detail


def test_the_x_vga_advice_still_offers_clique_map_for_an_nvidia_display_gpu() -> None:
    detail, _ = _finding("p2p-xvga-display", "p2p.kvm-hidden")
    assert "in --clique-map to declare it a compute GPU" in detail, detail
