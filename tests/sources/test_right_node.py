"""Every host read and write goes to the node the VM lives on: when SSH reaches another node,
pvefix refuses (exit 3) naming both, before any host fact is used or anything is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.errors import EXIT_REFUSED, RefusedError
from pvefix.sim.serve import ReadyInfo
from pvefix.sources.live import read_live
from pvefix.target.sessions import Sessions
from tests.sources.test_live import connection


def test_a_vm_on_another_node_than_the_ssh_host_is_refused_naming_both(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path
) -> None:
    info = fresh_sim("large")  # 8 nodes; the connection's SSH is node1's
    # No per-node map (the ready file has one): node3's address is its /cluster/status IP with
    # the connection's SSH port, which the simulator gives node1.
    conn = connection(info, tmp_path, ssh_nodes={})
    with pytest.raises(RefusedError) as caught:
        read_live(conn, 103)  # VM 103 lives on node3
    assert caught.value.exit_code == EXIT_REFUSED
    message = str(caught.value)
    assert "reaches node 'node1', but VM 103 lives on node 'node3'" in message
    assert "[profiles.NAME.ssh.nodes] node3" in message


def test_a_vm_of_the_ssh_node_reads_normally(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path
) -> None:
    info = fresh_sim("large")
    state = read_live(connection(info, tmp_path), 105)  # VM 105 lives on node1
    assert state.vm.node == "node1"


def test_no_host_write_reaches_a_node_other_than_the_vms(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path
) -> None:
    info = fresh_sim("large")
    wrong = "reaches node 'node1', but the target is node 'node3'"
    with (Sessions(connection(info, tmp_path, ssh_nodes={})) as sessions,
          pytest.raises(RefusedError, match=wrong)):
        sessions.at("node3").replace_file("/etc/kernel/cmdline",
                                          "root=ZFS=rpool/ROOT/pve-1 iommu=pt\n")


def test_a_per_node_ssh_address_from_the_profile_is_used_for_the_vms_node(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path
) -> None:
    from pvefix.target.settings import resolve_connection

    info = fresh_sim("large")
    config = tmp_path / "config.toml"
    config.write_text(
        '[profiles.lab]\nhost = "127.0.0.1"\n'
        '[profiles.lab.ssh.nodes]\nnode3 = "127.0.0.3"\nnode1 = "127.0.0.1"\n'
    )
    conn = resolve_connection(config=config, profile="lab", env={})
    assert conn.ssh_nodes == {"node3": "127.0.0.3", "node1": "127.0.0.1"}
    assert conn.for_node("node3").effective_ssh_host == "127.0.0.3"
    assert (conn.for_node("node1").ssh_host, conn.for_node("node1").ssh_port) == (
        "127.0.0.1", 22)
    assert conn.for_node("node2").effective_ssh_host == "127.0.0.1"
    with Sessions(connection(info, tmp_path, ssh_nodes={"node3": "127.0.0.3"})) as sessions:
        assert sessions.address("node3").host == "127.0.0.3"
