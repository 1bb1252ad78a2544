"""`pvefix desired` and `pvefix check --bundle`: no network, the example file under plans/."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvefix.hosttree import materialize_scenario
from pvefix.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_a_desired_file_written_from_a_bundle_holds_for_that_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    materialize_scenario("kpro6", tmp_path / "tree")
    out = tmp_path / "plans" / "vm100.toml"
    assert main(["desired", "100", "--bundle", str(tmp_path / "tree"), "-o", str(out)]) == 0
    assert out.read_text().count("[vms.100.hostpci.hostpci") == 8
    code = main(["check", "100", "--bundle", str(tmp_path / "tree"), "--desired", str(out)])
    assert code == 0, capsys.readouterr().out


def test_the_example_reports_the_unfixed_kpro6_scenario_as_drift(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["check", "100", "--bundle", str(ROOT / "pvefix" / "scenarios" / "kpro6"),
                 "--desired", str(ROOT / "plans" / "desired-kpro6.toml")])
    out = capsys.readouterr().out
    assert code == 2
    assert "  DRIFT   hostpci7.pcie\n          - pcie=0\n          + pcie=1\n" in out
    assert "  DRIFT   cmdline iommu=pt (required)\n" in out


def test_record_puts_it_where_check_finds_it_and_pending_still_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # intel-grub's VM 200 has pcie=1 waiting in [PENDING]: the recorded state is where the VM
    # is going, so the check says the fix takes effect at the next cold start (exit 2).
    materialize_scenario("intel-grub", tmp_path / "tree")
    tree, state = str(tmp_path / "tree"), str(tmp_path / "state")
    vmid = next(p.stem for p in (tmp_path / "tree").rglob("*.conf"))
    assert main(["desired", vmid, "--bundle", tree, "--record", "--state-dir", state]) == 0
    # kept under the host's identity (intel-grub: standalone node xeon4)
    recorded = tmp_path / "state" / "desired" / "node-xeon4" / f"{vmid}.toml"
    assert recorded.stat().st_mode & 0o777 == 0o600
    capsys.readouterr()
    assert main(["check", vmid, "--bundle", tree, "--state-dir", state]) == 2
    out = capsys.readouterr().out
    assert "1 drifted, 0 unknown" in out
    assert "(only in [PENDING]: takes effect at the next cold start)" in out


def test_check_needs_vms_or_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--bundle", "x"]) == 1
