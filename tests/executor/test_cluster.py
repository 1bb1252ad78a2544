"""The right node, and every VM on it, against the 3-node `cluster3` simulator over real HTTPS
and SSH: each node its own SSH endpoint, hostname, host files, sysfs and boot loader.

atlas (the API node, systemd-boot, `iommu=pt` already), borealis (plain GRUB), cygnus
(systemd-boot without `iommu=pt`, two H100s): VM 310 on cygnus, its neighbours 311 (lock:
backup), 312 (HA, onboot, order=1) and 313 (stopped, onboot, order=2, wants 310's H100)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pvefix.desired import load_recorded
from pvefix.errors import PvefixError, RefusedError
from pvefix.executor.snapshot import list_snapshots
from pvefix.planner import plan as make_plan
from pvefix.sources.live import read_live
from pvefix.target.settings import Connection, resolve_connection
from tests.executor.conftest import Captured, Node

CYGNUS_CMDLINE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"


def _conn(n: Node, **update: Any) -> Connection:
    """The cluster through its ready file (root@pam ticket: raw hostpci): API on atlas,
    every node's SSH endpoint."""
    conn = resolve_connection(connection_file=n.ready_file, env={})
    return conn.model_copy(update={"timeout": 10, "auth": "password", **update})


def _tree(n: Node, node: str) -> Any:
    return n.sim.nodes[node].tree


def _edit(n: Node, vmid: int, old: str, new: str) -> None:
    path = n.sim.state.tree.vm_config_path(vmid)
    path.write_text(path.read_text().replace(old, new))


def _quiet_neighbours(n: Node) -> None:
    """No backup lock on 311, 313 without onboot (it would take 310's H100 at boot), 312 not
    HA-managed (pvefix never stops an HA-managed VM)."""
    _edit(n, 311, "lock: backup\n", "")
    _edit(n, 313, "onboot: 1\n", "")
    n.sim.state.tree.meta.vms["312"].ha_state = None


@pytest.fixture
def cluster(node: Callable[..., Node]) -> Node:
    return node("cluster3", reboot_seconds=0.3)


def test_every_node_has_its_own_ssh_endpoint_hostname_and_files(cluster: Node) -> None:
    ports = {name: where.rsplit(":", 1)[1] for name, where in cluster.info.ssh_nodes.items()}
    assert sorted(ports) == ["atlas", "borealis", "cygnus"] and len(set(ports.values())) == 3
    cyg = read_live(_conn(cluster), 310)
    bor = read_live(_conn(cluster), 320)
    assert cyg.vm.node == "cygnus" and bor.vm.node == "borealis"
    assert cyg.file("/etc/kernel/cmdline").text == CYGNUS_CMDLINE
    assert bor.file("/etc/kernel/cmdline").text is None  # GRUB: no kernel cmdline file
    assert "intel_iommu=on" in (bor.file("/etc/default/grub").text or "")
    assert cyg.boot_tool.exit_code == 0 and bor.boot_tool.exit_code == 2
    assert bor.node.cpu_vendor == "GenuineIntel" and cyg.node.cpu_vendor == "AuthenticAMD"


def test_a_vm_on_a_far_node_is_planned_from_that_nodes_facts(cluster: Node) -> None:
    state = read_live(_conn(cluster), 310)
    assert any("lives on node cygnus, not on atlas" in note for note in state.notes)
    by_address = {d.address: d for d in state.pci_devices}
    assert by_address["0000:41:00.0"].device == "0x2321"  # cygnus's H100, not atlas's L4
    assert not any("not on the node" in note for note in state.notes)
    host = [c for p in make_plan(state).phases for c in p.changes if c.target == "host-cmdline"]
    # atlas has iommu=pt already; cygnus does not: the plan is cygnus's.
    assert [(c.file, c.after) for c in host] == [
        ("/etc/kernel/cmdline", "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt")]


