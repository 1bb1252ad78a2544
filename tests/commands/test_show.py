"""`pvefix show PLAN_FILE` renders a saved plan file as `pvefix plan` renders the plan it saved
(text and Markdown), reads nothing but the file, and refuses what is not a plan file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK
from pvefix.hosttree import resolve_scenario

app = build_command()


def _plan(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    bundle = str(resolve_scenario("kpro6"))
    assert run_app(app, ["plan", "100", "--bundle", bundle, "--color", "never",
                         *extra]) == EXIT_CHANGES
    return capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_show_renders_the_saved_plan_as_plan_rendered_it(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "kpro6-100.json"
    shown_by_plan = _plan(capsys, "--format", fmt, "--out", str(saved))
    assert saved.exists()
    assert run_app(app, ["show", str(saved), "--format", fmt, "--color", "never"]) == EXIT_OK
    shown = capsys.readouterr().out
    assert shown == shown_by_plan
    assert ("Phase 2" in shown) and ("VM 100" in shown)


def test_show_needs_no_host_and_refuses_a_file_that_is_not_a_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_plan = tmp_path / "x.json"
    not_a_plan.write_text('{"schema": "pvefix.snapshot/v1"}\n')
    assert run_app(app, ["show", str(not_a_plan)]) == EXIT_ERROR
    assert "not a pvefix.plan/v1 plan file" in capsys.readouterr().err
    assert run_app(app, ["show", str(tmp_path / "missing.json")]) == EXIT_ERROR
    assert "plan file not found" in capsys.readouterr().err
    # No connection options: show reaches nothing.
    assert run_app(app, ["show", str(not_a_plan), "--host", "pve.example"]) != EXIT_OK


def test_the_markdown_ticket_names_its_plan_file_and_hash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import hashlib
    import shlex

    saved = tmp_path / "the plan.json"
    ticket = _plan(capsys, "--format", "markdown", "--out", str(saved))
    digest = hashlib.sha256(saved.read_bytes()).hexdigest()
    assert f"Plan file: `{saved}`, SHA-256 `{digest}`" in ticket
    assert f"`pvefix apply {shlex.quote(str(saved))} --phase 1 --restart`" in ticket
    assert "Plan file:" not in _plan(capsys, "--format", "markdown"), "no file: none named"
    saved.write_text(saved.read_text().replace('"created_at"', '"created_at" ', 1))
    assert run_app(app, ["show", str(saved), "--format", "markdown"]) == EXIT_OK
    shown = capsys.readouterr().out
    assert digest not in shown, "show names the file's hash as it is now"
    assert hashlib.sha256(saved.read_bytes()).hexdigest() in shown
