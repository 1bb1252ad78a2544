"""Tests that need a judge of ../shared skip by that judge's own readiness probe, not by "its
files are there": a clone of the judges on a machine without their Debian packages (CI on a new
machine, a contributor) skips them, saying why, instead of failing on a broken pipe."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.oracle import SCRIPT, oracle_missing
from tests.realapi import harness_missing
from tests.shared import NEEDS_SHARED, SHARED

ROOT = Path(__file__).resolve().parents[1]


def _program(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_the_oracle_is_not_ready_when_perl_is_not_on_the_path(tmp_path: Path) -> None:
    script = tmp_path / "pve_oracle.pl"
    script.write_text("# a copy\n")
    why = oracle_missing(script, path=str(tmp_path / "empty-bin"))
    assert why is not None and "perl is not installed" in why and "install-deps.sh" in why


def test_the_oracle_is_not_ready_when_perl_cannot_load_its_modules(tmp_path: Path) -> None:
    """Perl there, Proxmox's Debian Perl packages not: what a fresh machine has."""
    script = tmp_path / "pve_oracle.pl"
    script.write_text("# a copy\n")
    bin_dir = tmp_path / "bin"
    _program(bin_dir, "perl", "cat >/dev/null; echo \"Can't locate JSON.pm in @INC\" >&2; exit 2")
    why = oracle_missing(script, path=str(bin_dir))
    assert why is not None and "Can't locate JSON.pm" in why and "install-deps.sh" in why


def test_the_oracle_is_ready_only_when_it_answers_the_question(tmp_path: Path) -> None:
    script = tmp_path / "pve_oracle.pl"
    script.write_text("# a copy\n")
    answers = _program(tmp_path / "ok", "perl",
                       'cat >/dev/null; echo \'{"ok":true,"cmdline":"/usr/bin/kvm -id 100"}\'')
    says_no = _program(tmp_path / "no", "perl", "cat >/dev/null; echo '{\"ok\":false}'")
    assert oracle_missing(script, path=str(answers.parent)) is None
    assert oracle_missing(script, path=str(says_no.parent)) is not None
    assert oracle_missing(tmp_path / "absent.pl", path=str(answers.parent)) is not None


def test_a_copy_of_the_oracle_without_its_perl_modules_is_not_ready(tmp_path: Path) -> None:
    if shutil.which("perl") is None:
        pytest.skip("needs perl (the point is a perl that is there but cannot load the oracle)")
    if not SCRIPT.is_file():
        pytest.skip(f"{NEEDS_SHARED}: {SCRIPT} is absent")
    copy = tmp_path / "pve_oracle.pl"
    shutil.copyfile(SCRIPT, copy)
    why = oracle_missing(copy)
    assert why is not None and "does not answer here" in why, why


def test_pve_api_is_not_ready_when_its_own_check_says_so(tmp_path: Path) -> None:
    refuses = _program(tmp_path, "pve-api",
                       'echo "pve-api: cannot run here: Perl modules missing: AnyEvent"; exit 3')
    why = harness_missing(refuses)
    assert why == f"{NEEDS_SHARED}: pve-api: cannot run here: Perl modules missing: AnyEvent"
    ready = _program(tmp_path / "ready", "pve-api", 'echo "pve-api: ready"')
    assert harness_missing(ready) is None
    absent = tmp_path / "absent"
    assert harness_missing(absent) == f"{NEEDS_SHARED}: {absent} is absent"


def test_a_copy_of_the_judges_that_cannot_run_skips_their_tests_saying_why(
        tmp_path: Path) -> None:
    """The oracle fixture, a direct oracle call and fw-lab under a ../shared whose files are
    there (script, module) but whose judges cannot run: every test skips, none fails."""
    shared = tmp_path / "shared"
    if not (SCRIPT.is_file() and (SHARED / "fw-lab" / "fwlab.py").is_file()):
        pytest.skip(f"{NEEDS_SHARED}: the judges to copy are absent")
    (shared / "pve-oracle").mkdir(parents=True)
    shutil.copyfile(SCRIPT, shared / "pve-oracle" / "pve_oracle.pl")
    (shared / "fw-lab").mkdir()
    shutil.copyfile(SHARED / "fw-lab" / "fwlab.py", shared / "fw-lab" / "fwlab.py")
    tests = [
        "tests/sim/test_qemu_cmdline.py::test_cpu_devices_and_args_are_what_proxmox_builds",
             "tests/vmconfig/test_description_bytes.py::test_the_same_as_proxmoxs_own_writer",
             "tests/rehearse/test_cleanup.py"]
    env = {**os.environ, "PVEFIX_SHARED": str(shared)}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p",
                           "no:cacheprovider", "-q", "-rs", *tests], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    out = done.stdout
    assert done.returncode == 0 and " failed" not in out and " error" not in out, out
    assert "passed" not in out.splitlines()[-1], out
    assert "pve-oracle does not answer here" in out and "fw-lab: " in out, out
    assert "skipped because" in out and "a judge in it cannot run here" in out, out
