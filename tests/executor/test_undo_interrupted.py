"""A second Ctrl-C while apply undoes its steps: the undo stops and says exactly what is
still changed and the rollback command that undoes it."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pytest

from pvefix.executor.console import Console
from pvefix.executor.transaction import UndoInterrupted, transaction


class _Step:
    kind = "vm-config"

    def __init__(self, name: str, interrupt: bool = False) -> None:
        self.id = name
        self.interrupt = interrupt
        self.undone = False

    def summary(self) -> str:
        return f"VM config {self.id}: a -> b"

    def undo(self, ctx: Any) -> str:
        if self.interrupt:
            raise KeyboardInterrupt
        self.undone = True
        return f"{self.id} back to a"


class _Journal:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def record(self, event: str, **data: Any) -> None:
        self.events.append((event, data))


def test_a_second_ctrl_c_lists_what_remains_and_the_rollback_command() -> None:
    err = io.StringIO()
    journal = _Journal()
    snapshot = SimpleNamespace(id="20261203T070000Z-100-p1", meta=SimpleNamespace(vmid=100))
    first, second, third = _Step("machine"), _Step("hostpci0", interrupt=True), _Step("cpu")
    with pytest.raises(UndoInterrupted), transaction(
            SimpleNamespace(), journal, Console(out=io.StringIO(), err=err),  # type: ignore[arg-type]
            snapshot) as started:  # type: ignore[arg-type]
        started.extend([first, second, third])
        raise KeyboardInterrupt  # the first Ctrl-C: undo begins (cpu, then hostpci0)
    text = err.getvalue()
    assert third.undone and not first.undone
    assert "undone: cpu back to a" in text
    assert ("STILL CHANGED (not undone): VM config hostpci0: a -> b; VM config machine: a -> b"
            in text)
    assert "undo them with: pvefix rollback 100 --snapshot 20261203T070000Z-100-p1" in text
    assert journal.events[-1][0] == "apply-end"
    assert journal.events[-1][1]["status"] == "interrupted-undo"


def test_the_first_ctrl_c_is_acknowledged_before_the_first_undo_runs() -> None:
    """Undoing can take minutes (a config write task each, a restart): the admin hears at once
    that Ctrl-C was taken and what happens now, not after the first undo."""
    err = io.StringIO()
    seen_when_undoing: list[str] = []

    class _Watching(_Step):
        def undo(self, ctx: Any) -> str:
            seen_when_undoing.append(err.getvalue())
            return super().undo(ctx)

    snapshot = SimpleNamespace(id="s", meta=SimpleNamespace(vmid=100))
    no_ssh = SimpleNamespace(conn=SimpleNamespace(reaches_node=False))
    ctx = SimpleNamespace(sessions=no_ssh)  # no exact-bytes restore
    with pytest.raises(KeyboardInterrupt), transaction(
            ctx, _Journal(), Console(out=io.StringIO(), err=err),  # type: ignore[arg-type]
            snapshot) as started:  # type: ignore[arg-type]
        started.extend([_Watching("machine"), _Watching("cpu")])
        raise KeyboardInterrupt
    said = "interrupted (Ctrl-C): undoing the 2 step(s) done so far, newest first"
    assert said in seen_when_undoing[0]  # before the first undo began
    with pytest.raises(KeyboardInterrupt), transaction(
            ctx, _Journal(), Console(out=io.StringIO(), err=err),  # type: ignore[arg-type]
            snapshot):  # type: ignore[arg-type]
        raise KeyboardInterrupt
    assert "interrupted (Ctrl-C): nothing had been written; stopping" in err.getvalue()
