"""Before/after comparison of two probe reports, and its text rendering.

What an admin wants to see after a change: which P2P cells moved (NS -> OK), whether data now
arrives on the peer, and what latency, bandwidth and all-reduce are worth now, as ratios.
"""

from __future__ import annotations

from typing import Literal

from pvefix.probe._model import BaseModel, ConfigDict
from pvefix.probe.render import fmt, human_bytes, table
from pvefix.probe.report import Matrix, Report

Verdict = Literal["better", "worse", "changed", "same"]

#: A figure must move by more than this fraction to count as better or worse (noise).
TOLERANCE = 0.10


class Difference(BaseModel):
    """One compared item: its value before and after, the ratio after/before, a verdict."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    section: str
    item: str
    before: str
    after: str
    ratio: float | None = None
    verdict: Verdict


class Comparison(BaseModel):
    """All differences between two reports; figures are listed even when unchanged."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    before_created: str
    after_created: str
    differences: tuple[Difference, ...]

    @property
    def regressions(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.verdict == "worse")

    @property
    def improvements(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.verdict == "better")


def _figure(section: str, item: str, before: float | None, after: float | None, *,
            lower_is_better: bool, unit: str) -> Difference | None:
    if before is None and after is None:
        return None
    b = "-" if before is None else f"{fmt(before, 2)} {unit}"
    a = "-" if after is None else f"{fmt(after, 2)} {unit}"
    if before is None or after is None or before <= 0:
        verdict: Verdict = "changed" if (before is None) != (after is None) else "same"
        if before is None and after is not None:
            verdict = "better"
        elif after is None:
            verdict = "worse"
        return Difference(section=section, item=item, before=b, after=a, verdict=verdict)
    ratio = after / before
    gain = (1 / ratio) if lower_is_better else ratio
    verdict = "better" if gain > 1 + TOLERANCE else "worse" if gain < 1 - TOLERANCE else "same"
    return Difference(section=section, item=item, before=b, after=a, ratio=ratio, verdict=verdict)


def _flag(section: str, item: str, before: bool | None, after: bool | None) -> Difference | None:
    if before == after:
        return None
    def word(v: bool | None) -> str:
        return "-" if v is None else "yes" if v else "no"
    verdict: Verdict = "better" if after else "worse" if after is False else "changed"
    return Difference(section=section, item=item, before=word(before), after=word(after),
                      verdict=verdict)


def _cells(m: Matrix | None) -> dict[tuple[str, str], str]:
    if m is None:
        return {}
    return {(r, c): m.cells[i][j] for i, r in enumerate(m.rows) for j, c in enumerate(m.columns)}


def _matrix_diff(section: str, name: str, before: Matrix | None, after: Matrix | None,
                 good: str = "OK") -> list[Difference]:
    b, a = _cells(before), _cells(after)
    out = []
    for key in sorted(set(b) | set(a)):
        old, new = b.get(key, "-"), a.get(key, "-")
        if old == new:
            continue
        verdict: Verdict = "better" if new == good else "worse" if old == good else "changed"
        out.append(Difference(section=section, item=f"{name} {key[0]}->{key[1]}", before=old,
                              after=new, verdict=verdict))
    return out


def compare(before: Report, after: Report) -> Comparison:
    """Everything that differs between two reports, plus every measured figure, in order."""
    diffs: list[Difference | None] = []
    for name in ("gpus", "topology", "p2p_status", "cmdline", "kernel_log", "p2p", "allreduce"):
        b, a = getattr(before, name), getattr(after, name)
        if b.status != a.status:
            diffs.append(Difference(section=name, item="measured", before=b.status,
                                    after=a.status, verdict="changed"))
    diffs += _gpu_diffs(before, after)
    for mode in sorted(set(before.p2p_status.modes) | set(after.p2p_status.modes)):
        diffs += _matrix_diff("p2p_status", f"-p2p {mode}", before.p2p_status.modes.get(mode),
                              after.p2p_status.modes.get(mode))
    diffs += _matrix_diff("topology", "topo", before.topology.matrix, after.topology.matrix,
                          good="\0")
    if before.cmdline.cmdline != after.cmdline.cmdline:
        diffs.append(Difference(section="cmdline", item="guest cmdline",
                                before=before.cmdline.cmdline or "-",
                                after=after.cmdline.cmdline or "-", verdict="changed"))
    nb, na = len(before.kernel_log.findings), len(after.kernel_log.findings)
    if nb != na:
        diffs.append(Difference(section="kernel_log", item="PCI/BAR errors", before=str(nb),
                                after=str(na), verdict="better" if na < nb else "worse"))
    diffs += _p2p_diffs(before, after)
    diffs += _allreduce_diffs(before, after)
    return Comparison(before_created=before.created, after_created=after.created,
                      differences=tuple(d for d in diffs if d is not None))


