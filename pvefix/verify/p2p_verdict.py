"""Did the P2P phase work in the guest? The verdict from the probes before and after it.

The clique asserts a capability; only moving data proves it (DOMAIN.md section 6). The phase
fails when, after it:
- fewer GPU pairs report P2P `OK` (nvidia-smi topo -p2p w, else r) than the cliques grant
  (k * (k - 1) ordered pairs for a clique of k GPUs): the grant did not reach the driver;
- a pair's copy did not deliver the data byte for byte, or errored;
- a pair's P2P copy is slower than staging through host memory, or its latency/bandwidth got
  worse than before the phase (more than `SLOWER` worse);
- NCCL all-reduce hung (ran past the probe's timeout), returned wrong results, or its default
  (P2P allowed) sweep is slower than the sweep with NCCL_P2P_DISABLE=1.
What was not measured (no PyTorch, one GPU) is said, never counted as a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pvefix.probe.report import AllReduceRun, PairResult, Report

SLOWER = 1.10  # a 10 % margin: run-to-run noise of the probe's quick mode


@dataclass
class P2PVerdict:
    failures: list[str] = field(default_factory=list)
    unmeasured: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.failures)


def granted_pairs(cliques: dict[str, int]) -> int:
    sizes: dict[int, int] = {}
    for c in cliques.values():
        sizes[c] = sizes.get(c, 0) + 1
    return sum(k * (k - 1) for k in sizes.values() if k > 1)


def _ok_pairs(report: Report) -> int | None:
    matrix = report.p2p_status.modes.get("w") or report.p2p_status.modes.get("r")
    if matrix is None:
        return None
    return sum(1 for i, row in enumerate(matrix.cells) for j, c in enumerate(row)
               if i != j and c == "OK")


def _pairs(report: Report | None) -> dict[tuple[int, int], PairResult]:
    return {(p.src, p.dst): p for p in report.p2p.pairs} if report is not None else {}


def _largest(run: AllReduceRun) -> float | None:
    rows = sorted(run.rows, key=lambda r: r.bytes)
    return rows[-1].bus_bandwidth_gbps if rows else None


def judge(before: Report | None, after: Report, cliques: dict[str, int]) -> P2PVerdict:
    v = P2PVerdict()
    want = granted_pairs(cliques)
    ok = _ok_pairs(after)
    if ok is None:
        v.unmeasured.append("nvidia-smi topo -p2p w/r: "
                            + (after.p2p_status.reason or "not read"))
    elif ok < want:
        v.failures.append(f"P2P status: {ok} GPU pair(s) report OK, the cliques grant {want}")
    old = _pairs(before)
    if not after.p2p.measured:
        v.unmeasured.append("data movement: " + (after.p2p.reason or "not measured"))
    for key, p in sorted(_pairs(after).items()):
        pair = f"GPU{key[0]}->GPU{key[1]}"
        if p.error:
            v.failures.append(f"{pair}: {p.error}")
        if p.data_delivered is False:
            v.failures.append(f"{pair}: wrong data ({p.mismatched_bytes} byte(s) differ)")
        if p.latency_us and p.host_staged_latency_us and p.latency_us > p.host_staged_latency_us:
            v.failures.append(f"{pair}: P2P {p.latency_us:.2f} us is slower than through host"
                              f" memory ({p.host_staged_latency_us:.2f} us)")
        b = old.get(key)
        if b and b.latency_us and p.latency_us and p.latency_us > b.latency_us * SLOWER:
            v.failures.append(f"{pair}: latency {b.latency_us:.2f} -> {p.latency_us:.2f} us")
        if b and b.bandwidth_gbps and p.bandwidth_gbps and \
                p.bandwidth_gbps * SLOWER < b.bandwidth_gbps:
            v.failures.append(f"{pair}: bandwidth {b.bandwidth_gbps:.1f} -> "
                              f"{p.bandwidth_gbps:.1f} GB/s")
    runs = {r.label: r for r in after.allreduce.runs}
    for run in runs.values():
        if run.reason and run.reason.startswith("timeout: all-reduce ran past"):
            v.failures.append(f"NCCL all-reduce ({run.label}) hung: {run.reason}")
        if any(not row.correct for row in run.rows):
            v.failures.append(f"NCCL all-reduce ({run.label}) returned wrong results")
    if not runs:
        v.unmeasured.append("NCCL all-reduce: " + (after.allreduce.reason or "not measured"))
    default, off = runs.get("default"), runs.get("p2p_disabled")
    if default and off:
        a, b2 = _largest(default), _largest(off)
        if a is not None and b2 is not None and a * SLOWER < b2:
            v.failures.append(f"NCCL all-reduce with P2P ({a:.1f} GB/s) is slower than without"
                              f" ({b2:.1f} GB/s)")
    return v
