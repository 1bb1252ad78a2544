"""One place opens sessions: pvefix.target.open. Every API client, SSH shell, local backend and
guest channel in pvefix is constructed there (and paramiko's SSHClient only inside the SSH
shell), so a new reader or writer has to take a session instead of opening its own. And the
target package stands on the floor: it imports no feature package."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pvefix"
SESSIONS = {"ApiClient", "LocalApi", "LocalShell", "SshShell", "SshChannel", "AgentChannel"}
OPENER = PACKAGE / "target" / "open.py"
#: What pvefix/target may import besides itself: values with no I/O of their own.
TARGET_MAY_IMPORT = {"errors", "hosttree", "paths", "tomltext"}


def _called(tree: ast.AST) -> list[tuple[str, int]]:
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else (
                func.attr if isinstance(func, ast.Attribute) else None)
            if name is not None:
                calls.append((name, node.lineno))
    return calls


def test_sessions_are_constructed_only_in_target_open() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == OPENER:
            continue
        for name, line in _called(ast.parse(path.read_text(encoding="utf-8"))):
            if name in SESSIONS:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {name}(...)")
    assert found == [], "open sessions through pvefix.target.open:\n" + "\n".join(found)


def test_the_opener_constructs_every_session_kind() -> None:
    # The rule above means something only while open.py really is where they are built.
    names = {name for name, _ in _called(ast.parse(OPENER.read_text(encoding="utf-8")))}
    assert SESSIONS - names == set()


def test_paramiko_clients_only_inside_the_ssh_shell() -> None:
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}"
             for path in sorted(PACKAGE.rglob("*.py"))
             for name, line in _called(ast.parse(path.read_text(encoding="utf-8")))
             if name in {"SSHClient", "Transport"} and path != PACKAGE / "target" / "ssh.py"]
    assert found == []


def test_target_imports_only_the_floor() -> None:
    outside = set()
    for path in (PACKAGE / "target").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                parts = node.module.split(".")
                if parts[0] == "pvefix" and len(parts) > 1 and parts[1] != "target":
                    outside.add((path.name, parts[1]))
    assert {unit for _, unit in outside} <= TARGET_MAY_IMPORT, sorted(outside)


def test_paramiko_is_imported_only_through_sshlib() -> None:
    # pvefix.target.sshlib imports paramiko without loading invoke (start-up); a module that
    # imported paramiko (or one of its submodules) first would load it again.
    sshlib = PACKAGE / "target" / "sshlib.py"
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == sshlib:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "paramiko" or n.startswith("paramiko.") for n in names):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == [], "import paramiko as `from pvefix.target.sshlib import paramiko`"
