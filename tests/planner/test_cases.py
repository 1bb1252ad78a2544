"""Every planner case file: state in, plan out; a failing case prints what it got."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvefix.planner import plan
from pvefix.planner.model import PlanOptions

from .loader import CASES, build_state, load_case

CASE_FILES = sorted(CASES.glob("*.json"))


def test_there_are_cases() -> None:
    assert len(CASE_FILES) >= 14


@pytest.mark.parametrize("path", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_case(path: Path) -> None:
    case = load_case(path)
    result = plan(build_state(case), PlanOptions(**case.get("options", {})))
    expect = case["expect"]
    got_phases = [
        {"disruption": p.disruption, "changes": [c.id for c in p.changes]} for p in result.phases
    ]
    assert got_phases == expect["phases"], f"{path.name}: phases"
    got_findings = sorted(f.id for f in result.findings)
    assert got_findings == sorted(expect["findings"]), f"{path.name}: findings"
    assert sorted(n.rule for n in result.noops) == sorted(expect["noops"]), f"{path.name}: noops"
    severities = {f.id: f.severity for f in result.findings}
    assert severities == expect["severities"], f"{path.name}: finding severities"
    reasons = {n.rule: n.reason for n in result.noops}
    assert reasons == expect["noop_reasons"], f"{path.name}: no-op reasons"
    changes = {c.id: c for p in result.phases for c in p.changes}
    for cid, (before, after) in expect.get("values", {}).items():
        assert (changes[cid].before, changes[cid].after) == (before, after), f"{path.name}: {cid}"
