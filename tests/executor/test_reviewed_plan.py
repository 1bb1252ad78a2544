"""Reviewed plans across phases (issue 29 item 2): one saved plan file (`plan --p2p --out`)
takes a VM through phases 1, 2 and 3, because pvefix recognises its own earlier writes of that
plan from the journal; an admin's change between phases is still refused as stale, naming it.
Over real HTTPS and SSH against the simulator, through the CLI as `pvefix` runs it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.errors import EXIT_CHANGES, EXIT_OK, EXIT_REFUSED
from tests.executor.conftest import Node
from tests.executor.test_refusals import _other_admin_edits

app = build_command()


def _target(n: Node) -> list[str]:
    return ["--connection", str(n.ready_file), "--state-dir", str(n.state_dir)]


def _saved_plan(n: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    path = str(tmp_path / "reviewed.json")
    assert run_app(app, ["plan", "100", "--p2p", "--out", path, *_target(n)]) == EXIT_CHANGES
    capsys.readouterr()
    return path


def test_phases_1_2_3_apply_from_one_reviewed_plan_file(
    node: Callable[..., Node], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6", reboot_seconds=0.3)
    path = _saved_plan(n, tmp_path, capsys)
    steps = (("1", ["--restart"]), ("2", ["--reboot-host"]),
             ("3", ["--restart", "--qm-set"]))  # args is root@pam's: qm set over SSH
    for phase, activate in steps:
        code = run_app(app, ["apply", path, "--phase", phase, *activate, "--yes",
                             *_target(n)])
        out, err = capsys.readouterr()
        assert code == EXIT_OK, f"phase {phase}: {out}{err}"
        assert f"applied phase {phase} to VM 100" in out
        if phase == "3":  # phase 2 changes host files only: the VM digest is not its
            assert "pvefix's own apply" in err, err
    assert "x-nv-gpudirect-clique" in n.conf(100).decode()
    assert run_app(app, ["plan", "100", "--p2p", *_target(n)]) == EXIT_OK


def test_a_reviewed_phase_2_applied_without_its_reboot_is_activated_from_the_same_file(
    node: Callable[..., Node], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Items 1 and 2 together: `apply FILE --phase 2`, later `apply FILE --phase 2
    --reboot-host` (what is left of the reviewed phase is its activation), then phase 3."""
    n = node("kpro6", reboot_seconds=0.3)
    path = _saved_plan(n, tmp_path, capsys)
    steps = (("1", ["--restart"]), ("2", []), ("2", ["--reboot-host"]),
             ("3", ["--restart", "--qm-set"]))
    for phase, extra in steps:
        code = run_app(app, ["apply", path, "--phase", phase, *extra, "--yes", *_target(n)])
        out, err = capsys.readouterr()
        assert code == EXIT_OK, f"phase {phase} {extra}: {out}{err}"
        if extra == ["--reboot-host"]:
            assert "waits for its host reboot: activating it" in err, err
    assert "iommu=pt" in (n.host_file("/proc/cmdline") or b"").decode().split()
    assert "x-nv-gpudirect-clique" in n.conf(100).decode()


def test_an_admins_change_between_phases_is_still_refused_as_stale(
    node: Callable[..., Node], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6")
    path = _saved_plan(n, tmp_path, capsys)
    assert run_app(app, ["apply", path, "--phase", "1", "--restart", "--yes",
                         *_target(n)]) == EXIT_OK
    _other_admin_edits(n, 100)
    conf = n.conf(100)
    capsys.readouterr()
    code = run_app(app, ["apply", path, "--phase", "3", "--restart", "--qm-set", "--yes",
                         *_target(n)])
    out, err = capsys.readouterr()
    assert code == EXIT_REFUSED, out + err
    assert "the plan is stale" in err and "VM 100 config digest" in err, err
    assert "not pvefix's own" in err, err
    assert n.conf(100) == conf, "nothing written"
