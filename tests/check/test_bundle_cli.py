"""`pvefix desired` and `pvefix check --bundle`: no network, the example file under plans/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pvefix.hosttree import materialize_scenario
from pvefix.main import main
from tests.conformance.harness import merged

ROOT = Path(__file__).resolve().parents[2]


def test_a_desired_file_from_current_holds_for_that_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    materialize_scenario("kpro6", tmp_path / "tree")
    out = tmp_path / "plans" / "vm100.toml"
    assert main(["desired", "100", "--bundle", str(tmp_path / "tree"), "--from", "current",
                 "-o", str(out)]) == 0
    assert out.read_text().count("[vms.100.hostpci.hostpci") == 8
    assert "the state as it is now" in out.read_text()
    code = main(["check", "100", "--bundle", str(tmp_path / "tree"), "--desired", str(out)])
    assert code == 0, capsys.readouterr().out


def test_the_default_desired_state_is_the_goal_the_plan_reaches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pvefix.planner import plan as make_plan
    from pvefix.sources.bundle import read_bundle

    tree = tmp_path / "tree"
    materialize_scenario("kpro6", tree)
    out = tmp_path / "goal.toml"
    assert main(["desired", "100", "--bundle", str(tree), "-o", str(out)]) == 0
    text = out.read_text()
    assert "# the goal: the state the plan reaches after all its phases" in text
    assert 'family = "q35"' in text and "pcie = false" not in text
    # The unfixed host drifts from its goal (CI fails until the fix is applied) ...
    capsys.readouterr()
    assert main(["check", "100", "--bundle", str(tree), "--desired", str(out)]) == 2
    assert "+ pcie=1" in capsys.readouterr().out
    # ... and the host as every phase leaves it (config, host files, booted cmdline) holds.
    plan = make_plan(read_bundle(tree, 100))
    (tree / "etc/pve/qemu-server/100.conf").write_text(merged(plan.config_after))  # restarted
    for path, body in plan.host_files_after.items():
        (tree / path.lstrip("/")).write_text(body)
    kernel = plan.host_files_after.get("/etc/kernel/cmdline")
    assert kernel is not None
    (tree / "proc/cmdline").write_text(kernel)
    meta = json.loads((tree / "pvefix-host.json").read_text())
    meta["vms"]["100"]["running_machine"] = "pc-q35-10.1+pve0"
    (tree / "pvefix-host.json").write_text(json.dumps(meta))
    code = main(["check", "100", "--bundle", str(tree), "--desired", str(out)])
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
    assert main(["desired", vmid, "--bundle", tree, "--from", "current", "--record",
                 "--state-dir", state]) == 0
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


def test_the_cycle_collector_is_off_while_checking_and_on_again_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    import gc

    import pvefix.check.run as run

    materialize_scenario("kpro6", tmp_path / "tree")
    out = tmp_path / "vm100.toml"
    assert main(["desired", "100", "--bundle", str(tmp_path / "tree"), "--from", "current",
                 "-o", str(out)]) == 0
    seen: list[bool] = []
    real = run.check_bundle

    def watched(*args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(run, "check_bundle", watched)
    assert gc.isenabled()
    assert main(["check", "100", "--bundle", str(tmp_path / "tree"), "--desired", str(out)]) == 0
    assert seen == [False] and gc.isenabled()
    # ... also when the check fails.
    assert main(["check", "100", "--bundle", str(tmp_path / "none"), "--desired", str(out)]) == 1
    assert gc.isenabled()
    capsys.readouterr()
