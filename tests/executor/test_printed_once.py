"""What an apply says, it says once (issue 36): "desired state recorded" (the result line,
not also a progress line before it) and a failed apply's undo report ("undone, in reverse
order", in the error, not also as progress). Through the CLI as `pvefix` runs it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.errors import EXIT_ERROR, EXIT_OK
from tests.executor.conftest import Node

app = build_command()


def _apply(n: Node, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = run_app(app, ["apply", "100", "--phase", "1", "--yes", "--connection",
                         str(n.ready_file), "--state-dir", str(n.state_dir)])
    out, err = capsys.readouterr()
    return code, out + err


def test_desired_state_recorded_is_said_once(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str]
) -> None:
    code, said = _apply(node("kpro6"), capsys)
    assert code == EXIT_OK, said
    assert said.count("desired state recorded") == 1, said


def test_a_failed_applys_undo_report_is_said_once(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6")
    n.sim.faults.update(fail_write=2)
    code, said = _apply(n, capsys)
    assert code == EXIT_ERROR, said
    assert said.count("undone, in reverse order") == 1, said
    assert "VM config machine back to (absent)" in said