def test_an_explicit_node_wins_over_the_connection_files_node(cluster: Node) -> None:
    conn = resolve_connection(connection_file=cluster.ready_file, env={},
                              flags={"node": "cygnus"})
    assert conn.node == "cygnus"
    assert resolve_connection(connection_file=cluster.ready_file, env={}).node == "atlas"


def test_an_ssh_address_that_reaches_another_node_is_refused_naming_both(
    cluster: Node
) -> None:
    wrong = dict(cluster.info.ssh_nodes)
    wrong["cygnus"] = wrong["atlas"]  # a profile that maps cygnus to atlas's address
    with pytest.raises(RefusedError) as caught:
        read_live(_conn(cluster, ssh_nodes=wrong), 310)
    message = str(caught.value)
    assert "reaches node 'atlas', but VM 310 lives on node 'cygnus'" in message
    assert caught.value.exit_code == 3
    before = _tree(cluster, "atlas").read_text("/etc/kernel/cmdline")
    with pytest.raises(RefusedError):
        cluster.apply(310, 2, conn=_conn(cluster, ssh_nodes=wrong))
    assert _tree(cluster, "atlas").read_text("/etc/kernel/cmdline") == before
    assert _tree(cluster, "cygnus").read_text("/etc/kernel/cmdline") == CYGNUS_CMDLINE


def test_a_host_reboot_is_refused_while_a_neighbour_is_under_a_backup_lock(
    cluster: Node
) -> None:
    cap = Captured()
    with pytest.raises(RefusedError) as caught:
        cluster.apply(310, 2, conn=_conn(cluster), reboot_host=True, stop_others=True,
                      captured=cap)
    assert "VM 311 (lock backup)" in str(caught.value)
    assert "nothing was written" in str(caught.value)
    listing = cap.out.getvalue()
    assert "VM 312 (vm312), running, HA started, onboot, startup order 1" in listing
    listing = " ".join(listing.split())  # filled to the width: one line per VM, or more
    assert ("VM 310 (vm310), running, no onboot, passes hostpci0: 0000:41:00.0; "
            "hostpci1: 0000:c1:00.0") in listing
    assert _tree(cluster, "cygnus").read_text("/etc/kernel/cmdline") == CYGNUS_CMDLINE
    assert cluster.sim.state.run_state(311).status == "running"


def test_running_neighbours_refuse_the_reboot_without_stop_others(cluster: Node) -> None:
    _quiet_neighbours(cluster)
    with pytest.raises(RefusedError) as caught:
        cluster.apply(310, 2, conn=_conn(cluster), reboot_host=True)
    assert "other VMs run: VM 311, VM 312" in str(caught.value)
    assert "--stop-others" in str(caught.value)
    assert _tree(cluster, "cygnus").read_text("/etc/kernel/cmdline") == CYGNUS_CMDLINE


def test_an_onboot_vm_that_would_take_the_targets_gpu_refuses_the_reboot(
    cluster: Node
) -> None:
    _edit(cluster, 311, "lock: backup\n", "")
    cluster.sim.state.tree.meta.vms["312"].ha_state = None
    with pytest.raises(RefusedError) as caught:
        cluster.apply(310, 2, conn=_conn(cluster), reboot_host=True, stop_others=True)
    assert "VM 310 needs 0000:41:00.0, which VM 313 holds" in str(caught.value)


def test_an_ha_managed_neighbour_is_never_stopped(cluster: Node) -> None:
    _edit(cluster, 311, "lock: backup\n", "")
    with pytest.raises(RefusedError, match=r"VM 312 \(HA started\)"):
        cluster.apply(310, 2, conn=_conn(cluster), reboot_host=True, stop_others=True)
    assert cluster.sim.state.run_state(312).status == "running"


