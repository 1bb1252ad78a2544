"""Gathering the registry's facts over one Node: one batch per round, the later round only
with what the first gave, and the fields equal to the tree's through the same projection."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

from pvefix.facts.node import GRUB_DROPINS, KERNEL_CONFIG, NODE_FACTS, dropin_read, round_zero
from pvefix.hosttree.scenarios import materialize_scenario
from pvefix.sim.commands import Shell
from pvefix.sim.state import NodeState
from pvefix.sources.bundle import read_bundle
from pvefix.sources.gather import gather
from pvefix.target.result import CommandResult
from tests.facts.test_kernel_config import CONFIG, WANT
from tests.fakes.node import FakeNode

# Each field a fact fills, at its default (what a node that answers nothing leaves).
DEFAULTS = {f.field: f.default for f in NODE_FACTS if f.field is not None and "plan" in f.used_by}


class _SimNode:
    """The simulator's shell over a host tree, as a Node's batch call; batches recorded."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self.batches: list[list[tuple[str, ...]]] = []

    def run_many(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]:
        self.batches.append([tuple(c) for c in commands])
        out = []
        for argv in commands:
            done = self.shell.run(shlex.join(argv))
            out.append(CommandResult(tuple(argv), done.code, done.stdout, done.stderr))
        return out


def test_a_node_is_gathered_in_two_batches_into_the_trees_fields(tmp_path: Path) -> None:
    tree = materialize_scenario("kpro6", tmp_path / "tree")
    (tree.root / "boot").mkdir(exist_ok=True)
    (tree.root / f"boot/config-{tree.meta.versions.kernel}").write_text(CONFIG)
    node = _SimNode(Shell(NodeState(tree, SimpleNamespace(dir=tmp_path), faults=None)))  # type: ignore[arg-type]
    fields, results = gather(node)
    assert node.batches[0] == round_zero("plan")
    assert node.batches[1] == [KERNEL_CONFIG.argv({"kernel_version": tree.meta.versions.kernel})]
    assert len(node.batches) == 2
    assert fields == {**DEFAULTS, "kernel_config": WANT}  # the tree has no other field's file
    bundle = read_bundle(tree.root, 100).node
    assert all(getattr(bundle, name) == value for name, value in fields.items())
    assert all(r.exit_code != 127 for r in results.values())


def test_a_node_that_answers_nothing_leaves_every_field_at_its_default() -> None:
    node = FakeNode()
    fields, _ = gather(node)
    assert fields == DEFAULTS
    assert node.commands() == round_zero("plan")  # no later round: nothing it needs is known


def test_the_drop_ins_a_first_round_lists_are_read_in_one_more_batch() -> None:
    dropin = "/etc/default/grub.d/pvefix.cfg"
    text = 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX intel_iommu=on"\n'
    node = FakeNode(answers={
        GRUB_DROPINS.argv(): CommandResult(GRUB_DROPINS.argv(), 0, f"{dropin}\n", ""),
        dropin_read(dropin): CommandResult(dropin_read(dropin), 0, text, ""),
    })
    _, results = gather(node, "check")
    assert node.commands() == [*round_zero("check"), dropin_read(dropin)]
    assert results[dropin_read(dropin)].stdout == text


def test_no_drop_in_listed_means_no_second_batch() -> None:
    node = FakeNode()
    gather(node, "check")
    assert node.commands() == round_zero("check")


def test_a_readers_own_reads_go_in_the_rounds_it_names_each_once(tmp_path: Path) -> None:
    tree = materialize_scenario("kpro6", tmp_path / "tree")
    node = _SimNode(Shell(NodeState(tree, SimpleNamespace(dir=tmp_path), faults=None)))  # type: ignore[arg-type]
    config = dropin_read("/etc/pve/qemu-server/100.conf")
    link = ("readlink", "-m", "/sys/bus/pci/devices/0000:00:00.0")
    seen: list[int] = []

    def extra(step: int, results: dict[tuple[str, ...], CommandResult]) -> list[tuple[str, ...]]:
        seen.append(step)
        if step == 0:
            return [config]
        # the second round's reads may rest on the first's answers; one asked already is not
        # sent again
        assert results[config].ok
        return [config, link] if step == 1 else []

    _, results = gather(node, "plan", extra)
    assert node.batches[0] == [*round_zero("plan"), config]
    assert node.batches[1][-1] == link
    assert config not in node.batches[1] and len(node.batches) == 2
    assert seen == [0, 1, 2]
    assert results[config].stdout == (tree.root / "etc/pve/qemu-server/100.conf").read_text()
