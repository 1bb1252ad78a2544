"""The many-VM desired-state builder gives what merging the one-VM desired states gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvefix.desired import desired_from_state, dumps_desired
from pvefix.desired.store import merge
from pvefix.desired.tree import desired_from_tree
from pvefix.errors import PvefixError
from pvefix.hosttree import materialize_scenario
from pvefix.sources.bundle import read_tree


@pytest.mark.parametrize(("scenario", "vms", "count"), [
    ("cluster3", None, None),  # every VM, three nodes with their own host files
    ("kpro6", None, None),
    ("large", 300, 40),  # a sample: the one-VM path lists all 300 VMs for each VM it reads
])
def test_tree_builder_matches_the_one_vm_path(
    tmp_path: Path, scenario: str, vms: int | None, count: int | None,
) -> None:
    tree = materialize_scenario(scenario, tmp_path / "tree", vms=vms)
    wanted = sorted(tree.vms())[:count] if count else sorted(tree.vms())
    one_by_one = merge([(str(v), desired_from_state(read_tree(tree, v))) for v in wanted])
    at_once = desired_from_tree(tree, wanted if count else None)
    assert dumps_desired(at_once) == dumps_desired(one_by_one)
    assert at_once == one_by_one
    assert sorted(at_once.vms) == wanted and at_once.nodes


def test_tree_builder_refuses_an_unknown_vm(tmp_path: Path) -> None:
    tree = materialize_scenario("kpro6", tmp_path / "tree")
    with pytest.raises(PvefixError, match="no VM 999"):
        desired_from_tree(tree, [999])
