"""The package graph has no cycle, and the planner stays pure: checked on every import
statement in pvefix/ (function-local ones included), so a new cycle fails here first."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pvefix"
# What the planner may import: values and pure helpers, never a package that does I/O.
IO_PACKAGES = {"sources", "executor", "target", "sim", "check", "desired", "verify",
               "commands", "collect", "probe", "render", "store"}


# Packages that are one unit with another (none now: closedworld builds its findings from
# pvefix.findings, below the planner, so the planner reads it without a cycle).
SAME_UNIT: dict[str, str] = {}


def _unit(path: Path) -> str:
    """pvefix/<pkg>/... -> 'pkg'; top-level modules are their own unit."""
    rel = path.relative_to(PACKAGE)
    unit = rel.parts[0].removesuffix(".py") if rel.parts else "pvefix"
    return SAME_UNIT.get(unit, unit)


def _imports(path: Path) -> set[str]:
    """The pvefix units a module imports (absolute and relative, at any depth)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    rel_parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = rel_parts[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(["pvefix", *base, *([node.module] if node.module else [])])
                names = [module] if node.module else [f"{module}.{a.name}" for a in node.names]
            else:
                module = node.module or ""
                names = [module, *(f"{module}.{a.name}" for a in node.names)]
        for name in names:
            parts = name.split(".")
            if parts[0] == "pvefix" and len(parts) > 1:
                found.add(SAME_UNIT.get(parts[1], parts[1]))
    return found


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    units = {_unit(p) for p in PACKAGE.rglob("*.py")}
    for path in PACKAGE.rglob("*.py"):
        unit = _unit(path)
        edges.setdefault(unit, set()).update(
            u for u in _imports(path) if u in units and u != unit
        )
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_package_graph_has_no_cycle() -> None:
    found = cycles(graph())
    assert found == [], f"import cycles between packages: {found}"


def test_the_planner_imports_no_io_package() -> None:
    bad = graph().get("planner", set()) & IO_PACKAGES
    assert not bad, f"planner/ imports {sorted(bad)}: the planner must stay pure"


def test_the_checker_finds_a_cycle_when_there_is_one() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _module_imports(rel: str) -> set[str]:
    return _imports(PACKAGE / rel)


def test_the_executor_imports_no_reader_verifier_or_flow() -> None:
    # The stages of apply: the executor writes, activates and restores; reading the target
    # (sources), proving it (verify) and composing the stages (flow) come from above it.
    found = {
        path.relative_to(PACKAGE).as_posix(): bad
        for path in sorted((PACKAGE / "executor").rglob("*.py"))
        if (bad := _imports(path) & {"sources", "verify", "flow"})
    }
    assert found == {}


def test_the_prepare_stage_imports_no_io_package() -> None:
    # prepare is pure, like the planner: every refusal before a write is a fast test.
    assert _module_imports("flow/prepare.py") & (IO_PACKAGES | {"flow"}) == set()
