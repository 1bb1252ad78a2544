"""Before/after comparison on synthetic reports: the story of one fix, NS -> OK."""

from __future__ import annotations

from pvefix.probe.compare import compare, render_comparison
from pvefix.probe.report import (
    AllReduceRow,
    AllReduceRun,
    AllReduceSection,
    CmdlineSection,
    GpuSection,
    KernelLogFinding,
    KernelLogSection,
    Matrix,
    P2PMeasuredSection,
    P2PStatusSection,
    PairResult,
    Report,
    TopologySection,
)


def p2p_matrix(cell: str) -> Matrix:
    return Matrix(columns=("GPU0", "GPU1"), rows=("GPU0", "GPU1"),
                  cells=(("X", cell), (cell, "X")))


def make_report(*, cell: str, delivered: bool, latency: float, allreduce_us: float,
                errors: int = 0, created: str = "t") -> Report:
    pairs = tuple(
        PairResult(src=s, dst=d, can_access_peer=cell == "OK", peer_enabled=cell == "OK",
                   data_delivered=delivered, mismatched_bytes=0 if delivered else 4096,
                   bytes_checked=4096, latency_us=latency, bandwidth_gbps=50.0,
                   host_staged_latency_us=28.0, host_staged_bandwidth_gbps=20.0)
        for s, d in ((0, 1), (1, 0))
    )
    rows = tuple(AllReduceRow(bytes=b, latency_us=allreduce_us * k, bus_bandwidth_gbps=1.0,
                              correct=True) for k, b in enumerate((8, 1 << 20), start=1))
    finding = KernelLogFinding(kind="bar_no_space", line="BAR 1: can't assign; no space")
    return Report(
        pvefix_version="0", created=created, hostname="guest",
        gpus=GpuSection(), topology=TopologySection(),
        p2p_status=P2PStatusSection(modes={"r": p2p_matrix(cell), "w": p2p_matrix(cell)}),
        cmdline=CmdlineSection(cmdline="quiet"),
        kernel_log=KernelLogSection(findings=(finding,) * errors),
        p2p=P2PMeasuredSection(pairs=pairs),
        allreduce=AllReduceSection(world_size=2, runs=(
            AllReduceRun(label="default", rows=rows),
        )),
    )


BEFORE = make_report(cell="NS", delivered=False, latency=14.0, allreduce_us=40.0, errors=1,
                     created="before")
AFTER = make_report(cell="OK", delivered=True, latency=0.5, allreduce_us=20.0, created="after")


def by_item(cmp):
    return {(d.section, d.item): d for d in cmp.differences}


def test_ns_to_ok_is_reported_as_better_for_every_cell_and_mode():
    d = by_item(compare(BEFORE, AFTER))
    for mode in "rw":
        for cell in ("GPU0->GPU1", "GPU1->GPU0"):
            diff = d[("p2p_status", f"-p2p {mode} {cell}")]
            assert (diff.before, diff.after, diff.verdict) == ("NS", "OK", "better")


def test_data_now_delivered_and_latency_ratio_are_shown():
    d = by_item(compare(BEFORE, AFTER))
    delivered = d[("p2p", "0->1 data delivered")]
    assert (delivered.before, delivered.after, delivered.verdict) == ("no", "yes", "better")
    latency = d[("p2p", "0->1 latency")]
    assert latency.ratio is not None and abs(latency.ratio - 0.5 / 14.0) < 1e-9
    assert latency.verdict == "better"


def test_all_reduce_rows_are_compared_per_size_with_ratios():
    d = by_item(compare(BEFORE, AFTER))
    row = d[("allreduce", "default 1 MiB")]
    assert (row.before, row.after, row.ratio, row.verdict) == (
        "80.00 us", "40.00 us", 0.5, "better"
    )


def test_a_fix_undone_is_a_regression():
    cmp = compare(AFTER, BEFORE)
    worse = {d.item for d in cmp.regressions}
    assert {"-p2p r GPU0->GPU1", "0->1 data delivered", "0->1 latency", "PCI/BAR errors"} <= worse


def test_the_same_report_twice_has_nothing_better_or_worse():
    cmp = compare(AFTER, AFTER)
    assert cmp.improvements == () and cmp.regressions == ()
    assert all(d.verdict == "same" for d in cmp.differences)
    assert "no differences" in render_comparison(cmp, only_changes=True)


def test_small_noise_in_a_figure_is_the_same_not_better():
    noisy = make_report(cell="OK", delivered=True, latency=0.52, allreduce_us=20.0)
    assert by_item(compare(AFTER, noisy))[("p2p", "0->1 latency")].verdict == "same"


def test_a_section_that_stopped_being_measured_is_named():
    lost = AFTER.model_copy(update={"p2p": P2PMeasuredSection(status="not_measured",
                                                              reason="no torch")})
    d = by_item(compare(AFTER, lost))
    assert (d[("p2p", "measured")].before, d[("p2p", "measured")].after) == (
        "measured", "not_measured"
    )
    assert d[("p2p", "0->1 data delivered")].verdict == "changed"  # yes -> unknown


def test_the_rendering_leads_with_the_count_and_shows_ns_to_ok():
    text = render_comparison(compare(BEFORE, AFTER))
    assert text.startswith("probe before before vs after after: ")
    assert "0 worse" in text
    assert any("-p2p r GPU0->GPU1" in line and "NS" in line and "OK" in line
               for line in text.splitlines())
