"""Where a plan tells the admin to measure the BAR window by hand, it names the command that
does it, `pvefix rehearse VMID [--phase N]`, and each such command parses as `pvefix rehearse`
takes it, for the case's VM (issue 36). Likewise every `pvefix apply ...` a phase's activation
names carries the VMID."""

from __future__ import annotations

import re
import shlex

import pytest

from pvefix.cli import build_command
from pvefix.planner import plan as make_plan
from pvefix.planner.model import PlanOptions
from tests.planner.loader import CASES, build_state, load_case

COMMANDS = build_command().commands
SPAN = re.compile(r"`(pvefix (?:rehearse|apply) [^`]*)`")


def _texts(case_path: str) -> tuple[int, list[str]]:
    case = load_case(CASES / case_path)
    plan = make_plan(build_state(case), PlanOptions(**case.get("options", {})))
    texts = [f.detail for f in plan.findings]
    texts += [c.risk.text for p in plan.phases for c in p.changes]
    texts += [p.activation for p in plan.phases]
    return int(case["vmid"]), texts


@pytest.mark.parametrize("name", ["mmio64-leftover-edk2-unknown.json",
                                  "custom-model-not-read.json"])
def test_a_verdict_to_measure_names_pvefix_rehearse(name: str) -> None:
    vmid, texts = _texts(name)
    said = [m for t in texts for m in SPAN.findall(t) if m.startswith("pvefix rehearse")]
    assert said, texts
    for line in said:
        argv = shlex.split(line)
        params = COMMANDS["rehearse"].make_context("rehearse", argv[2:]).params
        assert params["vmid"] == vmid, line
    assert not any("qm showcmd` with each vfio-pci" in t for t in texts), "no recipe by hand"


def test_every_apply_an_activation_names_carries_the_vmid() -> None:
    for path in sorted(CASES.glob("*.json")):
        vmid, texts = _texts(path.name)
        for line in (m for t in texts for m in SPAN.findall(t) if m.startswith("pvefix apply")):
            argv = shlex.split(line)
            if "--phase" in argv and argv[2].startswith("-"):
                pytest.fail(f"{path.name}: {line!r} names no VM")
            if argv[2] == str(vmid):
                COMMANDS["apply"].make_context("apply", argv[2:])
