"""The simulator answers a fact by its declaration alone: a registry with facts the simulator
has never heard of (commands it has no handler for) is answered from the tree, and the same
commands without those declarations are `command not found`."""

from __future__ import annotations

import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pvefix.facts import parse
from pvefix.facts.model import Command, Fact
from pvefix.facts.node import NODE_FACTS, PLAN
from pvefix.facts.project import known_from, node_fields
from pvefix.facts.rounds import rounds
from pvefix.hosttree.scenarios import materialize_scenario
from pvefix.hosttree.tree import HostTree
from pvefix.sim.commands import Shell
from pvefix.sim.state import NodeState
from pvefix.target.result import CommandResult

KNOB_PATH = "/sys/module/made_up/parameters/knob"
# Three throw-away facts, one of each kind of tree: a file, a file named by another fact's
# value, and a key of pvefix-host.json; none of their commands exists in the simulator.
KNOB: Fact[str | None] = Fact(
    "knob", Command(("read-knob", KNOB_PATH)), parse.first_line, KNOB_PATH.lstrip("/"), None,
    PLAN, field="knob")
ORDER: Fact[str | None] = Fact(
    "module_order", Command(("module-order", "--release", "{kernel_version}")),
    parse.first_line, "lib/modules/{kernel_version}/modules.order", None, PLAN,
    needs=("kernel_version",), field="module_order")
RELEASE: Fact[str | None] = Fact(
    "pve_release", Command(("pve-release", "--short")), parse.first_line, "meta:versions.pve",
    None, PLAN, field="pve_release", shown=parse.line)
NEW = (KNOB, ORDER, RELEASE)
REGISTRY = (*NODE_FACTS, *NEW)
WORD = st.text("abcdefghijklmnopqrstuvwxyz0123456789.-_", min_size=1, max_size=20)


def _shell(tree: HostTree, tmp_path: Path) -> Shell:
    state = NodeState(tree, SimpleNamespace(dir=tmp_path), faults=None)  # type: ignore[arg-type]
    state.facts = REGISTRY
    return Shell(state)


def _gathered(shell: Shell) -> dict[str, Any]:
    """The registry's rounds run on the shell, projected as every reader projects them."""
    results: dict[tuple[str, ...], CommandResult] = {}
    known: dict[str, str] = {}
    for batch in rounds(list(REGISTRY)):
        for fact in batch:
            argv = fact.argv(known)
            done = shell.run(shlex.join(argv))
            results[argv] = CommandResult(argv, done.code, done.stdout, done.stderr)
        known = known_from(REGISTRY, lambda f: results.get(f.argv()) if not f.needs else None)
    return node_fields(NEW, lambda f, k: results.get(f.argv(k)), known)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(knob=WORD, order=WORD, release=WORD)
def test_new_facts_are_answered_from_the_tree_by_their_declarations(
        tmp_path: Path, knob: str, order: str, release: str) -> None:
    tree = materialize_scenario("kpro6", tmp_path / "tree")
    (tree.root / KNOB.tree).parent.mkdir(parents=True, exist_ok=True)
    (tree.root / KNOB.tree).write_text(knob + "\n")
    kernel = tree.meta.versions.kernel
    modules = tree.root / ORDER.tree_path({"kernel_version": kernel})
    modules.parent.mkdir(parents=True, exist_ok=True)
    modules.write_text(order + "\nkernel/other.ko\n")
    tree.meta.versions.pve = release
    got = _gathered(_shell(tree, tmp_path))
    assert got == {"knob": knob, "module_order": order, "pve_release": release}


def test_without_the_tree_a_new_fact_falls_to_its_default(tmp_path: Path) -> None:
    tree = materialize_scenario("kpro6", tmp_path / "tree")
    got = _gathered(_shell(tree, tmp_path))
    assert got == {"knob": None, "module_order": None, "pve_release": tree.meta.versions.pve}


def test_the_declaration_is_what_answers(tmp_path: Path) -> None:
    tree = materialize_scenario("kpro6", tmp_path / "tree")
    shell = _shell(tree, tmp_path)
    shell.state.facts = NODE_FACTS
    for fact in NEW:
        argv = fact.argv({"kernel_version": tree.meta.versions.kernel})
        assert shell.run(shlex.join(argv)).code == 127, argv


@given(values=st.dictionaries(st.sampled_from(["kernel_version", "a"]), WORD, min_size=2))
def test_a_command_is_matched_to_its_one_declaration_with_the_values_in_it(
        values: dict[str, str]) -> None:
    for fact in REGISTRY:
        argv = fact.argv(values)
        assert fact.match(argv) == {n: values[n] for n in fact.needs}
        assert [f.name for f in REGISTRY if f.match(argv) is not None] == [fact.name]
    assert ORDER.match(("module-order", "--release")) is None
    assert ORDER.match(("module-order", "--version", "6.8")) is None