def _gpu_diffs(before: Report, after: Report) -> list[Difference | None]:
    out: list[Difference | None] = []
    b = {g.pci_address: g for g in before.gpus.gpus}
    a = {g.pci_address: g for g in after.gpus.gpus}
    if len(b) != len(a):
        out.append(Difference(section="gpus", item="count", before=str(len(b)), after=str(len(a)),
                              verdict="changed"))
    for addr in sorted(set(b) & set(a)):
        bars_b = {x.index: x.size for x in b[addr].bars}
        bars_a = {x.index: x.size for x in a[addr].bars}
        for idx in sorted(set(bars_b) | set(bars_a)):
            if bars_b.get(idx) != bars_a.get(idx):
                out.append(Difference(
                    section="gpus", item=f"{addr} BAR{idx}",
                    before=human_bytes(bars_b[idx]) if idx in bars_b else "unassigned",
                    after=human_bytes(bars_a[idx]) if idx in bars_a else "unassigned",
                    verdict="changed"))
        if b[addr].link != a[addr].link:
            def show(g: object) -> str:
                link = getattr(g, "link", None)
                if link is None:
                    return "-"
                return f"{link.current_speed} x{link.current_width}"
            out.append(Difference(section="gpus", item=f"{addr} link", before=show(b[addr]),
                                  after=show(a[addr]), verdict="changed"))
    return out


def _p2p_diffs(before: Report, after: Report) -> list[Difference | None]:
    out: list[Difference | None] = []
    hb = {h.device: h for h in before.p2p.host_paths}
    ha = {h.device: h for h in after.p2p.host_paths}
    for d in sorted(set(hb) & set(ha)):
        x, y = hb[d], ha[d]
        out.append(_figure("p2p", f"GPU{d} H2D latency", x.h2d_latency_us, y.h2d_latency_us,
                           lower_is_better=True, unit="us"))
        out.append(_figure("p2p", f"GPU{d} H2D bandwidth", x.h2d_bandwidth_gbps,
                           y.h2d_bandwidth_gbps, lower_is_better=False, unit="GB/s"))
    pb = {(q.src, q.dst): q for q in before.p2p.pairs}
    pa = {(q.src, q.dst): q for q in after.p2p.pairs}
    for key in sorted(set(pb) | set(pa)):
        qb, qa = pb.get(key), pa.get(key)
        name = f"{key[0]}->{key[1]}"
        out.append(_flag("p2p", f"{name} peer access",
                         qb.can_access_peer if qb else None, qa.can_access_peer if qa else None))
        out.append(_flag("p2p", f"{name} peer enabled",
                         qb.peer_enabled if qb else None, qa.peer_enabled if qa else None))
        out.append(_flag("p2p", f"{name} data delivered",
                         qb.data_delivered if qb else None, qa.data_delivered if qa else None))
        out.append(_figure("p2p", f"{name} latency", qb.latency_us if qb else None,
                           qa.latency_us if qa else None, lower_is_better=True, unit="us"))
        out.append(_figure("p2p", f"{name} bandwidth", qb.bandwidth_gbps if qb else None,
                           qa.bandwidth_gbps if qa else None, lower_is_better=False,
                           unit="GB/s"))
        out.append(_figure("p2p", f"{name} via host latency",
                           qb.host_staged_latency_us if qb else None,
                           qa.host_staged_latency_us if qa else None, lower_is_better=True,
                           unit="us"))
    return out


def _allreduce_diffs(before: Report, after: Report) -> list[Difference | None]:
    out: list[Difference | None] = []
    rb = {r.label: r for r in before.allreduce.runs}
    ra = {r.label: r for r in after.allreduce.runs}
    for label in sorted(set(rb) | set(ra), key=lambda s: (s != "default", s)):
        xb = {row.bytes: row.latency_us for row in rb[label].rows} if label in rb else {}
        xa = {row.bytes: row.latency_us for row in ra[label].rows} if label in ra else {}
        for size in sorted(set(xb) | set(xa)):
            out.append(_figure("allreduce", f"{label} {human_bytes(size)}", xb.get(size),
                               xa.get(size), lower_is_better=True, unit="us"))
    return out


def render_comparison(cmp: Comparison, *, only_changes: bool = False) -> str:
    """Text: one table per section, a summary line of improvements and regressions first."""
    out = [f"probe before {cmp.before_created} vs after {cmp.after_created}: "
           f"{len(cmp.improvements)} better, {len(cmp.regressions)} worse"]
    rows = [d for d in cmp.differences if not (only_changes and d.verdict == "same")]
    if not rows:
        out.append("no differences")
    for section in dict.fromkeys(d.section for d in rows):
        out += ["", f"== {section}"]
        out += table(["item", "before", "after", "after/before", "verdict"],
                     ([d.item, d.before, d.after, "-" if d.ratio is None else f"{d.ratio:.2f}x",
                       d.verdict] for d in rows if d.section == section))
    return "\n".join(out) + "\n"
