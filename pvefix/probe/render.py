"""Text rendering of a probe report: short, aligned, every gap says why."""

from __future__ import annotations

from collections.abc import Iterable

from pvefix.probe.report import P2P_LEGEND, P2P_MODES, Matrix, Report, Section


def human_bytes(n: int) -> str:
    """1024 -> '1 KiB', 268435456 -> '256 MiB', 1536 -> '1.5 KiB'."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    value, unit = float(n), 0
    while value >= 1024 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    return f"{value:.0f} {units[unit]}" if value.is_integer() else f"{value:.1f} {units[unit]}"


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    """Left-aligned columns, two spaces apart."""
    body = [header, *rows]
    widths = [max(len(r[i]) for r in body) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in body]


def matrix_lines(m: Matrix) -> list[str]:
    return table(["", *m.columns], ([r, *cells] for r, cells in zip(m.rows, m.cells, strict=True)))


def _head(title: str, section: Section) -> list[str]:
    if section.measured:
        return ["", f"== {title}"]
    return ["", f"== {title}: not measured ({section.reason})"]


def render_text(report: Report) -> str:
    """The readable summary that `pvefix probe` prints by default."""
    out = [
        f"pvefix probe ({report.schema_}) on {report.hostname}, kernel {report.kernel}, "
        f"{report.created}, {report.duration_s:.1f} s{' (quick)' if report.quick else ''}"
    ]
    g = report.gpus
    out += _head("GPUs", g)
    if g.measured:
        out.append(f"driver {g.driver_version or '-'}, CUDA {g.cuda_version or '-'}; "
                   f"from {', '.join(g.sources)}")
        rows = []
        for gpu in g.gpus:
            bars = ", ".join(f"BAR{b.index} {human_bytes(b.size)}" for b in gpu.bars if b.index < 6)
            link = "-"
            if gpu.link is not None:
                link = f"{gpu.link.current_speed or '?'} x{gpu.link.current_width or '?'}"
                if gpu.link.max_width is not None or gpu.link.max_speed is not None:
                    link += f" (max {gpu.link.max_speed or '?'} x{gpu.link.max_width or '?'})"
            rows.append([
                "-" if gpu.index is None else str(gpu.index), gpu.name or "?", gpu.pci_address,
                "-" if gpu.memory_total_mib is None else f"{gpu.memory_total_mib} MiB",
                "-" if gpu.numa_node is None else str(gpu.numa_node), link, bars or "-"])
        out += table(["#", "name", "pci", "memory", "numa", "link", "BARs"], rows)
    t = report.topology
    out += _head("nvidia-smi topo -m", t)
    if t.matrix is not None:
        out += matrix_lines(t.matrix)
        for label, a in t.affinity.items():
            out.append(f"{label}: CPU {a.cpu_affinity or '-'}, NUMA {a.numa_affinity or '-'}")
    p = report.p2p_status
    out += _head("nvidia-smi topo -p2p (what the driver claims)", p)
    for mode, m in p.modes.items():
        out.append(f"-- {mode} ({P2P_MODES.get(mode, mode)})")
        out += matrix_lines(m)
    for mode, why in p.failed_modes.items():
        out.append(f"-- {mode}: not read ({why})")
    if p.modes:
        seen = sorted({c for m in p.modes.values() for row in m.cells for c in row})
        out.append("legend: " + ", ".join(f"{c} = {P2P_LEGEND.get(c, '(not in legend)')}"
                                          for c in seen))
    c = report.cmdline
    out += _head("guest kernel cmdline", c)
    if c.cmdline is not None:
        out.append(c.cmdline)
    k = report.kernel_log
    out += _head("kernel log: PCI/BAR placement errors", k)
    if k.measured:
        out.append(f"{len(k.findings)} in {k.lines_scanned} lines from {k.source}")
        out += [f"  [{f.kind}] {f.line}" for f in k.findings]
    out += _render_p2p(report)
    out += _render_allreduce(report)
    out += render_guest_side(report)
    return "\n".join(out) + "\n"


def render_guest_side(report: Report) -> list[str]:
    """What in the guest still decides whether P2P is used (DOMAIN.md section 6)."""
    env = report.environment
    out = ["", "== guest side: NCCL and vLLM (environment the probe saw; your serving stack's"
           " own environment may differ)"]
    level = env.get("NCCL_P2P_LEVEL")
    out.append(f"NCCL_P2P_LEVEL={level}" if level else
               "NCCL_P2P_LEVEL not set: NCCL keeps host memory across CPU host bridges"
               " (set NCCL_P2P_LEVEL=SYS to let it use P2P there)")
    if env.get("NCCL_P2P_DISABLE") not in (None, "0"):
        out.append(f"NCCL_P2P_DISABLE={env['NCCL_P2P_DISABLE']}: NCCL will not use P2P at all")
    n = len(report.gpus.gpus) if report.gpus.measured else 0
    if n > 2:
        out.append(f"vLLM: {n} PCIe GPUs, more than 2: its custom all-reduce is disabled, it"
                   " uses NCCL")
    out += [f"{k}={v}" for k, v in env.items() if k not in ("NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE")]
    return out


def _render_p2p(report: Report) -> list[str]:
    m = report.p2p
    out = _head("measured P2P (PyTorch)", m)
    if not m.measured:
        return out
    out.append(f"torch {m.torch_version}, CUDA {m.cuda_version}, {len(m.devices)} device(s), "
               f"latency {m.latency_bytes} B, bandwidth {human_bytes(m.bandwidth_bytes or 0)}, "
               f"median of {m.iterations}")
    if m.host_paths:
        out.append("per GPU, against pinned host memory:")
        out += table(
            ["gpu", "H2D us", "D2H us", "H2D GB/s", "D2H GB/s", "on-GPU copy GB/s"],
            ([str(h.device), fmt(h.h2d_latency_us), fmt(h.d2h_latency_us),
              fmt(h.h2d_bandwidth_gbps), fmt(h.d2h_bandwidth_gbps), fmt(h.d2d_bandwidth_gbps)]
             for h in m.host_paths))
    if m.pairs:
        out.append("per ordered pair (direct copy vs through pinned host memory):")
        out += table(
            ["src->dst", "peer", "enabled", "data arrived", "us", "GB/s", "host us",
             "host GB/s"],
            ([f"{q.src}->{q.dst}", yes_no(q.can_access_peer), yes_no(q.peer_enabled),
              yes_no(q.data_delivered) + (f" ({q.mismatched_bytes} bad)"
                                          if q.mismatched_bytes else ""),
              fmt(q.latency_us), fmt(q.bandwidth_gbps), fmt(q.host_staged_latency_us),
              fmt(q.host_staged_bandwidth_gbps)] for q in m.pairs))
        out += [f"  {q.src}->{q.dst}: {q.error or q.peer_error}" for q in m.pairs
                if q.error or q.peer_error]
    if m.note:
        out.append(m.note)
    return out


def _render_allreduce(report: Report) -> list[str]:
    a = report.allreduce
    out = _head(f"all-reduce (NCCL, {a.world_size} GPUs)", a)
    for run in a.runs:
        if not run.measured:
            out.append(f"-- {run.label}: not measured ({run.reason})")
            continue
        env = " ".join(f"{k}={v}" for k, v in run.env.items())
        out.append(f"-- {run.label}: {env}")
        out += table(
            ["size", "latency us", "bus GB/s", "sum right"],
            ([human_bytes(r.bytes), fmt(r.latency_us), fmt(r.bus_bandwidth_gbps, 2),
              yes_no(r.correct)] for r in run.rows))
    return out
