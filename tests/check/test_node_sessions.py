"""Every node's host cmdline through its own SSH session, all sessions at once: the simulator's
`large` cluster (8 nodes, each with its own SSH endpoint), counted with /_sim/stats, which
counts the whole cluster's work (all nodes share one set of counters)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pvefix.sim.serve import ReadyInfo, write_ready_file
from pvefix.sim.stats import fetch_stats
from pvefix.sources.cluster import HOST_COMMANDS, read_live_cluster
from pvefix.target.settings import resolve_connection

Sim = Callable[..., ReadyInfo]
NODES = [f"node{i}" for i in range(1, 9)]


def _stats(info: ReadyInfo, reset: bool = False) -> dict[str, Any]:
    return fetch_stats(info.api_url, info.ca_cert, info.user, info.password, reset=reset)


def _conn(info: ReadyInfo, tmp_path: Path, **update: Any) -> Any:
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    return resolve_connection(connection_file=ready, env={}).model_copy(update=update)


def test_every_node_is_read_through_its_own_session_in_parallel(
    fresh_sim: Sim, tmp_path: Path
) -> None:
    info = fresh_sim("large", latency_ms=20)
    conn = _conn(info, tmp_path)
    _stats(info, reset=True)
    read = read_live_cluster(conn, None, nodes=NODES)
    cost = _stats(info, reset=True)

    assert read.path == "bulk" and read.ssh_node == "node1"
    assert read.node_sessions == len(NODES) - 1
    assert sorted(read.nodes) == NODES
    for name, node in read.nodes.items():
        assert node.problem is None and node.name == name and node.configured, node
    assert "host cmdlines of 7 more node(s) through their own SSH sessions" in read.path_note()
    # One session per node; one after another they would cost a wave each (at least 8 more).
    assert cost["ssh_connections"] == len(NODES)
    # Each node's host facts on one channel (framed), and the configs on one more.
    assert len(HOST_COMMANDS) > 1 and cost["ssh_channels"]["exec"] == len(NODES) + 1
    assert cost["waves"] <= 6, cost


def test_a_session_that_lands_on_another_node_is_that_nodes_problem(
    fresh_sim: Sim, tmp_path: Path
) -> None:
    info = fresh_sim("large")
    wrong = dict(info.ssh_nodes, node2=info.ssh_nodes["node3"])
    read = read_live_cluster(_conn(info, tmp_path, ssh_nodes=wrong), [100],
                             nodes=["node2", "node3"])
    assert read.nodes["node3"].problem is None
    problem = read.nodes["node2"].problem
    assert problem is not None and "reached host 'node3'" in problem


def test_without_ssh_no_node_is_read_and_the_path_says_so(
    fresh_sim: Sim, tmp_path: Path
) -> None:
    info = fresh_sim("large")
    read = read_live_cluster(_conn(info, tmp_path, ssh=False), [100, 101], nodes=NODES)
    assert read.path == "per-vm" and read.nodes == {} and read.node_sessions == 0
    assert "no SSH" in read.path_note()
