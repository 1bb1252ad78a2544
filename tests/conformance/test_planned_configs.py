"""Proxmox's own code starts every VM config a plan leads to, warning only of what the plan says.

For every planner case (tests/planner/cases, with its options) and every VM of every built-in
scenario (planned without and with --p2p), the config after each phase prefix (pending merged:
what the next cold start runs) goes through qemu-server's config_to_command with the tree's PCI
mapping and devices, the node's CPU vendor and QEMU version. It must build, and a WARN: line may
appear only when the plan states that risk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pvefix.hosttree import resolve_scenario
from pvefix.planner import plan as make_plan
from pvefix.planner.model import PlanOptions
from pvefix.sources.bundle import read_bundle
from pvefix.state import HostState
from tests.conformance.harness import (
    ask,
    configs_after_phases,
    inputs_of,
    refusal_explained,
    scenario_vms,
    unexplained_warnings,
)
from tests.planner.loader import CASES, build_state, load_case

CASE_FILES = sorted(CASES.glob("*.json"))

pytestmark = pytest.mark.conformance


def _check(oracle: Any, state: HostState, tree: Path | None,
           options: PlanOptions | None = None) -> None:
    plan = make_plan(state, options)
    inputs = inputs_of(state, tree)
    for number, text in configs_after_phases(state, plan):
        res = ask(oracle, text, inputs, state.vm.vmid)
        where = f"VM {state.vm.vmid} after phase {number}"
        if not res.ok and refusal_explained(res.error, plan):
            continue  # the plan says, in Proxmox's words, that this VM cannot start
        assert res.ok, f"{where}: Proxmox refuses: {res.error}\n{text}"
        bad = unexplained_warnings(res, plan, number)
        assert not bad, f"{where}: Proxmox warns and the plan does not say so: {bad}\n{text}"


@pytest.mark.parametrize("path", CASE_FILES, ids=lambda p: p.stem)
def test_every_planner_case_leads_to_configs_proxmox_starts(oracle: Any, path: Path) -> None:
    case = load_case(path)
    _check(oracle, build_state(case), resolve_scenario(case["scenario"]),
           PlanOptions(**case.get("options", {})))


@pytest.mark.parametrize("p2p", [False, True], ids=["plain", "p2p"])
@pytest.mark.parametrize("scenario,vmid", scenario_vms(12), ids=lambda v: str(v))
def test_every_scenario_vm_leads_to_configs_proxmox_starts(
    oracle: Any, scenario: str, vmid: int, p2p: bool
) -> None:
    tree = resolve_scenario(scenario)
    _check(oracle, read_bundle(tree, vmid), tree, PlanOptions(p2p=p2p))
