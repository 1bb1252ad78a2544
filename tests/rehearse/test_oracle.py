"""The rehearsal's command for every VM of every built-in scenario and every phase of its
plan, against Proxmox's own config_to_command (the oracle's `cmd`) of the planned config: the
config pvefix rehearses is the config the phase leads to, and its placement-deciding parts
(machine type, `-cpu`, `-m`, the OVMF code file, fw_cfg, each passed device's bus) are
Proxmox's (conformance: `make conformance`)."""

from __future__ import annotations

from typing import Any

import pytest

from pvefix.hosttree import resolve_scenario
from pvefix.planner import plan as make_plan
from pvefix.planner.context import build_context
from pvefix.rehearse.build import HostCpu, Inputs, NodeFacts, build_job
from pvefix.rehearse.flow import planned_config
from pvefix.sources.bundle import read_bundle
from pvefix.vmconfig.nextstart import NextStart
from tests.conformance.harness import ask, configs_after_phases, inputs_of, scenario_vms
from tests.conformance.test_rehearse_command import FILES, HOST_BITS, compare, opts_of

pytestmark = pytest.mark.conformance


@pytest.mark.parametrize(("scenario", "vmid"), scenario_vms(generated_sample=6))
def test_the_rehearsed_config_and_its_command_parts_are_proxmoxs(
        oracle: Any, scenario: str, vmid: int) -> None:
    tree = resolve_scenario(scenario)
    state = read_bundle(tree, vmid)
    plan = make_plan(state)
    inputs = inputs_of(state, tree)
    node = NodeFacts(qemu="/usr/bin/kvm",
                     qemu_version=f"QEMU emulator version {inputs.qemu_version} (pve-qemu-kvm)",
                     firmware_dir="/usr/share/pve-edk2-firmware", firmware_files=FILES)
    models = build_context(state).cpu_models
    compared = 0
    for number, text in configs_after_phases(state, plan):
        config, _ = planned_config(state, plan, number)
        expected = NextStart.from_text(text).values
        expected.pop("description", None)  # QEMU never sees it
        assert config == expected, (scenario, vmid, number)
        res = ask(oracle, text, inputs, vmid)
        if not res.ok or not res.cmdline:
            continue  # a config Proxmox refuses: the planned-configs conformance test says why
        functions = {k: [(k, 1 << 30)] for k in config if k.startswith("hostpci")}
        job = build_job(Inputs(planned=config, functions=functions, node=node,
                               host=HostCpu(inputs.cpu_vendor, HOST_BITS), accel="kvm",
                               cpu_models=models))
        compare(job, opts_of(res.cmdline), config)
        compared += 1
    if (scenario, vmid) == ("kpro6", 100):
        assert compared, "the story VM's phase 1 was not compared"
