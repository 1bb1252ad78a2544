"""One command, one API session, one SSH session to the node it touches: apply (reading,
locking, writing, restarting, re-reading, and the guest through its agent) and rollback each
log in once and open one SSH connection, counted by the simulator (GET /_sim/stats). A VM on
another node of a cluster: the one SSH connection goes to that node, no other."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pvefix.main import main
from pvefix.sim.serve import ReadyInfo, write_ready_file
from pvefix.sim.stats import fetch_stats
from pvefix.target.sessions import Sessions
from pvefix.target.settings import resolve_connection
from tests.simkit import api, wait_task

Sim = Callable[..., ReadyInfo]


def _stats(info: ReadyInfo, reset: bool = False) -> dict[str, Any]:
    return fetch_stats(info.api_url, info.ca_cert, info.user, info.password, reset=reset)


def _with_agent(info: ReadyInfo, node: str, vmid: int) -> None:
    prox = api(info, "ticket")
    vm = prox.nodes(node).qemu(vmid)
    if vm.status.current.get()["status"] == "running":
        wait_task(prox, vm.status.stop.post())
    vm.config.put(agent="1")
    wait_task(prox, vm.status.start.post())


def test_apply_and_rollback_with_restart_and_the_agent_each_log_in_once(
    fresh_sim: Sim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    info = fresh_sim("kpro6")
    _with_agent(info, info.node, 100)
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    monkeypatch.setenv("PVEFIX_STATE_DIR", str(tmp_path / "state"))
    common = ["--connection", str(ready), "--yes", "--restart", "--guest-agent"]
    _stats(info, reset=True)

    assert main(["apply", "100", "--phase", "1", *common]) == 0
    applied = _stats(info, reset=True)
    assert main(["rollback", "100", *common]) == 0
    rolled_back = _stats(info, reset=True)

    # The apply really went through the API, SSH and the agent (not a no-op counted as one).
    assert applied["requests"].get("POST /nodes/{node}/qemu/{vmid}/status/start", 0) >= 1
    assert any("/agent/" in path for path in applied["requests"])
    assert rolled_back["requests"].get("POST /nodes/{node}/qemu/{vmid}/status/start", 0) >= 1
    for cost in (applied, rolled_back):
        assert cost["ssh_connections"] == 1, cost
        assert cost["ticket_logins"] <= 1, cost


def test_a_vm_on_another_node_gets_one_ssh_session_to_that_node_only(
    fresh_sim: Sim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    info = fresh_sim("cluster3")  # VM 320 lives on borealis; the connection names atlas
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    monkeypatch.setenv("PVEFIX_STATE_DIR", str(tmp_path / "state"))
    _stats(info, reset=True)
    code = main(["apply", "320", "--phase", "1", "--yes", "--qm-set", "--connection", str(ready)])
    cost = _stats(info, reset=True)
    assert code == 0
    assert cost["ssh_connections"] == 1, cost
    assert set(cost["ssh_by_node"]) == {"borealis"}, cost


def test_sessions_are_opened_once_and_closed_together(tmp_path: Path,
                                                      kpro6_sim: ReadyInfo) -> None:
    ready = tmp_path / "ready.json"
    write_ready_file(kpro6_sim, ready)
    conn = resolve_connection(connection_file=ready, env={})
    from pvefix.target.nodes import node_address

    with Sessions(conn) as sessions:
        first = sessions.api()
        assert sessions.api() is first
        where = lambda: node_address(conn, kpro6_sim.node, None)  # noqa: E731
        shell = sessions.node(kpro6_sim.node, where)
        assert sessions.node(kpro6_sim.node, where) is shell
        shell.transport.close()  # a dropped connection is opened again on the next use
        again = sessions.node(kpro6_sim.node, where)
        assert again is not shell and again.transport.is_active()
        assert dict(sessions.opened) == {"api": 1, "ssh": 2}
    assert not again.transport.is_active()
