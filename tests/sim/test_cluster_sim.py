"""The simulator serves a real cluster: each node its own SSH endpoint and hostname, its own
host files (nodes/NAME/ overlays, made lazily), facts and boot loader; PCI devices reserved
across running VMs; WARNINGS: N task endings; qemu?full=1 with running-machine."""

from __future__ import annotations

import time
from pathlib import Path

import paramiko
import pytest

from pvefix.sim.serve import ReadyInfo, running_simulator
from tests.simkit import api, run, wait_task


def _ssh(info: ReadyInfo, node: str) -> paramiko.SSHClient:
    host, port = info.ssh_nodes[node].rsplit(":", 1)
    client = paramiko.SSHClient()
    client.load_host_keys(info.known_hosts)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(host, port=int(port), username="root", key_filename=info.ssh_key,
                   look_for_keys=False, allow_agent=False, timeout=10)
    return client


def test_each_node_answers_its_own_ssh_with_its_own_hostname_and_files(tmp_path: Path) -> None:
    with running_simulator("cluster3", tmp_path / "c3", task_seconds=0.01) as info:
        seen = {}
        for node in ("atlas", "borealis", "cygnus"):
            client = _ssh(info, node)
            try:
                seen[node] = (run(client, "hostname")[1].strip(),
                              run(client, "cat /proc/cmdline")[1],
                              run(client, "proxmox-boot-tool status")[0])
            finally:
                client.close()
        assert {node: s[0] for node, s in seen.items()} == {
            "atlas": "atlas", "borealis": "borealis", "cygnus": "cygnus"}
        assert "iommu=pt" in seen["atlas"][1] and "iommu=pt" not in seen["cygnus"][1]
        assert seen["borealis"][1].startswith("BOOT_IMAGE=") and seen["borealis"][2] == 2
        prox = api(info)
        status = prox.cluster.status.get()
        assert status[0] == {"type": "cluster", "id": "cluster", "name": "lab3", "nodes": 3,
                             "quorate": 1, "version": 1}
        assert {s["name"]: s["ip"] for s in status[1:]} == {
            "atlas": "127.0.0.1", "borealis": "127.0.0.1", "cygnus": "127.0.0.1"}
        pci = prox.nodes("cygnus").hardware.pci.get(**{"pci-class-blacklist": ""})
        assert {p["id"] for p in pci} >= {"0000:41:00.0", "0000:c1:00.0"}
        assert "0000:01:00.0" not in {p["id"] for p in pci}  # atlas's L4 is not cygnus's


def test_a_gpu_held_by_a_running_vm_refuses_a_start_as_proxmox_does(tmp_path: Path) -> None:
    with running_simulator("cluster3", tmp_path / "c3", task_seconds=0.01) as info:
        prox = api(info)
        status = wait_task(prox, prox.nodes("cygnus").qemu(313).status.start.post())
        assert status["exitstatus"] == "PCI device '0000:41:00.0' already in use by VMID '310'"
        wait_task(prox, prox.nodes("cygnus").qemu(310).status.shutdown.post())
        status = wait_task(prox, prox.nodes("cygnus").qemu(313).status.start.post())
        assert status["exitstatus"] == "OK"


def test_an_ovmf_start_without_efidisk_ends_with_warnings(tmp_path: Path) -> None:
    with running_simulator("cluster3", tmp_path / "c3", task_seconds=0.01) as info:
        prox = api(info, "ticket")
        vm = prox.nodes("atlas").qemu(300)
        vm.config.put(bios="ovmf")
        upid = vm.status.start.post()
        status = wait_task(prox, upid)
        assert status["exitstatus"] == "WARNINGS: 1"
        log = [row["t"] for row in prox.nodes("atlas").tasks(upid).log.get()]
        assert log[-2:] == ["WARN: no efidisk configured! Using temporary efivars disk.",
                            "TASK WARNINGS: 1"]
        assert vm.status.current.get()["status"] == "running"


def test_qemu_full_lists_running_machine_and_resources_the_ha_state(tmp_path: Path) -> None:
    with running_simulator("cluster3", tmp_path / "c3", task_seconds=0.01) as info:
        prox = api(info)
        full = {v["vmid"]: v for v in prox.nodes("cygnus").qemu.get(full=1)}
        plain = {v["vmid"]: v for v in prox.nodes("cygnus").qemu.get()}
        assert full[310]["running-machine"] == "pc-i440fx-10.1+pve0"
        assert "running-machine" not in plain[310] and "running-machine" not in full[313]
        assert full[311]["lock"] == "backup"
        resources = {r["vmid"]: r for r in prox.cluster.resources.get(type="vm")}
        assert resources[312]["hastate"] == "started" and "hastate" not in resources[310]


def test_a_rebooting_node_is_unreachable_through_the_api_while_the_others_answer(
    tmp_path: Path
) -> None:
    with running_simulator("cluster3", tmp_path / "c3", task_seconds=0.01) as info:
        client = _ssh(info, "cygnus")
        run(client, "reboot")
        client.close()
        prox = api(info)
        with pytest.raises(Exception, match="595"):
            prox.nodes("cygnus").status.get()
        assert prox.nodes("borealis").status.get()["cpuinfo"]["model"].startswith("Intel")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                prox.nodes("cygnus").status.get()
                break
            except Exception:
                time.sleep(0.1)
        # VM 312 is HA-managed (requested state started): not startall's but the HA stack's,
        # which starts it a moment after the node is back.
        vm = prox.nodes("cygnus").qemu(312).status.current
        while vm.get()["status"] != "running" and time.monotonic() < deadline + 10:
            time.sleep(0.1)
        assert vm.get()["status"] == "running"
        assert vm.get()["ha"]["state"] == "started"


