"""Configs nobody wrote by hand: hypothesis builds VM configs on real scenario hosts (machine,
firmware, CPU model, RAM, OS type, devices by mapping, by raw address and as whole multi-function
slots, `x-vga`, `args`, running or stopped), pvefix plans them (with and without --p2p), and
Proxmox's own code judges every config a phase leads to.

The property: a config pvefix leads to starts (qemu-server's config_to_command builds it), and
every WARN: line Proxmox prints is a risk the plan states; where a config after a phase does not
start, an error finding of the plan carries Proxmox's own message (a VM pvefix cannot fix says
why). Found this way and fixed: the same device passed twice (a mapping's pick and an address),
and Proxmox's OVMF 40-bit warning on a cpu line pvefix left as it was.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pvefix.hosttree import resolve_scenario
from pvefix.planner import plan as make_plan
from pvefix.planner.model import PlanOptions
from pvefix.sources.bundle import read_bundle
from pvefix.state import HostState
from pvefix.vmconfig import VMConfig
from tests.conformance.harness import (
    ask,
    configs_after_phases,
    inputs_of,
    refusal_explained,
    unexplained_warnings,
)

pytestmark = pytest.mark.conformance

# (scenario, a VM of its local node, device forms that scenario's host has)
HOSTS: dict[str, tuple[int, list[str]]] = {
    "kpro6": (100, ["mapping=pro6000", "0000:01:00.0", "0000:21:00.0", "0000:41:00", "61:00.0"]),
    "sapphire-2s": (501, ["0000:16:00", "0000:16:00.0", "0000:38:00.0", "0000:98:00.0",
                          "0000:b8:00.0"]),
    "intel-grub": (0, []),  # filled from the tree below
}

MACHINES = [None, "q35", "pc", "pc-q35-9.2", "pc-i440fx-9.2", "q35,viommu=virtio"]
CPUS = [None, "host", "x86-64-v2-AES", "kvm64", "host,hidden=1", "x86-64-v3,phys-bits=host",
        "x86-64-v2-AES,flags=+pdpe1gb", "qemu64"]
MEMORY = ["4096", "65536", "262144", "1572864"]
OSTYPES = [None, "l26", "win11", "other"]
OPTIONS = ["", ",pcie=1", ",x-vga=1", ",rombar=0", ",pcie=1,x-vga=1"]


def _base(scenario: str) -> tuple[HostState, int]:
    tree = resolve_scenario(scenario)
    from pvefix.hosttree.tree import load_tree

    local = [v for v, node in load_tree(tree).vms().items() if node == load_tree(tree).meta.node]
    vmid = HOSTS[scenario][0] or local[0]
    return read_bundle(tree, vmid), vmid


@st.composite
def vm_config(draw: st.DrawFn, forms: list[str]) -> tuple[str, bool]:
    lines = ["boot: order=scsi0", "cores: 8", "scsi0: local-zfs:vm-1-disk-1,size=32G",
             "net0: virtio=BC:24:11:00:00:01,bridge=vmbr0"]
    for key, choices in (("machine", MACHINES), ("cpu", CPUS), ("ostype", OSTYPES)):
        value = draw(st.sampled_from(choices))
        if value is not None:
            lines.append(f"{key}: {value}")
    lines.append(f"memory: {draw(st.sampled_from(MEMORY))}")
    if draw(st.booleans()):
        lines.append("bios: ovmf")
        if draw(st.booleans()):
            lines.append("efidisk0: local-zfs:vm-1-disk-0,efitype=4m,size=1M")
    if draw(st.booleans()):
        lines.append("args: -set device.net0.rombar=0")
    if forms:
        chosen = draw(st.lists(st.sampled_from(forms), min_size=1, max_size=4, unique=True))
        for i, form in enumerate(chosen):
            lines.append(f"hostpci{i}: {form}{draw(st.sampled_from(OPTIONS))}")
    return "\n".join(sorted(lines)) + "\n", draw(st.booleans())


def _with_config(state: HostState, text: str, running: bool) -> HostState:
    cfg = VMConfig.parse(text)
    machine = "pc-q35-9.2+pve0" if "machine: q35" in text else "pc-i440fx-9.2+pve0"
    vm = state.vm.model_copy(update={
        "config_text": text, "digest": cfg.digest, "pending": [],
        "status": "running" if running else "stopped",
        "running_machine": machine if running else None, "lock": None, "ha_state": None,
    })
    return state.model_copy(update={"vm": vm})


def _judge(oracle: Any, scenario: str, text: str, running: bool, p2p: bool) -> None:
    base, _ = _base(scenario)
    state = _with_config(base, text, running)
    plan = make_plan(state, PlanOptions(p2p=p2p))
    inputs = inputs_of(state, resolve_scenario(scenario))
    for number, after in configs_after_phases(state, plan):
        res = ask(oracle, after, inputs, state.vm.vmid)
        where = f"{scenario}, generated config{' (running)' if running else ''}, p2p={p2p}, " \
                f"after phase {number}"
        if not res.ok:
            assert refusal_explained(res.error, plan), (
                f"{where}: Proxmox refuses ({res.error}) and no error finding of the plan says"
                f" so\nbefore:\n{text}\nafter:\n{after}")
            continue
        bad = unexplained_warnings(res, plan, number)
        assert not bad, f"{where}: Proxmox warns and the plan does not say so: {bad}\n{after}"


def _forms(scenario: str) -> list[str]:
    forms = HOSTS[scenario][1]
    if forms:
        return forms
    base, _ = _base(scenario)
    return [d.address for d in base.pci_devices if d.vendor == "0x10de"][:4]


@pytest.mark.parametrize("scenario", sorted(HOSTS))
def test_generated_configs_lead_only_to_configs_proxmox_starts(oracle: Any, scenario: str) -> None:
    forms = _forms(scenario)

    @settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
    @given(vm_config(forms), st.booleans())
    def check(generated: tuple[str, bool], p2p: bool) -> None:
        text, running = generated
        _judge(oracle, scenario, text, running, p2p)

    check()
