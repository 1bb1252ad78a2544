"""One module per concept across the two rooms of apply and rollback: `flow/` (the stages
composed, the refusals before a write) and `executor/` (the writes, the activation, the
restore). Twins there (hostreboot.py in both, activate.py beside activation.py) left a
newcomer guessing which one to open, so a name may live in one room only, and two names that
differ only in their ending (activate / activation, restore / restored) are one concept."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pvefix"
ROOMS = ("flow", "executor")
#: Two module names that start with this many same characters name one concept
#: ("activat-e" / "activat-ion"); short common words stay apart ("check" / "checks_x").
NEAR = 7


def _names(room: str) -> set[str]:
    return {p.stem for p in (PACKAGE / room).glob("*.py") if p.stem != "__init__"}


def _near(a: str, b: str) -> bool:
    same = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        same += 1
    return same >= min(NEAR, len(a), len(b))


def twins(rooms: dict[str, set[str]]) -> list[str]:
    """Pairs of modules, in different rooms or the same one, that name one concept."""
    modules = sorted((name, room) for room, names in rooms.items() for name in names)
    found: list[str] = []
    for i, (a, room_a) in enumerate(modules):
        for b, room_b in modules[i + 1:]:
            if (a == b or _near(a, b)) and (room_a, a) != (room_b, b):
                found.append(f"{room_a}/{a}.py ~ {room_b}/{b}.py")
    return found


def test_flow_and_executor_hold_no_twin_modules() -> None:
    found = twins({room: _names(room) for room in ROOMS})
    assert found == [], (
        "one module per concept across flow/ and executor/ (docs/architecture.md, 'Where a"
        f" new thing goes'): merge these or name them by what each does: {found}")


def test_the_rule_finds_the_twins_it_was_written_for() -> None:
    assert twins({"flow": {"hostreboot", "apply"}, "executor": {"hostreboot", "write"}}) == [
        "executor/hostreboot.py ~ flow/hostreboot.py"]
    assert twins({"executor": {"activate", "activation", "restore"}}) == [
        "executor/activate.py ~ executor/activation.py"]
    assert twins({"flow": {"rollback", "guards"}, "executor": {"restore", "power"}}) == []
