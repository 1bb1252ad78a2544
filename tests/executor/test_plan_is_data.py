"""A plan file is data, never authority: apply derives every step from a fresh read and the
planner and refuses (exit 3) a saved plan that differs from it, naming the difference. No
command from a file is run; what is confirmed is exactly what is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pvefix.errors import EXIT_REFUSED, RefusedError
from pvefix.executor.snapshot import list_snapshots
from pvefix.flow.planfile import load_plan_file
from pvefix.main import main
from pvefix.planner import plan as make_plan
from pvefix.sources.live import read_live
from tests.executor.conftest import Captured, Node


def _saved(n: Node, tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    data = json.loads(json.dumps(make_plan(read_live(n.conn(), 100)).to_json_dict()))
    edit(data)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    return path


def _host_change(data: dict[str, Any]) -> dict[str, Any]:
    change: dict[str, Any] = data["phases"][1]["changes"][0]
    assert change["target"] == "host-cmdline"
    return change


def _refresh(data: dict[str, Any]) -> None:
    _host_change(data)["refresh_command"] = ["touch", "/root/pwned"]


def test_the_cli_refuses_a_tampered_plan_with_exit_3_and_runs_nothing(
    node: Callable[..., Node], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6")
    path = _saved(n, tmp_path, _refresh)
    code = main(["apply", str(path), "--phase", "2", "--yes", "--connection", str(n.ready_file),
                 "--state-dir", str(n.state_dir)])
    assert code == EXIT_REFUSED
    assert "refresh_command" in capsys.readouterr().err
    assert n.host_file("/root/pwned") is None


def test_an_untampered_plan_file_applies_and_what_was_shown_is_what_was_written(
    node: Callable[..., Node], tmp_path: Path
) -> None:
    n = node("kpro6")
    path = _saved(n, tmp_path, lambda data: None)
    cap = Captured()
    n.apply(100, 2, plan=load_plan_file(path), captured=cap)
    shown = cap.out.getvalue()
    written = (n.host_file("/etc/kernel/cmdline") or b"").decode().strip()
    assert repr(written) in shown
    assert "then: proxmox-boot-tool refresh" in shown


def test_a_journal_cannot_make_rollback_run_a_command(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    result = n.apply(100, 2)
    (snap,) = list_snapshots(n.state_dir)
    journal = snap.path / "journal.jsonl"
    lines = journal.read_text().splitlines()
    forged = [line.replace('"argv": ["proxmox-boot-tool", "refresh"]',
                           '"argv": ["touch", "/root/pwned"]') for line in lines]
    assert forged != lines
    journal.write_text("\n".join(forged) + "\n")
    with pytest.raises(RefusedError, match="names a refresh command pvefix never runs"):
        n.rollback(100, result.snapshot_id)
    assert n.host_file("/root/pwned") is None
