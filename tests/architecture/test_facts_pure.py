"""The fact registry stays pure: declarations and parsers, no I/O. Every reader takes its
command lines from it, so a fact that did I/O here would do it at import in every reader."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.architecture.test_import_graph import IO_PACKAGES, PACKAGE, _imports

FACTS = PACKAGE / "facts"
# Standard library modules that reach the world: a parser or a declaration needs none.
IO_STDLIB = {"subprocess", "socket", "os", "pathlib", "shutil", "threading", "concurrent",
             "asyncio", "urllib", "http", "ssl", "select", "io", "tempfile"}


def _stdlib_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_fact_registry_imports_no_io_package() -> None:
    found = {
        path.name: bad
        for path in sorted(FACTS.rglob("*.py"))
        if (bad := _imports(path) & (IO_PACKAGES | {"flow", "executor", "hosttree", "state"}))
    }
    assert found == {}, f"pvefix/facts imports I/O or higher floors: {found}"


def test_the_fact_registry_imports_no_io_module() -> None:
    found = {
        path.name: bad
        for path in sorted(FACTS.rglob("*.py"))
        if (bad := _stdlib_imports(path) & IO_STDLIB)
    }
    assert found == {}, f"pvefix/facts imports I/O modules: {found}"


def test_the_io_module_check_sees_an_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import subprocess\nfrom os import path\n", encoding="utf-8")
    assert _stdlib_imports(module) & IO_STDLIB == {"subprocess", "os"}
