"""PCI hardware, mappings and snapshots."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.simkit import wait_task


def test_pci_list_hides_bridges_by_default(kpro6_token: Any, node: str) -> None:
    devices = kpro6_token.nodes(node).hardware.pci.get()
    gpus = [d for d in devices if d["vendor"] == "0x10de"]
    assert len(gpus) == 8
    assert not [d for d in devices if d["class"].startswith("0x06")]
    assert {d["iommugroup"] for d in gpus} == {42, 61, 28, 10, 101, 117, 90, 72}
    assert gpus[0]["subsystem_vendor"] == "0x10de"


def test_an_empty_class_blacklist_shows_the_root_ports(kpro6_token: Any, node: str) -> None:
    devices = kpro6_token.nodes(node).hardware.pci.get(**{"pci-class-blacklist": ""})
    assert [d for d in devices if d["class"].startswith("0x0604")]


def test_the_pci_mapping_lists_its_eight_gpus(kpro6_token: Any) -> None:
    (mapping,) = kpro6_token.cluster.mapping.pci.get()
    assert mapping["id"] == "pro6000"
    assert len(mapping["map"]) == 8
    assert "iommugroup=42" in mapping["map"][0]


def test_vm_list_shows_run_states(kpro6_token: Any, node: str) -> None:
    vms = {vm["vmid"]: vm for vm in kpro6_token.nodes(node).qemu.get()}
    assert vms[100]["status"] == "running"
    assert vms[101]["status"] == "stopped"


def test_a_disk_only_snapshot_is_taken_and_listed(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    vm = token.nodes(info.node).qemu(100)
    upid = vm.snapshot.post(snapname="before_fix", description="pvefix rollback point")
    assert wait_task(token, upid)["exitstatus"] == "OK"
    names = [s["name"] for s in vm.snapshot.get()]
    assert names == ["before_fix", "current"]
    assert vm.config.get()["parent"] == "before_fix"
    snap = vm.config.get(snapshot="before_fix")
    assert snap["hostpci0"] == "mapping=pro6000"


def test_a_snapshot_with_ram_of_a_passthrough_vm_is_refused(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    vm = token.nodes(info.node).qemu(100)
    status = wait_task(token, vm.snapshot.post(snapname="withram", vmstate=1))
    assert status["exitstatus"] == (
        "unable to save VM state and RAM - 0000:01:00.0: VFIO device doesn't support migration"
    )
    assert [s["name"] for s in vm.snapshot.get()] == ["current"]


def test_rollback_restores_the_snapshot_config(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    vm = token.nodes(info.node).qemu(101)
    wait_task(token, vm.snapshot.post(snapname="clean"))
    vm.config.put(cores=12)
    assert wait_task(token, vm.snapshot("clean").rollback.post())["exitstatus"] == "OK"
    assert vm.config.get()["cores"] == 4
    assert [s["name"] for s in vm.snapshot.get()] == ["clean", "current"]
