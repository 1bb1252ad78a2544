"""The Node (pvefix.target.node): `run(argv, timeout)` honours the caller's time on both
implementations (a boot loader refresh asks for 300 s, more than --timeout) and reports a
command that outlasts it as timed out, never as an exit status (it was "exited with 124"
under --local)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.errors import PvefixError
from pvefix.executor.filetarget import REFRESH_TIMEOUT_S, NodeFiles, check
from pvefix.sim.serve import ReadyInfo, write_ready_file
from pvefix.target.local import LocalShell
from pvefix.target.node import LocalNode, SshNode
from pvefix.target.settings import resolve_connection
from pvefix.target.ssh import SshShell
from tests.fakes.node import FakeNode, takes
from tests.simkit import api

Sim = Callable[..., ReadyInfo]


def _sleep(seconds: float) -> list[str]:
    return [sys.executable, "-c", f"import time; time.sleep({seconds})"]


def test_local_node_runs_past_the_connection_timeout_when_asked(tmp_path: Path) -> None:
    node = LocalNode(LocalShell(tmp_path, timeout=0.3), "this host")
    assert node.run(_sleep(0.8), timeout=10).ok, "the caller's 10 s, not --timeout's 0.3 s"
    files = NodeFiles(lambda: node)
    assert check(files, _sleep(0.8), 10).ok


def test_local_node_reports_a_timeout_as_a_timeout(tmp_path: Path) -> None:
    node = LocalNode(LocalShell(tmp_path, timeout=30), "this host")
    started = time.monotonic()
    result = node.run(_sleep(5), timeout=0.4)
    assert result.timed_out and result.exit_code is None and not result.ok
    assert time.monotonic() - started < 3
    with pytest.raises(PvefixError, match=r"did not finish within 0.4 s") as err:
        check(NodeFiles(lambda: node), _sleep(5), 0.4)
    assert "124" not in str(err.value)


def test_local_node_keeps_file_commands_under_its_root(tmp_path: Path) -> None:
    node = LocalNode(LocalShell(tmp_path, timeout=5), "this host")
    assert node.run(["mkdir", "-p", "/etc/kernel"], 1).ok
    node.replace_file("/etc/kernel/cmdline", "root=ZFS\n")
    assert (tmp_path / "etc/kernel/cmdline").read_text() == "root=ZFS\n"
    assert node.run(["rm", "-f", "/etc/kernel/cmdline"], 1).ok
    assert node.read_file("/etc/kernel/cmdline") is None


def test_ssh_node_honours_the_callers_timeout_both_ways(fresh_sim: Sim, tmp_path: Path) -> None:
    info = fresh_sim()
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    conn = resolve_connection(connection_file=ready, env={}).model_copy(
        update={"timeout": 1.0})
    shell = SshShell(conn)
    try:
        node = SshNode(shell, "root@kpro6")
        api(info, "ticket")("_sim/inject").post(spec="latency=1500")
        assert node.run(["hostname"], timeout=10).ok, "past --timeout (1 s): the caller's 10 s"
        result = node.run(["hostname"], timeout=0.5)
        assert result.timed_out and result.exit_code is None
    finally:
        shell.close()


def test_a_refresh_asks_for_its_own_time_on_a_fake_node() -> None:
    node = FakeNode(answers={("proxmox-boot-tool", "refresh"): takes(45)})
    assert check(NodeFiles(lambda: node), ["proxmox-boot-tool", "refresh"], REFRESH_TIMEOUT_S).ok
    assert node.calls == [(("proxmox-boot-tool", "refresh"), REFRESH_TIMEOUT_S)]
    with pytest.raises(PvefixError, match="did not finish within 30 s"):
        check(NodeFiles(lambda: node), ["proxmox-boot-tool", "refresh"], 30)
