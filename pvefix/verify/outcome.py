"""`pvefix verify`'s result: the new report, where it is kept, and how it compares.

P2P "got worse" (exit 2) when, from the baseline to the new report, a `nvidia-smi topo -p2p`
cell moved away from OK, a GPU pair lost peer access or its data no longer arrives, or a
pair's direct latency or bandwidth got worse by more than the comparison's tolerance (10 %).
Host-path figures (GPU to host memory) and all-reduce figures are shown but do not decide
the exit code: they move with load and are not P2P.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from pvefix.probe.compare import Comparison, Difference, compare, render_comparison
from pvefix.probe.render import fmt, table, yes_no
from pvefix.probe.report import PairResult, Report

SCHEMA: Final = "pvefix.verify/v1"


def p2p_regressions(cmp: Comparison) -> tuple[Difference, ...]:
    """The differences that mean P2P got worse (see the module docstring)."""
    def counts(d: Difference) -> bool:
        if d.section == "p2p_status":
            return True
        return d.section == "p2p" and not d.item.startswith("GPU") and "via host" not in d.item

    return tuple(d for d in cmp.differences if d.verdict == "worse" and counts(d))


class VerifyOutcome(BaseModel):
    """What one `pvefix verify` run produced (its `--format json` output)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    schema_: Literal["pvefix.verify/v1"] = Field(default=SCHEMA, alias="schema")
    vmid: int
    via: str
    stored: str
    baseline: str | None = None
    report: Report
    baseline_report: Report | None = None
    comparison: Comparison | None = None
    p2p_regressions: tuple[Difference, ...] = ()
    #: False when the probe saw no GPU: nothing was measured, the run proves nothing (exit 1).
    measured: bool = True

    @property
    def worse(self) -> bool:
        return bool(self.p2p_regressions)


def measured_something(report: Report) -> bool:
    """Whether the probe saw a GPU or measured a GPU pair (else the run measured nothing)."""
    return (report.gpus.measured and bool(report.gpus.gpus)) or bool(report.p2p.pairs)


def nothing_measured_line(report: Report) -> str:
    why = report.gpus.reason or "no GPU in the report"
    return (f"measured nothing: the probe saw no GPU in the guest ({why}); this run proves "
            "nothing about P2P (exit 1)")


def build_outcome(vmid: int, via: str, stored: Path, report: Report,
                  baseline: tuple[str, Report] | None) -> VerifyOutcome:
    """Compare `report` with the baseline (when there is one) and collect the verdict."""
    measured = measured_something(report)
    if baseline is None:
        return VerifyOutcome(vmid=vmid, via=via, stored=str(stored), report=report,
                             measured=measured)
    name, before = baseline
    cmp = compare(before, report)
    return VerifyOutcome(vmid=vmid, via=via, stored=str(stored), baseline=name, report=report,
                         baseline_report=before, comparison=cmp,
                         p2p_regressions=p2p_regressions(cmp), measured=measured)


def _pairs(report: Report | None) -> dict[tuple[int, int], PairResult]:
    return {(p.src, p.dst): p for p in report.p2p.pairs} if report is not None else {}


def render_pairs(before: Report | None, after: Report) -> list[str]:
    """Per GPU pair, before -> after: peer access, data delivered, latency, bandwidth."""
    b, a = _pairs(before), _pairs(after)
    if not b and not a:
        why = after.p2p.reason or "one GPU or none: no pair"
        return [f"GPU pairs: none measured ({why})"]

    def two(x: str, y: str) -> str:
        return y if before is None else f"{x} -> {y}"

    rows = []
    for key in sorted(set(b) | set(a)):
        x, y = b.get(key), a.get(key)
        rows.append([
            f"{key[0]}->{key[1]}",
            two(yes_no(x.can_access_peer if x else None), yes_no(y.can_access_peer if y else None)),
            two(yes_no(x.data_delivered if x else None), yes_no(y.data_delivered if y else None)),
            two(fmt(x.latency_us if x else None, 2), fmt(y.latency_us if y else None, 2)),
            two(fmt(x.bandwidth_gbps if x else None), fmt(y.bandwidth_gbps if y else None))])
    return table(["pair", "peer access", "data delivered", "latency us", "GB/s"], rows)


def render_outcome(out: VerifyOutcome) -> str:
    """The text `pvefix verify` prints."""
    lines = [f"pvefix verify: VM {out.vmid} through {out.via}",
             f"report kept: {out.stored}"]
    report = out.report
    lines.append(f"probe: {report.hostname}, {report.created}, {report.duration_s:.1f} s"
                 f"{' (quick)' if report.quick else ''}; GPUs: "
                 f"{len(report.gpus.gpus) if report.gpus.measured else 0}"
                 f"{'' if report.gpus.measured else f' ({report.gpus.reason})'}")
    lines += ["", *render_pairs(out.baseline_report, report)]
    if not out.measured:
        lines += ["", nothing_measured_line(report)]
    if out.comparison is None:
        lines += ["", "no earlier report of this VM: this one is the baseline for the next run"]
        return "\n".join(lines) + "\n"
    lines += ["", f"compared with {out.baseline}:",
              render_comparison(out.comparison).rstrip("\n")]
    if out.worse:
        lines += ["", f"P2P GOT WORSE ({len(out.p2p_regressions)}):"]
        lines += [f"  {d.item}: {d.before} -> {d.after}" for d in out.p2p_regressions]
    else:
        lines += ["", "P2P: no regression"]
    return "\n".join(lines) + "\n"
