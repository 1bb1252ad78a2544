"""The facts the MMIO verdict takes, read on every path: the OVMF build (pve-edk2-firmware),
the QEMU whose SeaBIOS starts the VM (pve-qemu-kvm) and cpu-models.conf, from a host tree of
this test's own (kpro6 plus those facts), live over the simulator's API and SSH and from the
bundle, equal; and the plan on it judges the custom model by its definition."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pvefix.facts.parse import package_versions
from pvefix.hosttree import resolve_scenario
from pvefix.paths import CPU_MODELS
from pvefix.planner.plan import PlanOptions, plan
from pvefix.sources.bundle import read_bundle
from pvefix.sources.live import read_live
from pvefix.target.result import CommandResult
from tests.sources.test_live import assert_same_for_planner, connection

if TYPE_CHECKING:
    from pvefix.sim.serve import ReadyInfo

MODELS = "cpu-model: gpu46\n    flags +pdpe1gb\n    phys-bits host\n    reported-model kvm64\n"


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "kpro6-gpu46"
    shutil.copytree(resolve_scenario("kpro6"), tree)
    meta_file = tree / "pvefix-host.json"
    meta = json.loads(meta_file.read_text())
    meta["versions"]["edk2"] = "4.2025.02-4"
    meta_file.write_text(json.dumps(meta, indent=2) + "\n")
    models = tree / CPU_MODELS.lstrip("/")
    models.parent.mkdir(parents=True, exist_ok=True)
    models.write_text(MODELS)
    conf = tree / "etc/pve/qemu-server/100.conf"
    text = conf.read_text()
    cpu_line = next(line for line in text.splitlines() if line.startswith("cpu:"))
    conf.write_text(text.replace(cpu_line, "cpu: custom-gpu46"))
    return tree


def test_live_and_bundle_read_the_firmware_facts_alike(
        fresh_sim: Callable[..., ReadyInfo], tmp_path: Path) -> None:
    info = fresh_sim(str(_tree(tmp_path)))
    live = read_live(connection(info, tmp_path), 100)
    bundle = read_bundle(info.root, 100)
    assert_same_for_planner(live, bundle)
    assert live.node.edk2_version == "4.2025.02-4"
    assert live.file(CPU_MODELS).text == MODELS
    changes = [c for p in plan(live, PlanOptions()).phases for c in p.changes
               if c.rule == "bar-space"]
    assert changes and "vm.cpu.phys-bits" not in [c.id for c in changes]  # pci=realloc only
    evidence = " ".join(changes[0].evidence)
    assert "custom model gpu46" in evidence and "OVMF 4.2025.02-4" in evidence


def test_dpkg_query_lines_become_versions() -> None:
    out = ("pve-edk2-firmware-ovmf 4.2025.02-4\npve-qemu-kvm 10.1.2-1\n"
           "pve-edk2-firmware \n")
    got = package_versions(CommandResult(argv=("dpkg-query",), exit_code=1, stdout=out, stderr=""))
    assert got == {"pve-edk2-firmware-ovmf": "4.2025.02-4", "pve-qemu-kvm": "10.1.2-1"}
    assert package_versions(None) == {}
