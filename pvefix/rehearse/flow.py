"""One rehearsal: which config (the next start, phases of the plan over it, a plan's end),
the stand-ins' BAR sizes from the node's sysfs facts, the node's facts, the QEMU command, the
run, the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from pvefix.errors import PvefixError
from pvefix.planner.context import Context, build_context
from pvefix.planner.model import Plan
from pvefix.rehearse.build import (
    BarShape,
    HostCpu,
    Inputs,
    Job,
    NodeFacts,
    RehearseRefused,
    build_job,
)
from pvefix.rehearse.command import ProxmoxRefuses
from pvefix.rehearse.runner import choose_accel, command_line, read_facts, run_job
from pvefix.rehearse.unmodelled import left_out
from pvefix.rehearse.verdict import Verdict, judge
from pvefix.state import HostState
from pvefix.target.node import Node
from pvefix.vmconfig import VMConfig
from pvefix.vmconfig.nextstart import NextStart


@dataclass(frozen=True)
class Settings:
    """How to rehearse: the accelerator (auto, kvm, tcg), the time limit, the firmware folder
    on the node (and whether the admin named it), whether a lost connection ends the run."""

    accel: str = "auto"
    timeout: float = 120.0
    firmware_dir: str = "/usr/share/pve-edk2-firmware"
    explicit_firmware_dir: bool = False
    watch_stdin: bool = True


def sections(text: str, source: str) -> tuple[dict[str, str], dict[str, str]]:
    """A config's main section, and what its next cold start runs: main with [PENDING] applied
    (values set, `delete:` keys removed)."""
    cfg = VMConfig.parse(text, source)
    started = NextStart.from_config(cfg).values  # the model counts the description as a key
    started.pop("description", None)  # main's dict does not; QEMU never sees it
    return cfg.main.as_dict(), started


NEXT_START = "next start"  # the label of the config the VM's next cold start runs


def next_start_config(state: HostState) -> dict[str, str]:
    """The config the VM's next cold start runs: main with [PENDING] applied."""
    return sections(state.vm.config_text, f"{state.vm.vmid}.conf")[1]


def planned_config(state: HostState, plan: Plan | None,
                   phase: int | None) -> tuple[dict[str, str], str]:
    """The config to rehearse and its label, always a next start (nextstart.py: [PENDING]
    applied, its deletes honoured): the VM's own (no plan); with a plan and a phase, that
    with the VM-config changes of phases 1..N; with a plan alone, that with every phase's
    changes. Never the plan file's own `config_after` text (a file may say anything)."""
    started = next_start_config(state)
    if plan is None:
        return started, NEXT_START
    if phase is None:
        every = max((p.number for p in plan.phases), default=0)
        return _with_phases(started, plan, every), "the plan's end"
    if plan.phase(phase) is None:
        numbers = ", ".join(str(p.number) for p in plan.phases) or "none"
        raise PvefixError(f"the plan has no phase {phase} (its phases: {numbers})")
    return _with_phases(started, plan, phase), f"phase {phase}"


def _with_phases(started: dict[str, str], plan: Plan, last: int) -> dict[str, str]:
    """`started` with the VM-config changes of phases 1..`last`."""
    out = dict(started)
    for p in plan.phases:
        if p.number > last:
            continue
        for c in p.changes:
            if c.target != "vm-config":
                continue
            if c.after is None:
                out.pop(c.key, None)
            else:
                out[c.key] = c.after
    return out


def bar_functions(state: HostState, config: dict[str, str]) -> dict[str, list[tuple[str, int]]]:
    """hostpciN -> (host function, its largest 64-bit memory BAR) for `config`'s entries, as
    the planner resolves them (a pool mapping: its largest candidate)."""
    return _functions_of(_sized(_context(state, config)))


def _functions_of(sized: dict[str, list[tuple[str, BarShape]]]
                  ) -> dict[str, list[tuple[str, int]]]:
    return {key: [(name, shape.size) for name, shape in pairs] for key, pairs in sized.items()}


def _shapes_of(sized: dict[str, list[tuple[str, BarShape]]]) -> dict[str, BarShape]:
    """Each function by name: whether it has an I/O BAR, and its other 64-bit prefetchable
    BARs (a stand-in copies both: they decide its root port's windows)."""
    return {name: shape for pairs in sized.values() for name, shape in pairs}


