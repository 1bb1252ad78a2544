"""`pvefix collect script|import` and then `pvefix plan --bundle` from the command line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK
from tests.collect.fakehost import make_fake_host

app = build_command()  # the CLI as `pvefix` runs it (commands built lazily)


def test_script_then_import_then_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_app(app, ["collect", "script", "--vmid", "100"]) == EXIT_OK
    script = capsys.readouterr().out
    assert script.startswith("#!/bin/sh\n")
    assert 'VMIDS="100"' in script
    host = make_fake_host(tmp_path)
    done = subprocess.run(["sh", "-s"], input=script, env=host.env(), capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    tarball = host.root / "root/pvefix-bundle-kpro6.tar.gz"

    assert run_app(app, ["collect", "import", str(tarball), str(tmp_path / "tree")]) == EXIT_OK
    out = capsys.readouterr().out
    assert "100  kpro6: running (pc-i440fx-10.1+pve0)" in out
    assert "0000:01:00.0  10de:2bb5  iommu group 42  driver vfio-pci" in out

    assert run_app(app, ["plan", "100", "--bundle", str(tmp_path / "tree")]) == EXIT_CHANGES


def test_a_bad_vmid_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_app(app, ["collect", "script", "--vmid", "7"]) == EXIT_ERROR
    assert "'7' is not a VMID (100..999999999" in capsys.readouterr().err
