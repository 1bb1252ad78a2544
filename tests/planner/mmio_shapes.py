"""The VM shapes the planner's MMIO cases judge, before and after the plan (for the firmware
conformance test, tests/conformance/test_firmware_window.py)."""

from __future__ import annotations

import re

from pvefix.planner import mmio
from pvefix.planner.bar_verdict import Shape
from pvefix.planner.context import build_context
from pvefix.planner.plan import PlanOptions, plan
from pvefix.planner.rules import bar_space
from tests.planner.loader import CASES, build_state, load_case


def planner_shapes() -> list[tuple[str, Shape]]:
    """(case name and reading, shape) for every case whose VM bar-space judges: the config as
    it is, with the cpu line the plan writes, and with the X-PciMmio64Mb a finding offers."""
    out: list[tuple[str, Shape]] = []
    for path in sorted(CASES.glob("*.json")):
        case = load_case(path)
        state = build_state(case)
        ctx = build_context(state, PlanOptions(**case.get("options", {})))
        if not any(d.bars for p in ctx.gpu_entries for d in p.sized):
            continue
        vm, cpu, mmio64_mb = bar_space.window_inputs(ctx)
        result = plan(state, PlanOptions(**case.get("options", {})))
        planned = [c.after for p in result.phases for c in p.changes
                   if c.id == "vm.cpu.phys-bits" and isinstance(c.after, str)]
        offered: list[int | None] = [
            None if f.detail.startswith("Keeping the cpu line, remove") else int(m.group(1))
            for f in result.findings if f.id == "bar.ovmf-mmio64"
            for m in [re.search(r"X-PciMmio64Mb,string=(\d+)", f.detail)] if m]
        lines = [("now", cpu, mmio64_mb)]
        lines += [("planned", mmio.read_cpu(a, ctx.cpu_models), mmio64_mb) for a in planned]
        lines += [(f"offered X-PciMmio64Mb={mb or 'removed'}", cpu, mb) for mb in offered]
        for when, line, mb in lines:
            for reading, shape in vm.shapes(ctx, line, mb) or []:
                out.append((f"{path.stem} ({when}, {reading})", shape))
    return out
