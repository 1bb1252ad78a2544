"""Run the whole probe: read what the machine says, measure what CUDA allows, build a Report.

Nothing here raises for a missing GPU, tool or library: each section says what it could not
measure and why. Parse errors in tool output become a reason too, with the tool named.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pvefix import __version__
from pvefix.errors import ParseError
from pvefix.probe import kernel, nvsmi, sysfs
from pvefix.probe.allreduce import measure_allreduce
from pvefix.probe.p2p import find_torch_python, measure_p2p
from pvefix.probe.report import (
    P2P_MODES,
    AllReduceSection,
    Gpu,
    GpuSection,
    Link,
    Matrix,
    P2PMeasuredSection,
    P2PStatusSection,
    Report,
    TopologySection,
    not_measured,
)
from pvefix.probe.shell import CommandRunner, run_command
from pvefix.probe.sizes import plan_for

_SMI_FALLBACKS = ("/usr/bin/nvidia-smi", "/usr/local/nvidia/bin/nvidia-smi")
_SMI_TIMEOUT = 20.0


@dataclass(frozen=True)
class ProbeOptions:
    """What to probe and how long it may take. Paths are parameters for tests."""

    quick: bool = False
    timeout: float | None = None
    python: str | None = None
    nvidia_smi: str | None = None  # None: look on PATH and the usual places
    measure: bool = True
    sysfs_root: Path = Path("/sys")
    proc_root: Path = Path("/proc")
    kmsg: Path = Path("/dev/kmsg")
    env: dict[str, str] | None = field(default=None)


def find_nvidia_smi() -> str | None:
    """nvidia-smi on PATH, or where drivers and container images usually put it."""
    found = shutil.which("nvidia-smi")
    if found:
        return found
    return next((p for p in _SMI_FALLBACKS if os.access(p, os.X_OK)), None)


def _speed_from_gen(gen: int | None) -> str | None:
    rates = {1: "2.5", 2: "5.0", 3: "8.0", 4: "16.0", 5: "32.0", 6: "64.0"}
    return f"{rates[gen]} GT/s PCIe" if gen in rates else None


def merge_gpus(smi: tuple[nvsmi.SmiGpu, ...], kernel_gpus: tuple[Gpu, ...]) -> tuple[Gpu, ...]:
    """One Gpu per PCI address: nvidia-smi's index, name and memory; sysfs's BARs and link."""
    by_address = {g.pci_address: g for g in kernel_gpus}
    merged: list[Gpu] = []
    for s in smi:
        k = by_address.pop(s.pci_address, None)
        link = k.link if k is not None else None
        if link is None and s.link_width_current is not None:
            link = Link(
                current_speed=_speed_from_gen(s.link_gen_current),
                current_width=s.link_width_current, max_speed=_speed_from_gen(s.link_gen_max),
                max_width=s.link_width_max)
        base = k if k is not None else Gpu(pci_address=s.pci_address)
        merged.append(
            base.model_copy(
                update={
                    "index": s.index,
                    "name": s.name,
                    "memory_total_mib": s.memory_total_mib,
                    "link": link}))
    merged.extend(by_address.values())  # GPUs the kernel has but nvidia-smi does not list
    return tuple(merged)


def probe_gpus(smi: str | None, opts: ProbeOptions, run: CommandRunner) -> GpuSection:
    """GPU list from `nvidia-smi --query-gpu` (table as fallback) merged with sysfs."""
    kernel_gpus = sysfs.find_gpus(opts.sysfs_root)
    sources: list[str] = ["sysfs"] if kernel_gpus else []
    smi_gpus: tuple[nvsmi.SmiGpu, ...] = ()
    driver = cuda = None
    problems: list[str] = []
    if smi is None:
        problems.append("nvidia-smi not found")
    else:
        query = ",".join(nvsmi.QUERY_FIELDS)
        result = run([smi, f"--query-gpu={query}", "--format=csv,noheader,nounits"], _SMI_TIMEOUT)
        if result.ok:
            try:
                smi_gpus = nvsmi.parse_query_csv(result.stdout)
                sources.append("nvidia-smi --query-gpu")
            except ParseError as exc:
                problems.append(str(exc))
        table = run([smi], _SMI_TIMEOUT)
        if table.ok:
            try:
                summary = nvsmi.parse_smi_table(table.stdout)
                driver, cuda = summary.driver_version, summary.cuda_version
                if not smi_gpus:
                    smi_gpus = summary.gpus
                    sources.append("nvidia-smi table")
            except ParseError as exc:
                problems.append(str(exc))
        elif not result.ok:
            problems.append(f"nvidia-smi: {table.why()}")
    gpus = merge_gpus(smi_gpus, kernel_gpus)
    if not gpus:
        where = opts.sysfs_root / "bus/pci/devices"
        reason = f"no NVIDIA GPU (vendor 0x10de, class 0x03) in {where}"
        return not_measured(GpuSection, "; ".join([reason, *problems]))
    if driver is None and smi_gpus:
        driver = smi_gpus[0].driver_version
    return GpuSection(gpus=gpus, driver_version=driver, cuda_version=cuda, sources=tuple(sources))


def probe_topology(smi: str | None, run: CommandRunner) -> TopologySection:
    if smi is None:
        return not_measured(TopologySection, "nvidia-smi not found")
    result = run([smi, "topo", "-m"], _SMI_TIMEOUT)
    if not result.ok:
        return not_measured(TopologySection, f"nvidia-smi topo -m: {result.why()}")
    try:
        matrix, affinity = nvsmi.parse_topo_matrix(result.stdout)
    except ParseError as exc:
        return not_measured(TopologySection, str(exc))
    return TopologySection(matrix=matrix, affinity=affinity)


def probe_p2p_status(smi: str | None, run: CommandRunner) -> P2PStatusSection:
    if smi is None:
        return not_measured(P2PStatusSection, "nvidia-smi not found")
    modes: dict[str, Matrix] = {}
    failed: dict[str, str] = {}
    for mode in P2P_MODES:
        result = run([smi, "topo", "-p2p", mode], _SMI_TIMEOUT)
        if not result.ok:
            failed[mode] = result.why()
            continue
        try:
            modes[mode] = nvsmi.parse_topo_p2p(result.stdout, source=f"nvidia-smi topo -p2p {mode}")
        except ParseError as exc:
            failed[mode] = str(exc)
    if not modes:
        reason = "; ".join(f"{m}: {why}" for m, why in failed.items())
        return P2PStatusSection(status="not_measured", reason=reason, failed_modes=failed)
    return P2PStatusSection(modes=modes, failed_modes=failed)


def collect(opts: ProbeOptions | None = None, run: CommandRunner = run_command) -> Report:
    """The full report. Bounded by the plan's budget; never raises for a missing capability."""
    opts = opts or ProbeOptions()
    plan = plan_for(opts.quick, opts.timeout)
    started = time.monotonic()
    smi = opts.nvidia_smi or find_nvidia_smi()
    gpus = probe_gpus(smi, opts, run)
    topology = probe_topology(smi, run)
    p2p_status = probe_p2p_status(smi, run)
    cmdline = kernel.read_cmdline(opts.proc_root)
    kernel_log = kernel.read_kernel_log(run, opts.kmsg)

    p2p: P2PMeasuredSection
    allreduce: AllReduceSection
    if not opts.measure:
        p2p = not_measured(P2PMeasuredSection, "measurements switched off")
        allreduce = not_measured(AllReduceSection, "measurements switched off")
    else:
        python, why = find_torch_python(opts.python, run)
        if python is None:
            p2p = not_measured(P2PMeasuredSection, why)
            allreduce = not_measured(AllReduceSection, why)
        else:
            remaining = plan.budget_s - (time.monotonic() - started)
            # One GPU: no all-reduce follows, so the P2P worker may use the whole budget.
            share = 0.95 if len(gpus.gpus) == 1 else 0.4
            p2p = measure_p2p(python, plan, remaining * share, run)
            world = len(p2p.devices) if p2p.measured else len(gpus.gpus)
            if not p2p.measured and p2p.reason and "CUDA" in p2p.reason:
                allreduce = not_measured(AllReduceSection, p2p.reason)
            else:
                remaining = plan.budget_s - (time.monotonic() - started)
                allreduce = measure_allreduce(python, world, plan, remaining, opts.env)
    return Report(
        pvefix_version=__version__,
        # timezone.utc, not dt.UTC (3.11+): the probe also runs on guests with Python 3.10.
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),  # noqa: UP017
        hostname=socket.gethostname(), kernel=platform.release(), quick=opts.quick,
        duration_s=round(time.monotonic() - started, 2), gpus=gpus, topology=topology,
        p2p_status=p2p_status, cmdline=cmdline, kernel_log=kernel_log, p2p=p2p, allreduce=allreduce,
        environment=seen_environment(os.environ if opts.env is None else opts.env))


def seen_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that decide whether NCCL and vLLM use P2P, as this process sees them."""
    return {k: v for k, v in sorted(env.items())
            if k.startswith(("NCCL_", "VLLM_")) or k == "CUDA_VISIBLE_DEVICES"}