def test_the_host_reboot_happens_on_the_vms_node_and_run_states_come_back(
    cluster: Node
) -> None:
    _quiet_neighbours(cluster)
    atlas_before = _tree(cluster, "atlas").read_text("/etc/kernel/cmdline")
    cap = Captured()
    result = cluster.apply(310, 2, conn=_conn(cluster), reboot_host=True, stop_others=True,
                           captured=cap)
    err = cap.err.getvalue()
    # Reverse startup order down: 310 and 311 (no order) before 312 (order=1).
    assert err.index("VM 311: shutting down") < err.index("VM 312: shutting down")
    assert any(line.startswith("host cygnus rebooted") for line in result.activated)
    assert _tree(cluster, "cygnus").read_text("/etc/kernel/cmdline") == (
        "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n")
    assert "iommu=pt" in (_tree(cluster, "cygnus").read_text("/proc/cmdline") or "")
    assert _tree(cluster, "atlas").read_text("/etc/kernel/cmdline") == atlas_before
    assert cluster.sim.nodes["atlas"].started < cluster.sim.nodes["cygnus"].started
    for vmid in (310, 311, 312):
        assert cluster.sim.state.run_state(vmid).status == "running", vmid
    ups = [line.split(" up")[0] for line in result.activated if " up" in line]
    assert ups == ["VM 312", "VM 310", "VM 311"]  # startup order: ordered first, then VMID
    assert result.not_running == []


def test_a_start_is_refused_before_any_write_when_its_gpu_is_held(cluster: Node) -> None:
    vms = cluster.sim.state.tree.meta.vms
    vms["313"] = vms.pop("310")  # 310 stopped, 313 runs and holds the H100 310 needs
    before = cluster.conf(310)
    with pytest.raises(RefusedError) as caught:
        cluster.apply(310, 1, conn=_conn(cluster), restart=True, start=True)
    assert "VM 310 needs 0000:41:00.0, which VM 313 holds" in str(caught.value)
    assert cluster.conf(310) == before


def test_restart_of_a_stopped_vm_leaves_it_stopped_unless_start(cluster: Node) -> None:
    cluster.sim.state.tree.meta.vms.pop("310")
    result = cluster.apply(310, 1, conn=_conn(cluster), restart=True)
    assert cluster.sim.state.run_state(310).status == "stopped"
    assert result.activated == []
    assert "machine: q35" in cluster.conf(310).decode()


def test_a_start_ending_with_warnings_is_success_and_the_warnings_are_shown(
    cluster: Node
) -> None:
    _edit(cluster, 310, "boot: order=scsi0\n", "bios: ovmf\nboot: order=scsi0\n")
    cap = Captured()
    result = cluster.apply(310, 1, conn=_conn(cluster), restart=True, captured=cap)
    assert result.activated == ["VM 310 restarted"]
    assert "WARN: no efidisk configured! Using temporary efivars disk." in cap.err.getvalue()
    assert "the start task ended with WARNINGS: 1" in cap.err.getvalue()
    assert cluster.sim.state.run_state(310).running_machine == "pc-q35-10.1+pve0"


def test_snapshots_are_kept_under_the_clusters_identity_and_old_ones_still_roll_back(
    cluster: Node, tmp_path: Path
) -> None:
    cluster.sim.state.tree.meta.vms.pop("310")
    result = cluster.apply(310, 1, conn=_conn(cluster))
    from tests.simkit import state_key

    lab3 = state_key(cluster.info, "cluster-lab3")
    snap = list_snapshots(cluster.state_dir, 310)[-1]
    assert snap.meta.cluster == lab3 and snap.id == result.snapshot_id
    assert snap.path.parent.name == lab3
    assert result.desired_path == str(cluster.state_dir / "desired" / lab3 / "310.toml")
    assert load_recorded(cluster.state_dir, [310], lab3).vms[310]
    with pytest.raises(PvefixError, match="no desired state recorded for VM 310"):
        load_recorded(cluster.state_dir, [310], "cluster-other@000000000000")
    # An older, unkeyed snapshot (as earlier versions wrote it) is still found and restored.
    legacy = cluster.state_dir / "snapshots" / snap.id
    snap.path.rename(legacy)
    meta = (legacy / "meta.json").read_text().replace(f'"cluster": "{lab3}"',
                                                      '"cluster": null')
    (legacy / "meta.json").write_text(meta)
    cluster.rollback(310, conn=_conn(cluster))
    assert "machine: q35" not in cluster.conf(310).decode()


