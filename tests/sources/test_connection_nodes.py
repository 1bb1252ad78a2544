"""Per-node SSH addresses: profile ssh.nodes (Terraform bpg-style), /cluster/status, the
connection's own host; the far side's hostname checked; the cluster's identity."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.errors import ParseError
from pvefix.target.nodes import (
    ClusterView,
    NodeMismatch,
    check_hostname,
    node_address,
    split_address,
)
from pvefix.target.settings import Connection, resolve_connection

STATUS = [
    {"type": "cluster", "id": "cluster", "name": "prod", "nodes": 2, "quorate": 1},
    {"type": "node", "name": "node1", "ip": "10.0.0.11", "local": 1},
    {"type": "node", "name": "node6", "ip": "10.0.0.16", "local": 0},
]


def test_the_profile_maps_nodes_to_addresses(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[profiles.prod]\nhost = "pve1.example"\nuser = "root@pam"\n'
                      '[profiles.prod.ssh.nodes]\nnode6 = "10.9.0.16:2222"\n')
    conn = resolve_connection(config=config, profile="prod", env={})
    assert conn.ssh and conn.ssh_nodes == {"node6": "10.9.0.16:2222"}
    cluster = ClusterView.parse(STATUS)
    assert str(node_address(conn, "node6", cluster)) == "10.9.0.16:2222 (ssh.nodes)"
    assert str(node_address(conn, "node1", cluster)) == "10.0.0.11:22 (/cluster/status)"
    assert node_address(conn, "node1", ClusterView(None, {})).host == "pve1.example"


def test_an_unknown_key_in_the_ssh_table_is_an_error(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[profiles.prod]\nhost = "h"\n[profiles.prod.ssh]\nnode = "x"\n')
    with pytest.raises(ParseError, match=r"unknown key 'profiles\.prod\.ssh\.node'"):
        resolve_connection(config=config, profile="prod", env={})


def test_cluster_identity_is_the_cluster_name_or_the_standalone_node() -> None:
    assert ClusterView.parse(STATUS).identity("node6") == "cluster-prod"
    assert ClusterView.parse(STATUS[1:2]).identity("node1") == "node-node1"


def test_a_hostname_that_is_not_the_node_is_refused_naming_both() -> None:
    address = node_address(Connection(host="10.0.0.11"), "node6", None)
    with pytest.raises(NodeMismatch) as caught:
        check_hostname("node6", address, "node1\n", 0, 100)
    assert "reaches node 'node1', but VM 100 lives on node 'node6'" in str(caught.value)
    assert caught.value.exit_code == 3
    check_hostname("node6", address, "node6.example.com\n", 0)  # a FQDN's short name
    with pytest.raises(NodeMismatch, match="did not say which host"):
        check_hostname("node6", address, "", 127)


@given(st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True), st.integers(1, 65535))
def test_addresses_split_into_host_and_port(host: str, port: int) -> None:
    assert split_address(f"{host}:{port}", 22) == (host, port)
    assert split_address(host, 22) == (host, 22)
    assert split_address(f"[fd00::{port:x}]:{port}", 22) == (f"fd00::{port:x}", port)
