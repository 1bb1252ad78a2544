"""The probe zipapp runs on a guest that has python3 and nothing else."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pvefix.probe.report import Report
from pvefix.target.guest.agent import CHUNK_BYTES
from pvefix.target.guest.joiner import build_joiner_zipapp
from pvefix.verify.zipapp import build_probe_zipapp

FIXTURE = Path(__file__).parents[1] / "probe" / "fixtures" / "h200-1gpu" / "probe_full.json"


def bare_python(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """This interpreter isolated and without site-packages: no pvefix, no pydantic."""
    return subprocess.run([sys.executable, "-I", "-S", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120, check=False)


def test_bare_python_really_lacks_pydantic_and_pvefix(tmp_path: Path) -> None:
    for module in ("pydantic", "pvefix"):
        done = bare_python("-c", f"import {module}", cwd=tmp_path)
        assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr, module


def test_the_zipapp_runs_with_the_standard_library_only(tmp_path: Path) -> None:
    pyz = tmp_path / "probe.pyz"
    pyz.write_bytes(build_probe_zipapp())
    done = bare_python(str(pyz), "--format", "json", "--quick", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = Report.model_validate_json(done.stdout)
    assert report.quick is True
    # This machine has no GPU: the honest result is "not measured", with the reason.
    assert not report.gpus.measured and "no NVIDIA GPU" in (report.gpus.reason or "")
    assert not report.p2p.measured and report.p2p.reason


def test_the_zipapp_leaves_no_worker_folder_behind(tmp_path: Path) -> None:
    pyz = tmp_path / "probe.pyz"
    pyz.write_bytes(build_probe_zipapp())
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    done = subprocess.run([sys.executable, "-I", "-S", str(pyz), "--format", "json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "TMPDIR": str(scratch)}, check=False)
    assert done.returncode == 0, done.stderr
    assert list(scratch.iterdir()) == []


def test_the_zipapp_is_the_same_bytes_every_time_and_fits_one_file_write() -> None:
    first = build_probe_zipapp()
    assert first == build_probe_zipapp()
    assert len(first) <= CHUNK_BYTES  # one agent file-write today; parts are the fallback


def test_the_stand_in_models_write_what_pydantic_reads_back(tmp_path: Path) -> None:
    """A real H200 report through the standard-library models, then through pydantic."""
    pyz = tmp_path / "probe.pyz"
    pyz.write_bytes(build_probe_zipapp())
    script = (
        "import os, sys; os.environ['PVEFIX_PROBE_STDLIB'] = '1'; sys.path.insert(0, sys.argv[1])\n"
        "from pvefix.probe._model import STDLIB_MODELS\n"
        "from pvefix.probe.report import Report\n"
        "assert STDLIB_MODELS\n"
        "r = Report.model_validate_json(open(sys.argv[2]).read())\n"
        "print(r.to_json())\n"
    )
    done = bare_python("-c", script, str(pyz), str(FIXTURE), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    original = Report.model_validate_json(FIXTURE.read_text(encoding="utf-8"))
    assert Report.model_validate_json(done.stdout) == original


def test_old_guest_pythons_get_a_clear_message(tmp_path: Path) -> None:
    old = Path("/root/.pyenv/versions/3.9.18/bin/python3")
    if not old.exists():
        pytest.skip("no Python 3.9 here")
    pyz = tmp_path / "probe.pyz"
    pyz.write_bytes(build_probe_zipapp())
    done = subprocess.run([str(old), "-I", "-S", str(pyz)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 4
    assert "needs Python 3.10 or newer; this guest has 3.9" in done.stderr


def _split(tmp_path: Path, data: bytes) -> tuple[Path, int]:
    target = tmp_path / "big.pyz"
    parts = [data[i:i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)]
    for i, part in enumerate(parts):
        Path(f"{target}.part{i:03d}").write_bytes(part)
    (tmp_path / "join.pyz").write_bytes(build_joiner_zipapp())
    return target, len(parts)


def test_the_joiner_puts_parts_together_and_removes_them(tmp_path: Path) -> None:
    data = build_probe_zipapp(extra={"pad.bin": os.urandom(150_000)})
    target, count = _split(tmp_path, data)
    assert count >= 4
    digest = hashlib.sha256(data).hexdigest()
    done = bare_python(str(tmp_path / "join.pyz"), str(target), digest, str(count), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert target.read_bytes() == data
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.pyz", "join.pyz"]


def test_the_joiner_refuses_a_damaged_upload(tmp_path: Path) -> None:
    data = os.urandom(100_000)
    target, count = _split(tmp_path, data)
    Path(f"{target}.part001").write_bytes(b"garbage")
    digest = hashlib.sha256(data).hexdigest()
    done = bare_python(str(tmp_path / "join.pyz"), str(target), digest, str(count), cwd=tmp_path)
    assert done.returncode == 3 and "SHA-256 mismatch" in done.stderr
    assert not target.exists()


def test_the_measurement_workers_run_from_outside_the_archive(tmp_path: Path) -> None:
    """A child interpreter cannot run a file inside a zip: the zipapp copies the workers out.
    A stand-in `torch` without CUDA makes the P2P worker run and answer."""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "__version__ = '0.0-fake'\n\nclass version:\n    cuda = None\n", encoding="utf-8"
    )
    pyz = tmp_path / "probe.pyz"
    pyz.write_bytes(build_probe_zipapp())
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "PYTHONPATH": str(fake.parent)}
    done = subprocess.run([sys.executable, "-S", str(pyz), "--format", "json", "--quick"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env,
                          check=False)
    assert done.returncode == 0, done.stderr
    report = Report.model_validate_json(done.stdout)
    assert report.p2p.torch_version == "0.0-fake"  # the worker imported it and reported back
    assert report.p2p.reason == "PyTorch built without CUDA"
