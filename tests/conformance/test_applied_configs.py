"""Proxmox's own code on what pvefix really wrote: after each apply and after each rollback.

Every phase of every VM of the built-in scenarios (planned without and with --p2p) is applied
against a simulator (real HTTPS and SSH), phase after phase; the VM's raw config as the
simulator then holds it (pending merged) goes through qemu-server's config_to_command and must
build, warning only of what the plan states. After the rollback of each phase, Proxmox must
judge the config exactly as it judged the original one (rollback restores; it does not repair).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pvefix.hosttree import resolve_scenario
from pvefix.hosttree.scenarios import list_scenarios
from pvefix.planner import plan as make_plan
from pvefix.planner.model import PlanOptions
from pvefix.sources.bundle import read_bundle
from tests.conformance.harness import ask, inputs_of, merged, scenario_vms, unexplained_warnings
from tests.executor.conftest import Node, node  # noqa: F401  (the fixture)

pytestmark = pytest.mark.conformance


@pytest.mark.parametrize("p2p", [False, True], ids=["plain", "p2p"])
@pytest.mark.parametrize("scenario,vmid", scenario_vms(2), ids=lambda v: str(v))
def test_each_applied_and_rolled_back_config_is_judged_by_proxmox(
    oracle: Any, node: Callable[..., Node], scenario: str, vmid: int, p2p: bool  # noqa: F811
) -> None:
    tree = resolve_scenario(scenario)
    state = read_bundle(tree, vmid)
    options = PlanOptions(p2p=p2p)
    plan = make_plan(state, options)
    if not plan.has_changes:
        pytest.skip(f"{scenario} VM {vmid}: nothing to apply")
    if p2p and plan.phase(3) is None:
        pytest.skip(f"{scenario} VM {vmid}: no P2P phase (the plain run covers the rest)")
    inputs = inputs_of(state, tree)
    generated = any(i.name == scenario and i.generated for i in list_scenarios())
    original = ask(oracle, merged(state.vm.config_text), inputs, vmid)
    n = node(scenario)
    verdicts = [(original.ok, original.error, original.warnings)]
    phases = sorted(plan.phases, key=lambda p: p.number)
    for phase in phases:
        kind = phase.disruption
        # Host phases reboot the node with --stop-others (a neighbour runs in some scenarios),
        # except on a generated cluster: rebooting `large`'s node shuts ~80 running VMs down
        # and up again for a VM config the reboot does not change.
        reboot = kind == "host-reboot" and not generated
        n.apply(vmid, phase.number, restart=kind == "vm-restart", reboot_host=reboot,
                stop_others=reboot, plan_options=options)
        text = n.conf(vmid).decode("utf-8", "surrogateescape")
        res = ask(oracle, merged(text), inputs, vmid)
        where = f"{scenario} VM {vmid} after applying phase {phase.number}"
        assert res.ok, f"{where}: Proxmox refuses: {res.error}\n{text}"
        bad = unexplained_warnings(res, plan, phase.number)
        assert not bad, f"{where}: Proxmox warns and the plan does not say so: {bad}"
        verdicts.append((res.ok, res.error, res.warnings))
    for k in range(len(phases), 0, -1):
        n.rollback(vmid)
        text = n.conf(vmid).decode("utf-8", "surrogateescape")
        back = ask(oracle, merged(text), inputs, vmid)
        assert (back.ok, back.error, back.warnings) == verdicts[k - 1], (
            f"{scenario} VM {vmid}: after rolling back phase {phases[k - 1].number} Proxmox"
            " judges the config differently from before that phase"
        )