def _context(state: HostState, config: dict[str, str]) -> Context:
    """The planner's context of `state` with `config` as the VM's config."""
    text = "".join(f"{k}: {v}\n" for k, v in config.items())
    vm = state.vm.model_copy(update={"config_text": text})
    return build_context(state.model_copy(update={"vm": vm}))


def _sized(ctx: Context) -> dict[str, list[tuple[str, BarShape]]]:
    out: dict[str, list[tuple[str, BarShape]]] = {}
    for p in ctx.passed:
        if p.unknown or p.problem:
            why = p.problem or "its devices are not in the node's PCI facts"
            raise RehearseRefused(f"{p.key}: cannot size its BARs ({why}); read the VM's own "
                                  "node over SSH or --local")
        sizes = []
        for d in p.sized:
            bar64 = sorted((b.size for b in d.bars if b.is_64bit and not b.is_io),
                           reverse=True)
            name = (f"pool {p.entry.mapping}, largest: {d.address}" if p.is_pool
                    else d.address)
            if bar64:
                io = any(b.is_io for b in d.bars)
                sizes.append((name, BarShape(bar64[0], io, tuple(bar64[1:]))))
        out[p.key] = sizes
    return out


def rehearse(target: Node, state: HostState, config: dict[str, str], label: str,
             settings: Settings) -> tuple[Verdict, str]:
    """Rehearse `config` of the VM in `state` on its node; the verdict and the QEMU command.
    A config Proxmox itself would not start is `qemu-refused` with Proxmox's reason."""
    vm = state.vm
    where = f"node {vm.node}"
    node = read_facts(target, where, settings.firmware_dir)
    accel = choose_accel(node, settings.accel, settings.timeout, where)
    ctx = _context(state, config)  # the planner's view of the config rehearsed, built once
    sized = _sized(ctx)
    inputs = Inputs(
        planned=config, functions=_functions_of(sized), node=node, shapes=_shapes_of(sized),
        host=HostCpu(state.node.cpu_vendor, state.node.cpu_phys_bits), accel=accel,
        explicit_firmware_dir=settings.explicit_firmware_dir,
        cpu_models=ctx.cpu_models)
    try:
        job = build_job(inputs)
    except ProxmoxRefuses as exc:
        return Verdict(vmid=vm.vmid, node=vm.node, config=label, outcome="qemu-refused",
                       message=exc.message, accel=accel, qemu=_qemu_name(node), machine="",
                       cpu=config.get("cpu") or "", ram_mb=0, firmware=""), ""
    result = run_job(target, job, node, vmid=vm.vmid, timeout=settings.timeout,
                     watch_stdin=settings.watch_stdin, where=where)
    verdict = _verdict(state, label, node, job, result)
    verdict.not_established = left_out(ctx) + [
        f"64-bit BARs {x}" for x in job.left_out]
    return verdict, command_line(node, job)


def _verdict(state: HostState, label: str, node: NodeFacts, job: Job,
             result: dict[str, object]) -> Verdict:
    outcome, message, bars = judge(result, job)
    rss = result.get("peak_rss_kb")
    boot_s = result.get("boot_s")
    bits = result.get("phys-bits")
    verdict = Verdict(
        vmid=state.vm.vmid, node=state.vm.node, config=label, outcome=outcome,
        message=message, accel=job.accel, qemu=_qemu_name(node), machine=job.machine,
        cpu=job.cpu, ram_mb=job.ram_mb + job.dimm_mb, firmware=job.firmware, bars=bars,
        phys_bits=bits if isinstance(bits, int) else None,
        vendor=str(result["vendor"]) if result.get("vendor") else None,
        boot_s=float(boot_s) if isinstance(boot_s, (int, float)) else None,
        peak_rss_mb=rss >> 10 if isinstance(rss, int) else None, notes=job.notes)
    if result.get("tmp_removed") is False:
        verdict.notes.append("the run's temporary folder on the node could not be removed")
    return verdict


def _qemu_name(node: NodeFacts) -> str:
    """`QEMU emulator version 9.2.0 (pve-qemu-kvm_9.2.0-5)` -> `QEMU 9.2.0 (pve-qemu-kvm_...)`."""
    return node.qemu_version.replace("QEMU emulator version", "QEMU").strip() or (
        node.qemu or "")
