"""The read side says each host command and the cluster's VM listing once: the registry
(pvefix/facts) holds the commands, target/nodes.py the one walk of /cluster/resources."""

from __future__ import annotations

import ast
from pathlib import Path

from pvefix.facts.model import Command
from pvefix.facts.node import CLUSTER_CONFIGS, NODE_FACTS, round_zero
from pvefix.facts.sysfs import GREP_FILES, READLINK
from tests.architecture.test_import_graph import PACKAGE

# target/ opens sessions (it checks `hostname` itself, and imports no feature); the simulator
# answers the commands (by name, as a shell does).
OWNERS = {"facts", "target", "sim"}


def _literal_argvs(path: Path) -> set[tuple[str, ...]]:
    """Every list or tuple literal of string constants in a module."""
    found: set[tuple[str, ...]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.List | ast.Tuple) or not node.elts:
            continue
        words = [e.value for e in node.elts
                 if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(words) == len(node.elts):
            found.add(tuple(words))
    return found


def _outside(owners: set[str]) -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if p.relative_to(PACKAGE).parts[0] not in owners]


def test_no_registry_command_is_spelled_outside_the_registry() -> None:
    commands = {f.read.argv for f in NODE_FACTS if isinstance(f.read, Command) and not f.needs}
    commands |= {READLINK, GREP_FILES, CLUSTER_CONFIGS}
    found = {p.relative_to(PACKAGE).as_posix(): sorted(hits) for p in _outside(OWNERS)
             if (hits := _literal_argvs(p) & commands)}
    assert found == {}, f"node commands of the registry spelled again: {found}"


def test_the_cluster_wide_read_is_no_room_of_check() -> None:
    # check --all reads the cluster through the gatherer (pvefix/sources/cluster.py), over
    # a Node from target/open.py: check keeps the comparing, not a reader of its own.
    assert not (PACKAGE / "check" / "cluster.py").exists()
    assert not (PACKAGE / "check" / "bulk.py").exists()


def test_the_cluster_listing_is_walked_in_one_place() -> None:
    found = [p.relative_to(PACKAGE).as_posix() for p in _outside({"sim"})
             if '"/cluster/resources"' in p.read_text(encoding="utf-8")]
    assert found == ["target/nodes.py"]


def test_the_literal_finder_sees_a_command(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('X = ["uname", "-r"]\nY = ("cat", path)\n', encoding="utf-8")
    assert _literal_argvs(module) == {("uname", "-r")}
    assert ("uname", "-r") in round_zero("plan")


READ_SIDE = ("sources", "check", "collect", "facts", "flow/neighbours.py", "hostfacts.py",
             "observed.py")


def test_no_function_on_the_read_side_is_over_60_lines() -> None:
    long: dict[str, int] = {}
    for part in READ_SIDE:
        where = PACKAGE / part
        for path in [where] if where.is_file() else sorted(where.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno:
                    lines = node.end_lineno - node.lineno + 1
                    if lines > 60:
                        long[f"{path.relative_to(PACKAGE).as_posix()}:{node.name}"] = lines
    assert long == {}, f"functions over 60 lines on the read side: {long}"