def test_large_serves_eight_nodes_each_with_its_own_files(tmp_path: Path) -> None:
    root = tmp_path / "large"
    with running_simulator("large", root, task_seconds=0.01) as info:
        assert sorted(info.ssh_nodes) == [f"node{i}" for i in range(1, 9)]
        client = _ssh(info, "node5")
        try:
            assert run(client, "hostname")[1] == "node5\n"
            run(client, "echo changed > /etc/kernel/cmdline")
        finally:
            client.close()
        assert (root / "nodes" / "node5" / "etc" / "kernel" / "cmdline").read_text() == (
            "changed\n")
        assert "changed" not in (root / "etc" / "kernel" / "cmdline").read_text()
        assert "changed" not in (root / "nodes" / "node6" / "etc" / "kernel" / "cmdline"
                                 ).read_text()


def test_a_node_without_its_folder_gets_the_local_nodes_files_when_first_touched(
    tmp_path: Path
) -> None:
    from pvefix.hosttree import materialize_scenario
    from pvefix.hosttree.nodes import node_tree

    tree = materialize_scenario("cluster3", tmp_path / "c3")
    meta = tree.meta.model_copy(update={"cluster_nodes": [*tree.meta.cluster_nodes, "dorado"]})
    tree.meta = meta
    view = node_tree(tree, "dorado")
    assert not (tmp_path / "c3" / "nodes" / "dorado").exists()
    assert view.read_text("/etc/kernel/cmdline") == tree.read_text("/etc/kernel/cmdline")
    assert (tmp_path / "c3" / "nodes" / "dorado" / "etc" / "kernel" / "cmdline").is_file()
    assert not (tmp_path / "c3" / "nodes" / "dorado" / "etc" / "pve").exists()
    assert view.pci_devices() == []  # no sysfs of its own: unknown, not atlas's
    assert view.read_text("/sys/bus/pci/devices/0000:01:00.0/vendor") is None


def test_a_bundle_reads_a_far_vm_from_its_own_nodes_files_when_it_has_them(tmp_path: Path) -> None:
    import shutil

    from pvefix.hosttree import materialize_scenario
    from pvefix.sources.bundle import read_bundle

    root = tmp_path / "c3"
    materialize_scenario("cluster3", root)
    state = read_bundle(root, 310)
    assert state.node.name == "cygnus" and state.boot_tool.exit_code == 0
    assert state.file("/etc/kernel/cmdline").text == "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"
    assert {d.address for d in state.pci_devices} >= {"0000:41:00.0", "0000:c1:00.0"}
    assert read_bundle(root, 320).boot_tool.exit_code == 2
    shutil.rmtree(root / "nodes" / "cygnus")
    far = read_bundle(root, 310)  # no cygnus files: read as atlas's, which the planner knows
    assert far.node.name == "atlas" and far.vm.node == "cygnus"


def _until(check: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_an_ha_managed_vm_is_stopped_and_started_by_the_ha_manager_later(
    tmp_path: Path,
) -> None:
    # qemu-server's vm_shutdown/vm_start only ask HA (hastop/hastart tasks that end at once);
    # the node's LRM acts afterwards in a task of its own.
    with running_simulator("cluster3", tmp_path / "c3", task_seconds=0.01) as info:
        vm = api(info).nodes("cygnus").qemu(312)
        upid = vm.status.shutdown.post()
        assert ":hastop:312:" in upid and wait_task(api(info), upid)["exitstatus"] == "OK"
        assert "Requesting HA stop for VM 312" in [
            line["t"] for line in api(info).nodes("cygnus").tasks(upid).log.get()]
        assert vm.status.current.get()["ha"] == {"managed": 1, "state": "stopped"}
        assert _until(lambda: vm.status.current.get()["status"] == "stopped")
        upid = vm.status.start.post()
        assert ":hastart:312:" in upid and wait_task(api(info), upid)["exitstatus"] == "OK"
        assert vm.status.current.get()["status"] == "stopped"  # not yet: HA acts later
        assert _until(lambda: vm.status.current.get()["status"] == "running")
        tasks = [t["type"] for t in api(info).nodes("cygnus").tasks.get(vmid=312)]
        assert "qmstart" in tasks and "qmshutdown" in tasks


def test_an_ignored_ha_resource_is_stopped_and_started_directly(tmp_path: Path) -> None:
    # pve-ha-manager: "ignored service behave as if they were not managed by HA".
    with running_simulator("cluster3", tmp_path / "c3", task_seconds=0.01) as info:
        client = _ssh(info, "cygnus")
        assert run(client, "ha-manager set vm:312 --state ignored")[0] == 0
        assert run(client, "ha-manager set vm:310 --state ignored")[0] != 0  # not an HA resource
        client.close()
        vm = api(info).nodes("cygnus").qemu(312)
        assert vm.status.current.get()["ha"] == {"managed": 1, "state": "ignored"}
        upid = vm.status.shutdown.post()
        assert ":qmshutdown:312:" in upid and wait_task(api(info), upid)["exitstatus"] == "OK"
        assert vm.status.current.get()["status"] == "stopped"
        upid = vm.status.start.post()
        assert ":qmstart:312:" in upid and wait_task(api(info), upid)["exitstatus"] == "OK"
        assert vm.status.current.get()["status"] == "running"
