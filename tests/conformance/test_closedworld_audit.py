"""The facts the closed-world audit's classifications rest on, asked of Proxmox's own code
(../shared/pve-oracle, qemu-server's config_to_command), against what pvefix models:
- efidisk0's efitype picks the OVMF image (pvefix.planner.mmio ovmf_build);
- the VM's modern virtio functions are the devices pvefix counts in the window and the
  rehearsal boots (mmio.virtio_functions): the same models, ids, buses and slots as on
  Proxmox's command line, and on i440fx the same pci-bridges (mmio.i440fx_bridges);
- hugepages without numa, and numaN nodes whose memory does not add up, are refused (unmodelled
  for the start claim, pvefix.closedworld.config_keys);
- an explicit cpu hidden= decides kvm=off over x-vga=1 (planner/rules/topology.kvm_hidden_by);
- viommu= adds a vIOMMU device (unmodelled for p2p)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pvefix.planner import mmio
from pvefix.planner.context import build_context
from pvefix.planner.rules.config_health import memory_refusal
from pvefix.planner.rules.topology import kvm_hidden_by
from pvefix.state import HostState
from tests.planner.loader import CASES, build_state, load_case

pytestmark = pytest.mark.conformance

BASE = ("cores: 4\nmemory: 65536\nmachine: q35\nbios: ovmf\nostype: l26\n"
        "hostpci0: 0000:01:00.0,pcie=1\n")


def _cmd(oracle: Any, text: str) -> tuple[bool, str, str]:
    got = oracle.cmd(text)
    return got.ok, got.error or "", got.cmdline or ""


@pytest.mark.parametrize(("efidisk", "image", "ovmf_build_is_package"), [
    ("", "OVMF_CODE.fd", False),
    ("efidisk0: local:100/vm-100-disk-0.qcow2,size=128K\n", "OVMF_CODE.fd", False),
    ("efidisk0: local:100/vm-100-disk-0.qcow2,efitype=2m,size=128K\n", "OVMF_CODE.fd", False),
    ("efidisk0: local:100/vm-100-disk-0.qcow2,efitype=4m,size=528K\n", "OVMF_CODE_4M", True),
])
def test_efitype_picks_the_image_pvefix_assumes(oracle: Any, efidisk: str, image: str,
                                               ovmf_build_is_package: bool) -> None:
    ok, error, line = _cmd(oracle, BASE + efidisk)
    assert ok, error
    assert f"/{image}" in line
    value = efidisk.partition(": ")[2].strip() or None
    assert (mmio.ovmf_build("4.2025.02-4", value) == "4.2025.02-4") == ovmf_build_is_package


@pytest.mark.parametrize("machine", ["q35", "pc", "pc-i440fx-8.0", "pc-i440fx-2.2"])
@pytest.mark.parametrize("extra", [
    {}, {"balloon": "0"}, {"net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0"},
    {"net0": "e1000=BC:24:11:00:00:01,bridge=vmbr0"}, {"agent": "1"},
    {"agent": "enabled=1,type=isa"}, {"agent": "0"},
    {"scsihw": "virtio-scsi-single", "scsi0": "local:100/vm-100-disk-1.raw,size=8G",
     "scsi3": "local:100/vm-100-disk-2.raw,size=8G"},
    {"scsihw": "virtio-scsi-pci", "scsi0": "local:100/vm-100-disk-1.raw,size=8G",
     "scsi9": "local:100/vm-100-disk-2.raw,size=8G"},
    {"scsihw": "lsi", "scsi0": "local:100/vm-100-disk-1.raw,size=8G"},
    {"virtio0": "local:100/vm-100-disk-1.raw,size=8G",
     "virtio7": "local:100/vm-100-disk-2.raw,size=8G"},
    {"rng0": "source=/dev/urandom"}, {"net7": "virtio=BC:24:11:00:00:07,bridge=vmbr0"},
    {"vga": "qxl"}, {"vga": "virtio"}, {"vga": "type=virtio,memory=64"}, {"vga": "std"},
    {"vga": "std,clipboard=vnc"},
])
def test_the_virtio_functions_pvefix_models_are_the_ones_proxmox_adds(
        oracle: Any, machine: str, extra: dict[str, str]) -> None:
    q35 = machine == "q35"
    base = BASE if q35 else BASE.replace("machine: q35", f"machine: {machine}").replace(
        ",pcie=1", "")
    text = base + "".join(f"{k}: {v}\n" for k, v in extra.items())
    ok, error, line = _cmd(oracle, text)
    assert ok, error
    values = dict(ln.split(": ", 1) for ln in text.splitlines())
    theirs, bridges = set(), set()
    for model, props in re.findall(r"-device '?([a-z0-9-]+),([^' ]*)", line):
        kv = dict(p.split("=", 1) for p in props.split(",") if "=" in p)
        if model == "pci-bridge":
            bridges.add((kv["id"], int(kv["addr"], 16)))
        elif model.startswith(("virtio", "vhost")) and model != "virtio-iommu-pci":
            theirs.add((model.replace("-gl", ""), kv.get("bus"),
                        int(kv["addr"], 16) if "addr" in kv else None, kv.get("id")))
    version = machine.removeprefix("pc-i440fx-") if machine.startswith("pc-") else None
    ours = mmio.virtio_functions(values, q35, version)
    assert {t[:3] for t in theirs} == {(f.model, f.bus, f.slot) for f in ours}
    assert {t[3] for t in theirs if t[3]} <= {f.id for f in ours}  # rng0 has none there
    assert bridges == (set() if q35 else set(mmio.i440fx_bridges(version, values)))


@pytest.mark.parametrize(("extra", "refused"), [
    ("hugepages: 1024\n", "numa needs to be enabled to use hugepages"),
    ("numa: 1\nnuma0: cpus=0-3,memory=32768\n",
     "total memory for NUMA nodes must be equal to vm static memory"),
    ("numa: 1\nnuma0: cpus=0-3,memory=32768\nnuma1: cpus=4-7,memory=32768\n", None),
    ("numa: 1\nnuma0: cpus=0-3\n", "missing NUMA node0 memory value"),
    ("numa: 1\nnuma0: memory=65536\n", None),  # parse_numa gives an empty cpus list
    ("numa: 1\nnuma0: cpus=0-3,memory=65536,hostnodes=0\n",
     "you need to define a policy for hostnode 0"),
    ("numa: 1\nhugepages: 2\nnuma0: cpus=0-3,memory=65536\n",
     "numa hostnodes need to be defined to use hugepages"),
    ("numa: 0\nnuma0: cpus=0-3,memory=32768\n", None),
])
def test_memory_layouts_proxmox_refuses(oracle: Any, extra: str, refused: str | None) -> None:
    """Proxmox's answer, and pvefix's reading of the same config (config_health
    memory_refusal), are the same refusal or none."""
    text = BASE + extra
    ok, error, _ = _cmd(oracle, text)
    assert ok == (refused is None) and (refused is None or refused in error), error
    values = dict(ln.split(": ", 1) for ln in text.splitlines())
    assert memory_refusal(values) == refused


def _state(cpu: str) -> HostState:
    case = load_case(CASES / "p2p-xvga-compute-split.json")
    state = build_state(case)
    text = re.sub(r"^cpu: .*$", f"cpu: {cpu}", state.vm.config_text, flags=re.M)
    return state.model_copy(update={"vm": state.vm.model_copy(update={"config_text": text})})


@pytest.mark.parametrize("cpu", ["host", "host,hidden=0", "host,hidden=1"])
def test_kvm_off_with_x_vga_is_what_proxmox_builds(oracle: Any, cpu: str) -> None:
    text = BASE + f"cpu: {cpu}\nhostpci1: 0000:02:00.0,pcie=1,x-vga=1\n"
    ok, error, line = _cmd(oracle, text)
    assert ok, error
    proxmox_hides = "kvm=off" in re.search(r"-cpu (\S+)", line).group(1)  # type: ignore[union-attr]
    assert bool(kvm_hidden_by(build_context(_state(cpu)))) == proxmox_hides


@pytest.mark.parametrize(("viommu", "device"), [("intel", "intel-iommu"),
                                                ("virtio", "virtio-iommu-pci")])
def test_viommu_adds_a_guest_iommu(oracle: Any, viommu: str, device: str) -> None:
    ok, error, line = _cmd(oracle, BASE.replace("machine: q35", f"machine: q35,viommu={viommu}"))
    assert ok, error
    assert device in line
