"""Every read path gives every fact the same value: for each shipped scenario, the state read
live from the simulator, the state `pvefix collect` gathers from a host built from the same
tree (the real script, run with `sh`, then `pvefix collect import`), and the state read from
the tree itself. A fact one path forgets (the HA state once was) fails here."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pvefix.collect import import_bundle, render_script
from pvefix.hosttree import load_tree, resolve_scenario
from pvefix.hosttree.scenarios import SCENARIOS_DIR
from pvefix.sources.bundle import read_bundle_many
from pvefix.sources.live import read_live_many
from pvefix.state import HostState
from tests.collect.fakehost import make_fake_host
from tests.simkit import grant
from tests.sources.test_live import assert_same_for_planner, connection

if TYPE_CHECKING:
    from pvefix.sim.serve import ReadyInfo

SCENARIOS = sorted(p.name for p in SCENARIOS_DIR.iterdir()
                   if p.is_dir() and not p.name.startswith("_"))


def _collected(tmp_path: Path, scenario: str) -> Path:
    host = make_fake_host(tmp_path / "fake", scenario)
    run = subprocess.run(["sh", "-s"], input=render_script(), env=host.env(), text=True,
                         capture_output=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    node = load_tree(resolve_scenario(scenario)).meta.node
    dest = tmp_path / "imported"
    import_bundle(host.root / f"root/pvefix-bundle-{node}.tar.gz", dest)
    return dest


def _local_vms(scenario: str) -> list[int]:
    tree = load_tree(resolve_scenario(scenario))
    return [vmid for vmid, node in tree.vms().items() if node == tree.meta.node]


def _same(got: HostState, want: HostState, path: str) -> None:
    for name in ("node", "boot_tool", "files", "acs", "mappings", "pci_devices", "vm"):
        assert getattr(got, name) == getattr(want, name), f"{path}: {name} of VM {want.vm.vmid}"


def _all_paths_agree(scenario: str, start: Callable[..., ReadyInfo], tmp_path: Path) -> None:
    vmids = _local_vms(scenario)
    assert vmids, f"{scenario}: no VM on its own node"
    tree = read_bundle_many(resolve_scenario(scenario), vmids)
    collected = read_bundle_many(_collected(tmp_path, scenario), vmids)
    for got, want in zip(collected, tree, strict=True):
        _same(got, want, "collect")
    info = start(scenario)
    grant(info.root, info.token_id)  # a privilege-separated token sees nothing without
    live = read_live_many(connection(info, tmp_path), vmids)
    for got, want in zip(live, tree, strict=True):
        assert_same_for_planner(got, want)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_live_collect_and_tree_read_every_fact_alike(
        scenario: str, fresh_sim: Callable[..., ReadyInfo], tmp_path: Path) -> None:
    _all_paths_agree(scenario, fresh_sim, tmp_path)


def test_an_ha_managed_vm_is_one_on_every_path(
        fresh_sim: Callable[..., ReadyInfo], tmp_path: Path) -> None:
    tree = tmp_path / "kpro6-ha"
    shutil.copytree(resolve_scenario("kpro6"), tree)
    meta = json.loads((tree / "pvefix-host.json").read_text())
    meta["vms"]["100"]["ha_state"] = "started"
    meta["vms"]["101"]["ha_state"] = "ignored"
    (tree / "pvefix-host.json").write_text(json.dumps(meta, indent=2) + "\n")
    assert read_bundle_many(tree, [100])[0].vm.ha_state == "started"
    _all_paths_agree(str(tree), fresh_sim, tmp_path)
