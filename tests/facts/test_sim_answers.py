"""The simulator answers every command of the registry from its host tree, and each answer
parses to the value the tree keeps for that fact (its file, or its key of pvefix-host.json):
a new fact whose command the simulator cannot answer, or answers otherwise, fails here."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pvefix.facts.model import Command
from pvefix.facts.node import NODE_FACTS
from pvefix.facts.project import META, tree_answers, tree_known
from pvefix.hostfacts import BootToolFacts
from pvefix.hosttree.meta import HostMeta
from pvefix.hosttree.scenarios import SCENARIOS_DIR, materialize_scenario
from pvefix.sim.commands import Shell
from pvefix.sim.state import NodeState
from pvefix.target.result import CommandResult

SCENARIOS = sorted(p.name for p in SCENARIOS_DIR.iterdir()
                   if p.is_dir() and not p.name.startswith("_"))
# How pvefix-host.json keeps each `meta:` fact, as the fact's parser gives it.
FROM_META: dict[str, Callable[[HostMeta], Any]] = {
    "hostname": lambda m: m.node,
    "kernel_version": lambda m: m.versions.kernel,
    "boot_tool": lambda m: BootToolFacts(exit_code=m.proxmox_boot_tool.exit_code,
                                         output=m.proxmox_boot_tool.output),
    "acs": lambda m: dict(m.acs),
    "cpu_phys_bits": lambda m: m.cpu.phys_bits,
    "packages": lambda m: m.versions.edk2,
}
# What of a parsed value the tree keeps (the packages: only the OVMF build's version).
KEPT: dict[str, Callable[[Any], Any]] = {
    "hostname": lambda v: v.split(".")[0] if v else v,
    "acs": lambda v: v or {},
    "packages": lambda v: v.get("pve-edk2-firmware-ovmf") or v.get("pve-edk2-firmware"),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_simulator_answers_every_fact_as_the_tree_keeps_it(
        scenario: str, tmp_path: Path) -> None:
    tree = materialize_scenario(scenario, tmp_path / "tree")
    shell = Shell(NodeState(tree, SimpleNamespace(dir=tmp_path), faults=None))  # type: ignore[arg-type]
    known = tree_known(NODE_FACTS, tree.meta) | {"kernel_version": tree.meta.versions.kernel}
    from_tree = tree_answers(tree.read_text)
    for fact in NODE_FACTS:
        assert isinstance(fact.read, Command)
        argv = fact.argv(known)
        done = shell.run(shlex.join(argv))
        assert done.code != 127, f"{scenario}: the simulator cannot run {argv}"
        got = fact.parse(CommandResult(argv, done.code, done.stdout, done.stderr))
        if fact.tree.startswith(META):
            assert fact.name in FROM_META, f"say how the tree keeps {fact.name} (FROM_META)"
            want = FROM_META[fact.name](tree.meta)
        elif "*" in fact.tree:  # the GRUB drop-ins: listed, each then read as a file
            want = sorted("/" + p.relative_to(tree.root).as_posix()
                          for p in tree.root.glob(fact.tree))
        else:
            want = fact.parse(from_tree(fact, known))
        assert KEPT.get(fact.name, lambda v: v)(got) == want, f"{scenario}: {fact.name}"
