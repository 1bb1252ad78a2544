"""One place starts a process on this machine: pvefix.target.process (its environment without
pvefix's secrets). The probe (it runs in the guest, stdlib only), the rehearsal's node script
(sent to the VM's node and run there, stdlib only) and the simulator (a test double) are not
pvefix acting on the admin's machine and are left out."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pvefix"
ALLOWED = {PACKAGE / "target" / "process.py"}
OUTSIDE = (PACKAGE / "probe", PACKAGE / "sim", PACKAGE / "rehearse" / "node_script.py")
SPAWNERS = {("subprocess", name) for name in ("run", "Popen", "call", "check_call",
                                               "check_output", "getoutput", "getstatusoutput")}
SPAWNERS |= {("os", name) for name in ("system", "popen", "execv", "execve", "execvp",
                                       "execvpe", "execl", "execle", "execlp", "execlpe",
                                       "spawnv", "spawnve", "spawnvp", "spawnl", "posix_spawn",
                                       "posix_spawnp")}


def _spawns(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) \
                and (node.func.value.id, node.func.attr) in SPAWNERS:
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: "
                         f"{node.func.value.id}.{node.func.attr}(...)")
    return found


def test_processes_are_started_only_in_target_process() -> None:
    found = [hit for path in sorted(PACKAGE.rglob("*.py"))
             if path not in ALLOWED and not any(path.is_relative_to(o) for o in OUTSIDE)
             for hit in _spawns(path)]
    assert found == [], "start processes through pvefix.target.process:\n" + "\n".join(found)


def test_the_one_place_does_start_them() -> None:
    assert _spawns(PACKAGE / "target" / "process.py")
