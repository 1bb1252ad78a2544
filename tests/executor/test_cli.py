"""The commands as an admin types them: apply, snapshots, rollback; exit codes 0, 1 and 3."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.errors import EXIT_ERROR, EXIT_OK, EXIT_REFUSED
from pvefix.flow.planfile import save_plan
from pvefix.planner import plan as make_plan
from pvefix.sources.live import read_live
from tests.executor.conftest import Node
from tests.executor.test_refusals import _other_admin_edits

app = build_command()  # the CLI as `pvefix` runs it (commands built lazily)


def _target(n: Node) -> list[str]:
    return ["--connection", str(n.ready_file), "--state-dir", str(n.state_dir)]


def _plan_file(n: Node, tmp_path: Path) -> Path:
    return save_plan(make_plan(read_live(n.conn(), 100)).to_json_dict(),
                     str(tmp_path / "kpro6-100.json"))


def test_apply_a_plan_file_then_list_and_roll_back(
    node: Callable[..., Node], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6")
    before = n.fingerprint(100)
    plan_file = _plan_file(n, tmp_path)
    code = run_app(app, ["apply", str(plan_file), "--phase", "2", "--yes", *_target(n)])
    out = capsys.readouterr().out
    assert code == EXIT_OK, out
    assert "applied phase 2 to VM 100" in out
    undo = out.split("to undo: ", 1)[1].splitlines()[0]
    assert undo.startswith("pvefix rollback 100 --snapshot ")
    assert f"--state-dir {n.state_dir}" in undo and f"--connection {n.ready_file}" in undo

    assert run_app(app, ["snapshots", "100", "--state-dir", str(n.state_dir)]) == EXIT_OK
    listing = capsys.readouterr().out
    assert "phase 2  applied" in listing and "holds: VM 100 config (file" in listing
    assert "/etc/kernel/cmdline" in listing
    assert run_app(app, ["snapshots", "--json", "--state-dir", str(n.state_dir)]) == EXIT_OK
    (item,) = json.loads(capsys.readouterr().out)
    assert item["schema"] == "pvefix.snapshot/v1" and item["status"] == "applied"

    assert run_app(app, [*undo.split()[1:], "--yes"]) == EXIT_OK
    assert n.fingerprint(100) == before
    assert run_app(app, ["snapshots", "--state-dir", str(n.state_dir)]) == EXIT_OK
    assert "rolled-back" in capsys.readouterr().out


def test_apply_without_yes_and_without_a_terminal_is_refused_with_exit_3(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6")
    before = n.fingerprint(100)
    code = run_app(app, ["apply", "100", "--phase", "1", *_target(n)])
    captured = capsys.readouterr()
    assert code == EXIT_REFUSED
    assert "Phase 1 for VM 100" in captured.out
    assert "nothing was written" in captured.err
    assert n.fingerprint(100) == before


def test_a_stale_plan_file_exits_3(
    node: Callable[..., Node], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6")
    plan_file = _plan_file(n, tmp_path)
    _other_admin_edits(n, 100)
    code = run_app(app, ["apply", str(plan_file), "--phase", "1", "--yes", *_target(n)])
    assert code == EXIT_REFUSED
    assert "the plan is stale" in capsys.readouterr().err


def test_apply_refuses_a_bundle_and_rollback_needs_a_vm_or_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_app(app, ["apply", "100", "--phase", "1", "--bundle", str(tmp_path)]) == EXIT_ERROR
    assert "read-only" in capsys.readouterr().err
    assert run_app(app, ["rollback", "--state-dir", str(tmp_path)]) == EXIT_ERROR
    assert "name the VM" in capsys.readouterr().err
    assert run_app(app, ["snapshots", "--state-dir", str(tmp_path / "none")]) == EXIT_OK
    assert "no snapshots" in capsys.readouterr().out


def test_state_dir_comes_from_the_flag_the_environment_or_xdg(tmp_path: Path) -> None:
    from pvefix.store.statedir import resolve_state_dir

    assert resolve_state_dir(tmp_path / "flag", {"PVEFIX_STATE_DIR": "/x"}) == tmp_path / "flag"
    assert resolve_state_dir(None, {"PVEFIX_STATE_DIR": "/x"}) == Path("/x")
    assert resolve_state_dir(None, {"XDG_STATE_HOME": "/s"}) == Path("/s/pvefix")
    assert resolve_state_dir(None, {}).parts[-3:] == (".local", "state", "pvefix")


def test_apply_records_the_desired_state_and_check_agrees_after_the_restart(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str]
) -> None:
    """The loop an admin closes: apply phase 1 with a restart, then `pvefix check` is green,
    and goes red (exit 2) when the fix is undone out of band."""
    n = node("kpro6")
    code = run_app(app, ["apply", "100", "--phase", "1", "--restart", "--yes", *_target(n)])
    out = capsys.readouterr().out
    assert code == EXIT_OK, out
    from tests.simkit import state_key

    # kept per host identity: the name and its CA's key
    recorded = n.state_dir / "desired" / state_key(n.info, "node-kpro6") / "100.toml"
    # filled to the width: the path, one word, whole on its line
    assert f"desired state recorded: {recorded}" in " ".join(out.split())
    assert recorded.stat().st_mode & 0o777 == 0o600
    assert run_app(app, ["check", "100", *_target(n)]) == EXIT_OK
    capsys.readouterr()
    _other_admin_edits(n, 100)  # a harmless edit by a colleague: still no drift
    assert run_app(app, ["check", "100", *_target(n)]) == EXIT_OK
    from tests.simkit import api

    vm = api(n.info, "token").nodes(n.info.node).qemu(100)
    vm.config.put(digest=vm.config.get()["digest"], delete="machine")  # the fix undone
    assert run_app(app, ["check", "100", *_target(n)]) == 2
    assert "machine" in capsys.readouterr().out


def test_apply_on_a_vm_with_nothing_to_do_exits_0(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6")
    assert run_app(app, ["apply", "100", "--phase", "1", "--restart", "--yes", *_target(n)]) == 0
    assert run_app(app, ["apply", "100", "--phase", "2", "--reboot-host", "--yes",
                         *_target(n)]) == 0
    capsys.readouterr()
    assert run_app(app, ["apply", "100", "--phase", "1", "--yes", *_target(n)]) == EXIT_OK
    assert "nothing to change; nothing was written" in capsys.readouterr().out
