"""The P2P phase's verdict from probe reports, and the guest side the probe reports."""

from __future__ import annotations

from pvefix.probe.collect import seen_environment
from pvefix.probe.render import render_guest_side
from pvefix.verify.p2p_verdict import granted_pairs, judge
from tests.verify.conftest import synthetic_report

CLIQUE = {"hostpci0": 0, "hostpci1": 0}


def test_granted_pairs_count_ordered_pairs_within_each_clique() -> None:
    assert granted_pairs(CLIQUE) == 2
    assert granted_pairs({"a": 0, "b": 0, "c": 0, "d": 1}) == 6


def test_ns_to_ok_with_data_delivered_and_faster_passes() -> None:
    before = synthetic_report(cell="NS", delivered=True, latency=14.0)
    after = synthetic_report(cell="OK", delivered=True, latency=1.0)
    assert judge(before, after, CLIQUE).failures == []


def test_still_ns_wrong_data_or_slower_fails() -> None:
    before = synthetic_report(cell="NS", delivered=True, latency=14.0)
    still = judge(before, synthetic_report(cell="NS", delivered=True, latency=14.0), CLIQUE)
    assert any("0 GPU pair(s) report OK" in f for f in still.failures)
    wrong = judge(before, synthetic_report(cell="OK", delivered=False, latency=1.0), CLIQUE)
    assert any("wrong data" in f for f in wrong.failures)
    slower = judge(before, synthetic_report(cell="OK", delivered=True, latency=20.0), CLIQUE)
    assert any("latency 14.00 -> 20.00 us" in f for f in slower.failures)


def test_the_probe_reports_the_nccl_and_vllm_side() -> None:
    env = seen_environment({"NCCL_DEBUG": "INFO", "PATH": "/bin", "VLLM_X": "1"})
    assert env == {"NCCL_DEBUG": "INFO", "VLLM_X": "1"}
    report = synthetic_report(cell="OK", delivered=True, latency=1.0).model_copy(
        update={"environment": env})
    text = "\n".join(render_guest_side(report))
    assert "NCCL_P2P_LEVEL not set: NCCL keeps host memory across CPU host bridges" in text
    level = report.model_copy(update={"environment": {"NCCL_P2P_LEVEL": "SYS"}})
    assert "NCCL_P2P_LEVEL=SYS" in "\n".join(render_guest_side(level))
