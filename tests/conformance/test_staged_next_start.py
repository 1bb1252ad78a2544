"""A running VM with an admin's staged changes in [PENDING] (`delete: hostpci2`, a swapped
hostpci1/hostpci3, `cpu: host`): after `apply --restart` in the simulator, the config the VM
started with is the one the plan said (its next start, staged changes kept), and Proxmox's own
code (the oracle's `cmd`) builds it, as it builds the plan's config_after."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pvefix.hosttree import materialize_scenario
from pvefix.planner import plan as make_plan
from pvefix.sources.bundle import read_bundle
from pvefix.vmconfig.nextstart import NextStart
from tests.conformance.harness import ask, inputs_of, merged
from tests.executor.conftest import Node, node  # noqa: F401  (the fixture)

pytestmark = pytest.mark.conformance

CASE = Path(__file__).parents[1] / "planner" / "cases" / "pending-staged.json"


def _staged_tree(dest: Path) -> Path:
    """intel-grub, with VM 200's config holding the staged changes of the case file."""
    tree = materialize_scenario("intel-grub", dest)
    text = json.loads(CASE.read_text(encoding="utf-8"))["edit"]["config_text"]
    tree.vm_config_path(200).write_text(text, encoding="utf-8")
    return dest


def test_after_apply_and_restart_proxmox_starts_what_the_plan_said(
    oracle: Any, node: Callable[..., Node], tmp_path: Path  # noqa: F811
) -> None:
    tree = _staged_tree(tmp_path / "staged-tree")
    state = read_bundle(tree, 200)
    assert state.vm.status == "running"
    plan = make_plan(state)
    promised = NextStart.from_text(plan.config_after)
    inputs = inputs_of(state, tree)
    verdict = ask(oracle, merged(plan.config_after), inputs, 200)
    assert verdict.ok, f"Proxmox refuses the plan's config_after: {verdict.error}"
    n = node(str(tree))
    n.apply(200, 1, restart=True)
    text = n.conf(200).decode()
    started = NextStart.from_text(text)
    assert not started.has_pending, "the cold start committed [PENDING]"
    assert started.values == promised.values, "the VM started with what the plan said"
    assert started.value("hostpci2") is None and started.value("cpu") == "host"
    assert started.value("hostpci1") == "0000:9b:00.0,x-vga=1,pcie=1"
    assert "q35" in (n.sim.state.run_state(200).running_machine or "")
    result = ask(oracle, text, inputs, 200)
    assert result.ok, f"Proxmox refuses what the VM started with: {result.error}\n{text}"
