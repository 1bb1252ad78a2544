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


def _title(case_name: str, finding_id: str) -> str:
    case = load_case(CASES / f"{case_name}.json")
    result = plan(build_state(case), PlanOptions(**case.get("options", {})))
    return next(f.title for f in result.findings if f.id == finding_id)


def test_gpus_behind_a_switch_are_not_said_to_have_none() -> None:
    # parent_path of the L40S: root complex, root port, switch upstream, switch downstream
    title = _title("audit2-pool-candidates-share-a-group", "topology.root-complexes")
    assert "no switch" not in title, title
    assert "hostpci0 behind a switch" in title, title


def test_gpus_each_right_below_a_root_port_are_said_to_have_no_switch() -> None:
    title = _title("audit2-intel-off-then-on-arc-xvga", "topology.root-complexes")
    assert title.endswith("each on its own PCIe root complex (no switch)"), title


def test_a_pool_entry_says_its_group_peer_may_not_be_picked() -> None:
    detail, evidence = _finding("audit2-pool-candidates-share-a-group",
                                "iommu.shared.0000:9a:00.0")
    assert "shares IOMMU group 72 with 0000:9b:00.0, which the VM may not get" in detail
    assert "ONE device of mapping l40s" in detail, detail
    assert evidence == ["group 72: 0000:9a:00.0, 0000:9b:00.0"]


def test_an_unread_args_cpu_gives_no_kvm64_verdict() -> None:
    # QEMU keeps the last -cpu (args are appended last): a -cpu pvefix cannot read is the
    # VM's CPU, not "no cpu line (kvm64)", and a cpu: change would not reach it
    case = load_case(CASES / "audit2-args-cpu-unread-no-kvm64-verdict.json")
    result = plan(build_state(case), PlanOptions())
    evidence = [e for f in result.findings if f.rule == "bar-space" for e in f.evidence]
    assert not any("kvm64" in e or e.startswith("today:") for e in evidence), evidence
    assert "bar.cpu-host-alternative" not in {f.id for f in result.findings}
    assert any("host-phys-bits-limit=39 (QEMU keeps the last -cpu" in e for e in evidence)


def test_q35_kept_for_a_guest_running_q35_advises_no_nic_pin() -> None:
    case = load_case(CASES / "audit2-runs-q35-machine-delete-staged.json")
    result = plan(build_state(case), PlanOptions())
    change = next(c for p in result.phases for c in p.changes if c.id == "vm.machine.q35")
    assert "runs q35 now (running-machine pc-q35-10.1+pve0)" in change.risk.text
    assert "may be renamed on q35" not in change.risk.text
    assert change.risk.mitigation is None or "Name=ens18" not in change.risk.mitigation
