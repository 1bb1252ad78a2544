"""The node side of the target seam is one Node (pvefix.target.node): whether pvefix reaches
the node over SSH or runs on it (--local) is decided inside pvefix.target only. Checked on
every module: outside pvefix/target/, no code reads a connection's `backend`, a `.local`
session or compares an access method with "local"; the options are only parsed
(commands/options.py) and echoed into the printed rollback command (commands/apply_cmd.py)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pvefix"
ALLOWED = {"commands/options.py", "commands/apply_cmd.py"}


def _branches(tree: ast.AST) -> list[int]:
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("backend", "local"):
            lines.append(node.lineno)
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if (any(isinstance(s, ast.Attribute) and s.attr == "method" for s in sides)
                    and any(isinstance(s, ast.Constant) and s.value == "local" for s in sides)):
                lines.append(node.lineno)
    return lines


def test_no_branch_on_local_outside_target() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("target/") or rel in ALLOWED:
            continue
        found += [f"{rel}:{line}" for line in _branches(ast.parse(path.read_text("utf-8")))]
    assert found == [], "decide SSH or --local inside pvefix.target (a Node): " + str(found)


def test_the_check_sees_a_branch() -> None:
    tree = ast.parse("if conn.backend == 'local': pass\nx = remote.local\n"
                     "y = access.method == 'local'\n")
    assert sorted(_branches(tree)) == [1, 2, 3]
