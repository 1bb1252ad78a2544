"""The read side says each host command and the cluster's VM listing once: the registry
(pvefix/facts) holds the commands, target/nodes.py the one walk of /cluster/resources."""

from __future__ import annotations

import ast
from pathlib import Path

from pvefix.facts.model import Command
from pvefix.facts.node import CLUSTER_CONFIGS, NODE_FACTS, round_zero
from pvefix.facts.sysfs import GREP_FILES, READLINK
from tests.architecture.test_import_graph import PACKAGE

# target/ opens sessions (it checks `hostname` itself, and imports no feature). The simulator
# is no owner: it answers the registry's commands by their declarations, spelling none.
OWNERS = {"facts", "target"}


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


READ_SIDE = ("sources", "check", "collect", "facts", "flow/guards.py", "hostfacts.py",
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


def _read_side_files() -> list[Path]:
    out: list[Path] = []
    for part in READ_SIDE:
        where = PACKAGE / part
        out += [where] if where.is_file() else sorted(where.rglob("*.py"))
    return out


def test_the_read_side_reads_nodes_through_node_not_a_shell_of_its_own() -> None:
    # The readers take a Node (pvefix.target.node) from target/: no Shell protocol and no
    # shell factory of their own, and no session's shell asked of a Node.
    found: list[str] = []
    for path in _read_side_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            name = getattr(node, "name", None) or getattr(node, "id", None) or ""
            if isinstance(node, ast.ClassDef | ast.Name) and "Shell" in name:
                found.append(f"{path.relative_to(PACKAGE).as_posix()}:{name}")
            if isinstance(node, ast.Attribute) and node.attr == "session":
                found.append(f"{path.relative_to(PACKAGE).as_posix()}:.session")
    assert found == [], f"shells on the read side: {sorted(set(found))}"


def test_no_node_command_is_spelled_on_the_read_side() -> None:
    # A node file is read as facts.node.cat(path) or by a fact's declaration: a list or
    # tuple that starts with a command's name is a node argv outside facts/ and target/.
    commands = {argv[0] for f in NODE_FACTS if isinstance(f.read, Command)
                for argv in [f.read.argv]} | {READLINK[0], GREP_FILES[0], CLUSTER_CONFIGS[0]}
    found: list[str] = []
    for path in _read_side_files():
        if path.relative_to(PACKAGE).parts[0] in OWNERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.List | ast.Tuple) and node.elts
                    and isinstance(node.elts[0], ast.Constant)
                    and node.elts[0].value in commands):
                found.append(f"{path.relative_to(PACKAGE).as_posix()}:{node.lineno}")
    assert found == [], f"node argv spelled on the read side: {found}"


def test_the_live_reader_stays_small() -> None:
    lines = (PACKAGE / "sources" / "live.py").read_text(encoding="utf-8").count("\n")
    assert lines <= 250, f"sources/live.py has {lines} lines"


def test_a_node_hands_out_no_session_under_it() -> None:
    # Readers and the rehearsal take the Node itself (run, run_many, read_file).
    from pvefix.target.node import LocalNode, Node, SshNode

    assert [c.__name__ for c in (Node, SshNode, LocalNode) if hasattr(c, "session")] == []
