"""Helpers for `pvefix verify` tests: a simulated node whose VM 101 has a running guest agent,
connection settings for it, and synthetic probe reports with chosen P2P results."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pvefix.probe.report import (
    AllReduceRow,
    AllReduceRun,
    AllReduceSection,
    CmdlineSection,
    GpuSection,
    KernelLogSection,
    Matrix,
    P2PMeasuredSection,
    P2PStatusSection,
    PairResult,
    Report,
    TopologySection,
)
from pvefix.sim.serve import ReadyInfo, write_ready_file
from pvefix.target.guest.access import GuestAccess
from pvefix.target.settings import Connection, resolve_connection
from tests.simkit import api, wait_task

AGENT_VM = 101


def set_agent(info: ReadyInfo, vmid: int, value: str, *, start: bool = True) -> None:
    """Give the (stopped) VM an `agent:` line through the API, then start it."""
    prox = api(info, "ticket")
    prox.nodes(info.node).qemu(vmid).config.put(agent=value)
    if start:
        wait_task(prox, prox.nodes(info.node).qemu(vmid).status.start.post())


@pytest.fixture
def agent_sim(fresh_sim: Callable[..., ReadyInfo]) -> ReadyInfo:
    """A kpro6 node of the test's own where VM 101 runs with `agent: 1`."""
    info = fresh_sim("kpro6")
    set_agent(info, AGENT_VM, "1")
    return info


@pytest.fixture
def ready_file(agent_sim: ReadyInfo, tmp_path: Path) -> Path:
    path = tmp_path / "ready.json"
    write_ready_file(agent_sim, path)
    return path


def connection(info: ReadyInfo, tmp_path: Path) -> Connection:
    path = tmp_path / "ready-conn.json"
    write_ready_file(info, path)
    return resolve_connection(connection_file=path, env={}, config=None)


def guest_dir(info: ReadyInfo, vmid: int) -> Path:
    """The simulated guest's /tmp on this machine."""
    return Path(info.root) / ".pvefix-sim" / "guests" / str(vmid) / "tmp"


def ssh_guest(info: ReadyInfo, **changes: Any) -> GuestAccess:
    """Guest SSH settings aimed at the simulator's SSH server (strict host keys)."""
    values: dict[str, Any] = {
        "method": "ssh", "ssh_host": info.ssh_host, "ssh_port": info.ssh_port,
        "ssh_user": info.ssh_user, "ssh_key": Path(info.ssh_key),
        "known_hosts": Path(info.known_hosts),
    }
    values.update(changes)
    return GuestAccess.model_validate(values)


def synthetic_report(*, cell: str, delivered: bool | None, latency: float,
                     bandwidth: float = 20.0, created: str = "2026-12-01T10:00:00+00:00",
                     allreduce_us: float = 30.0) -> Report:
    """A two-GPU report whose P2P write matrix says `cell` and whose pairs moved data as told."""
    matrix = Matrix(columns=("GPU0", "GPU1"), rows=("GPU0", "GPU1"),
                    cells=(("X", cell), (cell, "X")))
    pairs = tuple(
        PairResult(src=s, dst=d, can_access_peer=cell == "OK", data_delivered=delivered,
                   latency_us=latency, bandwidth_gbps=bandwidth, host_staged_latency_us=14.0,
                   host_staged_bandwidth_gbps=25.0)
        for s, d in ((0, 1), (1, 0))
    )
    rows = (AllReduceRow(bytes=8, latency_us=allreduce_us, bus_bandwidth_gbps=0.0, correct=True),)
    return Report(
        pvefix_version="0.1.0", created=created, hostname="guest", kernel="6.8.0",
        gpus=GpuSection(), topology=TopologySection(),
        p2p_status=P2PStatusSection(modes={"w": matrix}),
        cmdline=CmdlineSection(cmdline="quiet"), kernel_log=KernelLogSection(),
        p2p=P2PMeasuredSection(pairs=pairs),
        allreduce=AllReduceSection(world_size=2, runs=(AllReduceRun(label="default", rows=rows),)),
    )
