"""`check` with a privilege-separated API token without rights (intel-grub's root@pam!pvefix)
names the token's missing right, not a missing desired state at a path no command writes: the
recorded states are kept per cluster, told by GET /cluster/status (Sys.Audit on /). Once granted
as the message says, the same command goes on (issue 36)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.errors import EXIT_ERROR
from pvefix.sim.serve import ReadyInfo, write_ready_file
from tests.simkit import grant

app = build_command()


def test_a_token_without_rights_is_told_what_to_grant(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))
    info = fresh_sim("intel-grub")
    ready = tmp_path / "ready.json"  # the token: pvefix's default where the file holds one
    write_ready_file(info, ready)
    state = ["--state-dir", str(tmp_path / "state")]
    # root@pam's password records VM 200's desired state where check will look for it.
    assert run_app(app, ["apply", "200", "--phase", "1", "--restart", "--yes", "--auth",
                         "password", "--connection", str(ready), *state]) == 0
    capsys.readouterr()
    for args in (["200"], ["--all"]):
        code = run_app(app, ["check", *args, "--connection", str(ready), *state])
        err = capsys.readouterr().err
        assert code == EXIT_ERROR, err
        assert "no desired state recorded" not in err, err
        assert "Sys.Audit on /" in err and f"--tokens '{info.token_id}'" in err, err
    grant(info.root, info.token_id, "PVEAuditor", "/")  # what the message says to run
    code = run_app(app, ["check", "200", "--connection", str(ready), *state])
    out, err = capsys.readouterr()
    assert code in (0, 2) and "VM 200" in out, out + err


def test_a_token_that_sees_no_vm_never_passes_check_all(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sys.Audit on / but NoAccess on /vms: /cluster/resources lists no VM to this token, so
    a recorded VM is UNKNOWN (exit 1), naming the right to grant, never "no drift"."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))
    info = fresh_sim("intel-grub")
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    state = ["--state-dir", str(tmp_path / "state")]
    assert run_app(app, ["apply", "200", "--phase", "1", "--restart", "--yes", "--auth",
                         "password", "--connection", str(ready), *state]) == 0
    grant(info.root, info.token_id, "PVEAuditor", "/")
    grant(info.root, info.token_id, "NoAccess", "/vms")
    capsys.readouterr()
    code = run_app(app, ["check", "--all", "--connection", str(ready), *state])
    out, err = capsys.readouterr()
    assert code == EXIT_ERROR, out + err
    said = " ".join(out.split())
    assert "UNKNOWN" in said and "VM.Audit on /vms/200" in said, out
