"""`pvefix verify` end to end: the CLI, the simulator's guest agent over HTTPS, the state
directory, and the comparison with the report before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pvefix.main import main
from pvefix.probe.report import P2PMeasuredSection, Report
from pvefix.sim.serve import ReadyInfo
from pvefix.verify.outcome import build_outcome, render_outcome
from tests.simkit import state_key
from tests.verify.conftest import AGENT_VM, synthetic_report


def verify(capsys: pytest.CaptureFixture[str], ready: Path, state: Path,
           *extra: str) -> tuple[int, str, str]:
    code = main(["verify", str(AGENT_VM), "--guest-agent", "--connection", str(ready),
                 "--state-dir", str(state), "--quick", *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _kept(state: Path) -> Path:
    """Where the reports of VM 101 reached through the agent are kept: under the node's
    identity (pvefix.target.identity)."""
    (folder,) = (state / "probes").glob(f"node-kpro6@*/{AGENT_VM}")
    return folder


def test_verify_twice_keeps_both_reports_and_compares_the_second(
    ready_file: Path, agent_sim: ReadyInfo, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The simulated guest has no GPU: each run is kept and compared, and exits 1 (it
    measured nothing, so it proves nothing)."""
    state = tmp_path / "state"
    code, out, err = verify(capsys, ready_file, state)
    assert code == 1, err
    assert "this one is the baseline for the next run" in out
    assert "measured nothing: the probe saw no GPU in the guest" in out
    code, out, err = verify(capsys, ready_file, state)
    assert code == 1, err
    kept = sorted(_kept(state).iterdir())
    assert _kept(state).parent.name == state_key(agent_sim, "node-kpro6")
    assert len(kept) == 2
    assert f"compared with {kept[0].stem}:" in out and "P2P: no regression" in out
    for path in kept:
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        Report.model_validate_json(path.read_text(encoding="utf-8"))
    assert oct((state / "probes").stat().st_mode & 0o777) == "0o700"


def test_json_output_is_a_versioned_envelope(
    ready_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = verify(capsys, ready_file, tmp_path / "state", "--format", "json")
    assert code == 1  # no GPU in the simulated guest: measured nothing
    data = json.loads(out)
    assert data["schema"] == "pvefix.verify/v1" and data["vmid"] == AGENT_VM
    assert data["measured"] is False
    assert data["comparison"] is None and Path(data["stored"]).is_file()
    Report.model_validate(data["report"])


def test_p2p_that_got_worse_exits_2(
    ready_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: write P2P OK and data delivered. Now (this GPU-less guest): nothing of it."""
    before = tmp_path / "before.json"
    before.write_text(synthetic_report(cell="OK", delivered=True, latency=0.5).to_json())
    code, out, _ = verify(capsys, ready_file, tmp_path / "state", "--before", str(before))
    assert code == 2
    assert "P2P GOT WORSE" in out and "-p2p w GPU0->GPU1: OK -> -" in out


def test_a_named_baseline_is_used_and_an_unknown_one_is_an_error(
    ready_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert verify(capsys, ready_file, state)[0] == 1  # measured nothing: no GPU in the sim
    first = next(_kept(state).iterdir()).stem
    assert verify(capsys, ready_file, state)[0] == 1
    code, out, _ = verify(capsys, ready_file, state, "--baseline", first)
    assert code == 1 and f"compared with {first}:" in out
    code, _, err = verify(capsys, ready_file, state, "--baseline", "2")
    assert code == 1 and "names 3 reports of VM 101: be more precise" in err
    code, _, err = verify(capsys, ready_file, state, "--baseline", "19990101")
    assert code == 1 and "no probe report '19990101' for VM 101" in err
    assert len(list(_kept(state).iterdir())) == 3  # no probe ran


def test_without_a_way_into_the_guest_it_says_how(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("PVEFIX_GUEST_AGENT", "PVEFIX_GUEST_SSH_HOST"):
        monkeypatch.delenv(var, raising=False)
    code = main(["verify", "101", "--state-dir", str(tmp_path)])
    assert code == 1
    assert "--guest-ssh-host HOST" in capsys.readouterr().err


def test_ns_to_ok_is_shown_as_an_improvement_and_exits_0() -> None:
    before = synthetic_report(cell="NS", delivered=False, latency=14.0, bandwidth=25.0,
                              allreduce_us=60.0)
    after = synthetic_report(cell="OK", delivered=True, latency=0.5, bandwidth=50.0,
                             created="2026-12-02T10:00:00+00:00", allreduce_us=30.0)
    outcome = build_outcome(AGENT_VM, "test", Path("/x.json"), after, ("before", before))
    assert not outcome.worse and outcome.measured  # its GPU pair was measured
    assert outcome.comparison is not None
    better = {d.item for d in outcome.comparison.improvements}
    assert {"-p2p w GPU0->GPU1", "0->1 data delivered", "0->1 latency", "0->1 bandwidth",
            "default 8 B"} <= better
    text = render_outcome(outcome)
    assert "P2P: no regression" in text
    pair_row = next(line for line in text.splitlines() if line.startswith("0->1 "))
    assert pair_row.split() == ["0->1", "NO", "->", "yes", "NO", "->", "yes", "14.00", "->",
                                "0.50", "25.0", "->", "50.0"]


def test_ok_to_ns_is_a_regression() -> None:
    before = synthetic_report(cell="OK", delivered=True, latency=0.5)
    after = synthetic_report(cell="NS", delivered=False, latency=14.0)
    outcome = build_outcome(AGENT_VM, "test", Path("/x.json"), after, ("before", before))
    items = {d.item for d in outcome.p2p_regressions}
    assert {"-p2p w GPU0->GPU1", "0->1 data delivered", "0->1 latency"} <= items
    assert "P2P GOT WORSE" in render_outcome(outcome)


def test_a_report_without_gpus_or_pairs_measured_nothing() -> None:
    empty = synthetic_report(cell="OK", delivered=True, latency=0.5).model_copy(
        update={"p2p": P2PMeasuredSection()})
    outcome = build_outcome(AGENT_VM, "test", Path("/x.json"), empty, None)
    assert not outcome.measured
    assert "measured nothing: the probe saw no GPU in the guest" in render_outcome(outcome)