def test_a_lock_timeout_says_another_task_holds_the_lock_and_nothing_changed() -> None:
    from pvefix.target.tasks import TaskFailed

    failed = TaskFailed("UPID:cygnus:1:2:3:qmconfig:310:root@pam:",
                        "can't lock file '/var/lock/qemu-server/lock-310.conf' - got timeout")
    assert "another task held VM 310's config lock" in str(failed)
    assert "this task changed nothing" in str(failed)


def test_a_node_that_goes_away_mid_task_is_said_so_with_the_next_step(cluster: Node) -> None:
    from pvefix.target.sessions import Sessions
    from pvefix.target.tasks import NodeGone, wait_task, write
    from tests.sim.test_cluster_sim import _ssh
    from tests.simkit import run

    cluster.sim.nodes["cygnus"].tree.meta.reboot_seconds = 5
    client = _ssh(cluster.info, "cygnus")
    run(client, "reboot")
    client.close()
    sessions = Sessions(_conn(cluster))
    try:
        with pytest.raises(NodeGone) as caught:
            wait_task(sessions.api(), "cygnus",
                      "UPID:cygnus:0000AAAA:0000BBBB:00000001:qmstart:310:root@pam:", 5)
        message = str(caught.value)
        assert "node cygnus stopped answering while its task ran" in message
        assert "595" in message and "pvenode task status" in message
        with pytest.raises(Exception, match="HTTP 595: the API node could not reach node"):
            write(sessions.api(), "cygnus", "POST", "/nodes/cygnus/qemu/310/status/start", {})
    finally:
        sessions.close()


def _finding_ids(n: Node, vmid: int) -> set[str]:
    return {f.id for f in make_plan(read_live(_conn(n), vmid)).findings}


def test_an_ha_managed_vm_is_said_in_the_plan_and_an_ignored_one_is_not(cluster: Node) -> None:
    live = read_live(_conn(cluster), 312)
    assert live.vm.ha_state == "started"
    assert "vm.ha-managed" in _finding_ids(cluster, 312)
    assert read_live(_conn(cluster), 310).vm.ha_state is None
    cluster.sim.state.set_ha_state(312, "ignored")  # as `ha-manager set vm:312 --state ignored`
    assert read_live(_conn(cluster), 312).vm.ha_state == "ignored"
    assert "vm.ha-managed" not in _finding_ids(cluster, 312)


def test_an_ha_managed_vm_is_not_restarted_until_its_ha_state_is_ignored(cluster: Node) -> None:
    cluster.sim.state.set_ha_state(310, "started")
    conf = cluster.sim.state.tree.vm_config_path(310)
    before = conf.read_text()
    with pytest.raises(RefusedError, match=r"VM 310 is managed by HA \(state started\)") as err:
        cluster.apply(310, 1, conn=_conn(cluster), restart=True)
    assert "ha-manager set vm:310 --state ignored" in str(err.value)
    assert conf.read_text() == before, "nothing may be written"
    cluster.sim.state.set_ha_state(310, "ignored")  # `ha-manager set vm:310 --state ignored`
    result = cluster.apply(310, 1, conn=_conn(cluster), restart=True)
    assert result.activated and "q35" in (cluster.sim.state.run_state(310).running_machine or "")
    cluster.sim.state.set_ha_state(310, "started")
    with pytest.raises(RefusedError, match="managed by HA"):
        cluster.rollback(310, conn=_conn(cluster), restart=True)
    assert "q35" in conf.read_text(), "a refused rollback writes nothing either"
