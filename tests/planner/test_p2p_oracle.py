"""Proxmox's own code starts every config the P2P phase leads to, with each clique on the QEMU
command line, addressing a device id that exists, and without kvm=off on -cpu."""

from __future__ import annotations

import itertools
import shlex
from pathlib import Path
from typing import Any

import pytest

from pvefix.hosttree import resolve_scenario
from pvefix.planner import plan
from pvefix.planner.model import PlanOptions
from pvefix.vmconfig import VMConfig
from pvefix.vmconfig.args import ArgsIgnored, clique_map
from pvefix.vmconfig.args import qemu_words as pvefix_qemu_words
from tests.oracle import devices_json_of

from .loader import CASES, build_state, load_case

P2P_CASES = sorted(p for p in CASES.glob("p2p-*.json") if load_case(p).get("options"))


def _effective_text(config_text: str) -> str:
    cfg = VMConfig.parse(config_text)
    values = cfg.main.as_dict()
    if cfg.has_pending:
        values.update(cfg.pending.as_dict())
        for key in cfg.pending.deletes:
            values.pop(key.lstrip("!"), None)
    return "".join(f"{k}: {v}\n" for k, v in sorted(values.items()))


def qemu_words(cmdline: str) -> list[str]:
    return shlex.split(cmdline)


def test_there_are_p2p_cases_that_plan_the_phase() -> None:
    planned = [p for p in P2P_CASES if any(ph["changes"] and ph["changes"][-1] == "p2p.args"
                                           for ph in load_case(p)["expect"]["phases"])]
    assert len(planned) >= 4


@pytest.mark.parametrize("path", P2P_CASES, ids=[p.stem for p in P2P_CASES])
def test_oracle_starts_the_planned_config_with_every_clique(path: Path, oracle: Any) -> None:
    case = load_case(path)
    state = build_state(case)
    result = plan(state, PlanOptions(**case["options"]))
    text = _effective_text(result.config_after)
    args = VMConfig.parse(text).main.get("args")
    try:
        wanted = clique_map(args)
    except ArgsIgnored:  # qemu-server drops that args whole: checked below, and no clique
        wanted = {}
    mapping = resolve_scenario(case["scenario"]) / "etc/pve/mapping/pci.cfg"
    res = oracle.cmd(
        text,
        mapping=mapping.read_text() if mapping.is_file() else None,
        devices=devices_json_of(state.pci_devices),
        cpu_vendor=state.node.cpu_vendor,
        nodename=state.vm.node,
        vmid=state.vm.vmid,
    )
    assert res.ok, f"{path.name}: {res.error}"
    assert not [w for w in res.warnings if "args" in w or "clique" in w], res.warnings
    words = qemu_words(res.cmdline or "")
    if args and not wanted and not pvefix_qemu_words(args):
        assert not set(args.split()) & set(words), f"{path.name}: Proxmox kept a dropped args"
    cpu = words[words.index("-cpu") + 1]
    phase3 = result.phase(3)
    if phase3 is None or not any(c.key == "args" for c in phase3.changes):
        return  # nothing planned for P2P here (a blocker stands): the finding says why
    assert "kvm=off" not in cpu.split(","), f"{path.name}: -cpu {cpu}"
    ids = {p.split("id=", 1)[1].split(",", 1)[0]
           for w, p in itertools.pairwise(words) if w == "-device" and "id=" in p}
    sets = {p for w, p in itertools.pairwise(words) if w == "-set"}
    for device, clique in wanted.items():
        assert f"device.{device}.x-nv-gpudirect-clique={clique}" in sets, (path.name, device)
        assert device in ids, f"{path.name}: -set names {device}, QEMU has ids {sorted(ids)}"
