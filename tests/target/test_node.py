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
from pvefix.sim.serve import ReadyInfo, write_ready_file
from pvefix.target.guest.channel import REFRESH_TIMEOUT_S, check
from pvefix.target.local import LocalShell
from pvefix.target.node import LocalNode, ReopeningNode, SshNode
from pvefix.target.result import CommandResult
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
    files = ReopeningNode("kpro6", lambda: node, 0.3)
    assert check(files, _sleep(0.8), 10).ok
    assert files.run_in_time(_sleep(0.8), 10).ok


def test_local_node_reports_a_timeout_as_a_timeout(tmp_path: Path) -> None:
    node = LocalNode(LocalShell(tmp_path, timeout=30), "this host")
    started = time.monotonic()
    result = node.run(_sleep(5), timeout=0.4)
    assert result.timed_out and result.exit_code is None and not result.ok
    assert time.monotonic() - started < 3
    with pytest.raises(PvefixError, match=r"did not finish within 0.4 s") as err:
        check(ReopeningNode("kpro6", lambda: node, 30), _sleep(5), 0.4)
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
    refresh = ["proxmox-boot-tool", "refresh"]
    assert check(ReopeningNode("kpro6", lambda: node, 30), refresh, REFRESH_TIMEOUT_S).ok
    assert node.calls == [(("proxmox-boot-tool", "refresh"), REFRESH_TIMEOUT_S)]
    with pytest.raises(PvefixError, match="did not finish within 30 s"):
        check(ReopeningNode("kpro6", lambda: node, 30), ["proxmox-boot-tool", "refresh"], 30)


def test_a_reopening_node_asks_for_its_node_on_every_use() -> None:
    # A session that dropped (a host reboot) is replaced: the next use reaches the new one.
    first, second = FakeNode(files={"/etc/kernel/cmdline": "old\n"}), FakeNode()
    current = [first]
    node = ReopeningNode("kpro6", lambda: current[0], 30)
    assert node.read_file("/etc/kernel/cmdline") == "old\n"
    current[0] = second
    node.replace_file("/etc/kernel/cmdline", "new\n")
    assert second.files == {"/etc/kernel/cmdline": "new\n"}
    assert first.files == {"/etc/kernel/cmdline": "old\n"}


def test_a_reopening_node_raises_a_command_past_its_connections_timeout() -> None:
    def five_seconds(node: FakeNode, argv: tuple[str, ...], timeout: float | None) -> CommandResult:
        # None: the node's own --timeout (2 s here), as SshNode and LocalNode apply it
        done = timeout is not None and timeout >= 5
        return CommandResult(argv, 0 if done else None, "", "", timed_out=not done)

    fake = FakeNode(answers={("reboot",): five_seconds})
    node = ReopeningNode("kpro6", lambda: fake, 2)
    with pytest.raises(PvefixError, match=r"not done within 2 s \(--timeout\)"):
        node.run_in_time(["reboot"])
    assert node.run_in_time(["reboot"], 10).ok
    assert fake.calls == [(("reboot",), None), (("reboot",), 10)]


def test_a_reopening_nodes_check_raises_with_the_last_line_of_stderr() -> None:
    failed = CommandResult(("mkdir", "/x"), 1, "", "first\nmkdir: cannot create\n")
    fake = FakeNode(answers={("mkdir", "/x"): failed})
    with pytest.raises(PvefixError, match=r"`mkdir /x` exited with 1: mkdir: cannot create"):
        ReopeningNode("kpro6", lambda: fake, 2).check(["mkdir", "/x"])
