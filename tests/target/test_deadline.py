"""`--timeout` is an overall deadline for every read: a node that sends one byte every 1.5 s
(the simulator's `drip` fault, over real HTTPS and SSH) cannot keep a `--timeout 3` run alive,
and the error names `--timeout` (exit 1)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.desired import record
from pvefix.errors import PvefixError
from pvefix.main import main
from pvefix.sim.serve import ReadyInfo, write_ready_file
from pvefix.sources.live import read_live
from pvefix.target.api import ApiClient
from pvefix.target.settings import Connection, resolve_connection
from pvefix.target.ssh import SshShell
from tests.simkit import api

Sim = Callable[..., ReadyInfo]


def _connection(info: ReadyInfo, tmp_path: Path) -> tuple[Connection, Path]:
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    return resolve_connection(connection_file=ready, env={}), ready


def _drip(info: ReadyInfo) -> None:
    api(info, "ticket")("_sim/inject").post(spec="drip=1500")


def test_a_dripping_ssh_command_ends_at_the_deadline(fresh_sim: Sim, tmp_path: Path) -> None:
    info = fresh_sim()
    conn, _ = _connection(info, tmp_path)
    shell = SshShell(conn.model_copy(update={"timeout": 3.0}))
    try:
        assert shell.run(["hostname"]).ok  # fast before the fault
        _drip(info)
        started = time.monotonic()
        with pytest.raises(PvefixError, match=r"not done within 3 s \(--timeout\)"):
            shell.run(["cat", "/etc/pve/nodes/kpro6/qemu-server/101.conf"])
        assert time.monotonic() - started < 4.5
    finally:
        shell.close()


def test_a_dripping_api_answer_ends_at_the_deadline(fresh_sim: Sim, tmp_path: Path) -> None:
    info = fresh_sim()
    conn, _ = _connection(info, tmp_path)
    client = ApiClient(conn.model_copy(update={"timeout": 3.0}))
    try:
        assert client.get("/version")
        _drip(info)
        started = time.monotonic()
        with pytest.raises(PvefixError, match=r"no complete answer within 3 s \(--timeout"):
            client.get("/cluster/resources")
        assert time.monotonic() - started < 4.5
    finally:
        client.close()


def test_check_all_against_a_dripping_node_exits_1_within_the_timeout(
    fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = fresh_sim()
    conn, ready = _connection(info, tmp_path)
    record(tmp_path / "state", read_live(conn, 101))
    _drip(info)
    started = time.monotonic()
    code = main(["check", "--all", "--connection", str(ready), "--timeout", "3",
                 "--state-dir", str(tmp_path / "state")])
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 1, err
    assert "--timeout" in err
    assert took < 10, took  # each read ends at 3 s (a few run one after another at most)


def test_a_request_inside_another_keeps_the_outer_one_watched() -> None:
    from pvefix.target import deadline

    deadline.WATCHDOG.arm(60.0)  # the outer request
    deadline.WATCHDOG.arm(60.0)  # a ticket renewal inside it
    assert deadline.WATCHDOG.disarm() is False
    assert threading.get_ident() in deadline.WATCHDOG._due  # the outer deadline still runs
    assert deadline.WATCHDOG.disarm() is False
    assert threading.get_ident() not in deadline.WATCHDOG._due


def test_an_ssh_command_printing_past_the_limit_is_an_error(
        fresh_sim: Sim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pvefix.target import ssh

    info = fresh_sim()
    conn, _ = _connection(info, tmp_path)
    shell = SshShell(conn)
    try:
        path = "/etc/pve/nodes/kpro6/qemu-server/100.conf"
        size = len(shell.run(["cat", path]).stdout.encode())
        monkeypatch.setattr(ssh, "READ_LIMIT", size - 1)
        with pytest.raises(PvefixError, match="more than"):
            shell.run(["cat", path])
    finally:
        shell.close()
