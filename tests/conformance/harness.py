"""What Proxmox's own code says of the VM configs a plan leads to (tests/oracle.py underneath).

`configs_after_phases(state, plan)` gives the VM config after each phase prefix of the plan, with
[PENDING] merged (what the next cold start runs); `judge(...)` asks the oracle whether Proxmox
would start it and checks that every `WARN:` line it prints is a risk the plan itself states.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pvefix.planner.model import Plan
from pvefix.sim.vmview import apply_pending
from pvefix.state import HostState
from pvefix.vmconfig import VMConfig
from pvefix.vmconfig.nextstart import stage
from tests.oracle import Oracle, OracleResult, devices_json_of

# A WARN: line Proxmox prints, and the words that show the plan reports that same risk.
WARN_TOPICS: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (re.compile(r"OVMF firmware might limit CPU 'phys-bits' to 40"), ("pdpe1gb",)),
]
# Lines that say nothing about the VM config pvefix plans (the oracle runs without storage).
IRRELEVANT = [re.compile(r"^WARN: no efidisk configured!")]


def scenario_vms(generated_sample: int) -> list[tuple[str, int]]:
    """(scenario, vmid) for every VM of the local node of every built-in scenario (a glob: new
    scenarios are included). A generated cluster (`large`: 1,000 VMs) is sampled: its local VMs
    that pass devices, spread evenly, `generated_sample` of them, plus one plain VM."""
    from pvefix.hosttree import resolve_scenario
    from pvefix.hosttree.scenarios import list_scenarios
    from pvefix.hosttree.tree import load_tree

    out: list[tuple[str, int]] = []
    for info in list_scenarios():
        tree = load_tree(resolve_scenario(info.name))
        local = [v for v, node in tree.vms().items() if node == tree.meta.node]
        if info.generated:
            gpu = [v for v in local if "hostpci" in tree.read_vm_config(v)]
            plain = [v for v in local if v not in gpu]
            step = max(1, len(gpu) // max(1, generated_sample))
            local = gpu[::step][:generated_sample] + plain[:1]
        out += [(info.name, vmid) for vmid in local]
    return out


@dataclass(frozen=True)
class Inputs:
    mapping: str | None
    devices: dict[str, Any]
    cpu_vendor: str | None
    qemu_version: str | None
    nodename: str


def inputs_of(state: HostState, tree: Path | None) -> Inputs:
    mapping = None
    if tree is not None:
        cfg = tree / "etc/pve/mapping/pci.cfg"
        if cfg.is_file():
            mapping = cfg.read_text(encoding="utf-8")
    if mapping is None and state.mappings:
        mapping = render_mappings(state)
    qemu = state.node.qemu_version
    if qemu:
        m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", qemu)
        qemu = f"{m.group(1)}.{m.group(2)}.{m.group(3) or 0}" if m else None
    return Inputs(
        mapping=mapping,
        devices=devices_json_of(state.pci_devices),
        cpu_vendor=state.node.cpu_vendor,
        qemu_version=qemu,
        nodename=state.vm.node,
    )


def render_mappings(state: HostState) -> str:
    lines: list[str] = []
    for m in state.mappings:
        lines.append(m.id)
        for entry in m.maps:
            lines.append(f"\tmap {entry.raw}")
    return "\n".join(lines) + "\n"


def merged(text: str) -> str:
    """The config as the next cold start runs it: [PENDING] applied to the main section."""
    cfg = VMConfig.parse(text)
    apply_pending(cfg)
    return cfg.render()


def configs_after_phases(state: HostState, plan: Plan) -> list[tuple[int, str]]:
    """(phase number, config after phases up to it, pending merged) for each phase with
    vm-config changes."""
    out: list[tuple[int, str]] = []
    cfg = VMConfig.parse(state.vm.config_text)
    for phase in sorted(plan.phases, key=lambda p: p.number):
        vm_changes = [c for c in phase.changes if c.target == "vm-config"]
        for c in vm_changes:
            if state.vm.status == "running":  # staged as Proxmox's update does it
                stage(cfg, c.key, c.after)
            elif c.after is None:
                cfg.main.delete(c.key)
            else:
                cfg.main.set(c.key, c.after)
        if vm_changes:
            out.append((phase.number, merged(cfg.render())))
    return out


def plan_texts(plan: Plan) -> str:
    parts: list[str] = []
    for phase in plan.phases:
        for c in phase.changes:
            parts += [c.reason, c.risk.text, c.risk.mitigation or "", c.effect or ""]
    for f in plan.findings:
        parts += [f.title, f.detail]
    return "\n".join(parts)


def unexplained_warnings(result: OracleResult, plan: Plan, upto: int | None = None) -> list[str]:
    """WARN: lines the plan does not state as a risk. A warning about the cpu line is never
    acceptable once the plan itself has rewritten that line (phases up to `upto`): pvefix's own
    change must not be the thing Proxmox warns about."""
    said = plan_texts(plan)
    cpu_changed = any(
        c.target == "vm-config" and c.key == "cpu"
        for ph in plan.phases
        if upto is None or ph.number <= upto
        for c in ph.changes
    )
    bad: list[str] = []
    for w in result.warnings:
        if any(p.search(w) for p in IRRELEVANT):
            continue
        topic = next((words for pat, words in WARN_TOPICS if pat.search(w)), None)
        if topic is None or not all(word in said for word in topic):
            bad.append(w)
        elif cpu_changed and "phys-bits" in w:
            bad.append(f"{w} (on the cpu line pvefix planned)")
    return bad


def refusal_explained(error: str | None, plan: Plan) -> bool:
    """Does an error finding of the plan carry Proxmox's own refusal message? (A VM pvefix
    cannot fix must say why, in Proxmox's words, not only that something is wrong.)"""
    message = re.sub(r" at /\S+ line \d+\.?$", "", (error or "").strip())
    return bool(message) and any(
        message in f.detail or message in f.title for f in plan.findings if f.severity == "error"
    )


def ask(oracle: Oracle, text: str, inputs: Inputs, vmid: int) -> OracleResult:
    return oracle.cmd(
        text,
        mapping=inputs.mapping,
        devices=inputs.devices or None,
        cpu_vendor=inputs.cpu_vendor,
        qemu_version=inputs.qemu_version,
        vmid=vmid,
        nodename=inputs.nodename,
    )
