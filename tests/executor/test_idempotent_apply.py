"""Apply is idempotent (issue 36 item 2): a phase already applied, by pvefix or by hand, exits 0
saying "phase N: nothing to do", from the VMID and from the saved plan file (also after "the
saved phase 1 still applies"), and writes nothing. Over HTTPS and SSH against the simulator,
through the CLI as `pvefix` runs it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK
from tests.executor.conftest import Node
from tests.simkit import api

app = build_command()


def _target(n: Node) -> list[str]:
    return ["--connection", str(n.ready_file), "--state-dir", str(n.state_dir)]


def _snapshots(n: Node) -> list[Path]:
    return sorted(p for p in n.state_dir.rglob("meta.json"))


def _again(n: Node, target: str, phase: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Apply `phase` again: exit 0, "phase N: nothing to do", nothing written or snapshotted."""
    before, snaps = n.fingerprint(100), _snapshots(n)
    code = run_app(app, ["apply", target, "--phase", phase, "--yes", *_target(n)])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, out + err
    assert f"phase {phase}: nothing to do" in out, out + err
    assert "nothing was written" in out
    assert n.fingerprint(100) == before and _snapshots(n) == snaps
    return out + err


def test_a_phase_applied_by_pvefix_is_nothing_to_do_by_vmid_and_from_the_saved_file(
    node: Callable[..., Node], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6")
    path = str(tmp_path / "reviewed.json")
    assert run_app(app, ["plan", "100", "--out", path, *_target(n)]) == EXIT_CHANGES
    assert run_app(app, ["apply", path, "--phase", "1", "--restart", "--yes",
                         *_target(n)]) == EXIT_OK
    capsys.readouterr()
    said = _again(n, "100", "1", capsys)
    assert "phases left: 2" in said and "Next: pvefix apply 100 --phase 2" in said
    said = _again(n, path, "1", capsys)
    assert "the saved plan's phase 1 is in place" in said


def test_a_phase_applied_by_hand_is_nothing_to_do(
    node: Callable[..., Node], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The admin ran phase 1's `qm set` themselves: the saved file's phase is in effect."""
    n = node("kpro6")
    path = str(tmp_path / "reviewed.json")
    assert run_app(app, ["plan", "100", "--out", path, "--format", "json", *_target(n)]) \
        == EXIT_CHANGES
    capsys.readouterr()
    import json

    phase1 = next(p for p in json.loads(Path(path).read_text())["phases"] if p["number"] == 1)
    vm = api(n.info, "ticket").nodes(n.info.node).qemu(100)
    values = {c["key"]: c["after"] for c in phase1["changes"]
              if c["target"] == "vm-config" and c["after"]}
    deleted = [c["key"] for c in phase1["changes"] if c["target"] == "vm-config"
               and not c["after"]]
    vm.config.put(digest=vm.config.get()["digest"], **values,
                  **({"delete": ",".join(deleted)} if deleted else {}))
    _again(n, "100", "1", capsys)
    said = _again(n, path, "1", capsys)
    assert "the saved plan's phase 1 is in place" in said
    # VM 100 runs: Proxmox staged the keys; the line says how they take effect.
    assert "qm shutdown 100 && qm start 100" in said and "[PENDING]" in said


def test_a_phase_that_was_never_planned_is_still_an_error(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6")
    assert run_app(app, ["apply", "100", "--phase", "7", "--yes", *_target(n)]) == EXIT_ERROR
    assert "no phase 7" in capsys.readouterr().err
    assert run_app(app, ["apply", "100", "--phase", "3", "--yes", *_target(n)]) == EXIT_ERROR
    assert "--p2p" in capsys.readouterr().err
