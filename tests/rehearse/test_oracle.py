"""The parts of the rehearsal's command that the plan's keys decide, against Proxmox's own
config_to_command (the oracle's `cmd`) of the planned config: for every VM of every built-in
scenario and every phase of its plan, the config pvefix rehearses is the config the phase
leads to, and its machine type, `-cpu` (as a set of properties) and the bus of each passed
device are Proxmox's (conformance: `make conformance`)."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from pvefix.hosttree import resolve_scenario
from pvefix.planner import plan as make_plan
from pvefix.rehearse.build import cpu_from_config, machine_type, stand_ins, x_vga
from pvefix.rehearse.flow import planned_config, sections
from pvefix.sources.bundle import read_bundle
from pvefix.vmconfig import VMConfig
from tests.conformance.harness import ask, configs_after_phases, inputs_of, scenario_vms

pytestmark = pytest.mark.conformance


def _words(cmdline: str) -> dict[str, list[str]]:
    words = shlex.split(cmdline)
    out: dict[str, list[str]] = {}
    for i, w in enumerate(words[:-1]):
        if w.startswith("-"):
            out.setdefault(w, []).append(words[i + 1])
    return out


def _type(words: dict[str, list[str]]) -> str:
    machine = words["-machine"][0]
    return next(p.split("=", 1)[1] for p in machine.split(",") if p.startswith("type="))


def _buses(words: dict[str, list[str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in words.get("-device", []):
        if value.startswith("vfio-pci,"):
            props = dict(p.split("=", 1) for p in value.split(",")[1:] if "=" in p)
            out[props["id"]] = props["bus"]
    return out


@pytest.mark.parametrize(("scenario", "vmid"), scenario_vms(generated_sample=6))
def test_the_rehearsed_config_and_its_command_parts_are_proxmoxs(
        oracle: Any, scenario: str, vmid: int) -> None:
    tree = resolve_scenario(scenario)
    state = read_bundle(tree, vmid)
    plan = make_plan(state)
    inputs = inputs_of(state, tree)
    main = sections(state.vm.config_text, "t")[0]
    today_text = "".join(f"{k}: {v}\n" for k, v in main.items())
    today = ask(oracle, today_text, inputs, vmid)
    compared = 0
    for number, text in configs_after_phases(state, plan):
        config, _ = planned_config(state, plan, number)
        assert config == VMConfig.parse(text).main.as_dict(), (scenario, vmid, number)
        res = ask(oracle, text, inputs, vmid)
        if not res.ok or not today.ok or not res.cmdline or not today.cmdline:
            continue  # a config Proxmox refuses: the planned-configs conformance test says why
        words, before = _words(res.cmdline), _words(today.cmdline)
        kind = machine_type(_type(before), main.get("machine"), config.get("machine"),
                            frozenset())[0]
        assert kind == _type(words), (scenario, vmid, number)
        ours = set(cpu_from_config(config.get("cpu"), x_vga(config)).split(","))
        theirs = {p for p in words["-cpu"][0].split(",") if not p.startswith("hv_")}
        assert ours == theirs, (scenario, vmid, number)
        functions = {k: [(k, 1 << 30)] for k in config if k.startswith("hostpci")}
        devices = {d.id: d.bus for d in stand_ins(config, functions, "q35" in kind)}
        proxmox = _buses(words)
        for key, bus in devices.items():
            theirs = proxmox.get(key) or proxmox.get(f"{key}.0")
            assert theirs is not None and (bus == theirs or (
                bus.startswith("pci.") and theirs.startswith("pci."))), (scenario, vmid, key)
        compared += 1
    if (scenario, vmid) == ("kpro6", 100):
        assert compared, "the story VM's phase 1 was not compared"
