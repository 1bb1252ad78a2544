"""Simulated nodes of the executor tests' own (they change them), and helpers to apply, roll
back and compare a target byte for byte. Everything goes through real HTTPS and SSH."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pvefix.commands.rollback_cmd import render_rollback
from pvefix.executor.console import Console
from pvefix.executor.journal import Hook
from pvefix.executor.options import ApplyOptions, RollbackOptions
from pvefix.executor.restore import RollbackResult
from pvefix.flow.apply import ApplyResult, apply_phase
from pvefix.flow.rollback import run_rollback
from pvefix.planner.model import Plan
from pvefix.sim.serve import ReadyInfo, Simulator, write_ready_file
from pvefix.target.settings import Connection

HOST_FILES = ("/etc/kernel/cmdline", "/etc/default/grub", "/proc/cmdline")


@dataclass
class Captured:
    out: io.StringIO = field(default_factory=io.StringIO)
    err: io.StringIO = field(default_factory=io.StringIO)

    def console(self, answer: Callable[[str], bool] | None = lambda q: True) -> Console:
        return Console(self.out, self.err, answer)


@dataclass
class Node:
    """One simulated node, its on-disk tree and the state dir pvefix uses against it."""

    sim: Simulator
    info: ReadyInfo
    state_dir: Path
    ready_file: Path

    def conn(self, auth: str = "ticket", ssh: bool = True) -> Connection:
        info = self.info
        values: dict[str, Any] = dict(
            host="127.0.0.1", port=info.api_port, node=info.node, ca_cert=info.ca_cert,
            ssh=ssh, ssh_host=info.ssh_host, ssh_port=info.ssh_port, ssh_key=info.ssh_key,
            ssh_agent=False, known_hosts=info.known_hosts, timeout=10,
        )
        if auth == "token":
            values.update(auth="token", token_id=info.token_id, token_secret=info.token_secret)
        else:
            values.update(auth="password", user=info.user, password=info.password)
        return Connection(**values)

    def conf(self, vmid: int) -> bytes:
        return self.sim.state.tree.vm_config_path(vmid).read_bytes()

    def host_file(self, path: str) -> bytes | None:
        real = self.sim.state.tree.host_path(path)
        return real.read_bytes() if real.exists() else None

    def installed_cmdline(self) -> str:
        proc = (self.host_file("/proc/cmdline") or b"").decode().strip()
        return self.sim.state.boot.installed(proc)

    def fingerprint(self, vmid: int) -> dict[str, object]:
        """Everything an apply may touch, byte for byte, plus run state and boot loader."""
        run = self.sim.state.run_state(vmid)
        return {
            "conf": self.conf(vmid),
            **{path: self.host_file(path) for path in HOST_FILES},
            "installed": self.installed_cmdline(),
            "status": run.status,
        }

    def apply(self, vmid: int, phase: int, *, plan: Plan | None = None, hook: Hook | None = None,
              conn: Connection | None = None, captured: Captured | None = None,
              yes: bool = True, answer: Callable[[str], bool] | None = None,
              **options: Any) -> ApplyResult:
        cap = captured or Captured()
        opts = ApplyOptions(phase=phase, state_dir=self.state_dir, yes=yes, task_timeout=10,
                            **options)
        return apply_phase(conn or self.conn(), vmid, opts, cap.console(answer), plan=plan,
                           hook=hook)

    def rollback(self, vmid: int | None, snapshot: str | None = None, *,
                 conn: Connection | None = None, captured: Captured | None = None,
                 **options: Any) -> RollbackResult:
        cap = captured or Captured()
        opts = RollbackOptions(yes=True, task_timeout=10, **options)
        console = cap.console()
        result = run_rollback(conn or self.conn(), self.state_dir, vmid, snapshot, opts,
                              console)
        for line in render_rollback(result):  # as `pvefix rollback` prints it
            console.say(line)
        return result


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Callable[..., Node]]:
    """A factory of fresh simulated nodes: node("kpro6") -> Node; all stop when the test ends."""
    sims: list[Simulator] = []

    def start(scenario: str = "kpro6", reboot_seconds: float = 0.3, **options: Any) -> Node:
        options.setdefault("task_seconds", 0.02)
        root = tmp_path / f"{scenario}-{len(sims)}"
        sim = Simulator(scenario, root, **options)
        sim.state.tree.meta.reboot_seconds = reboot_seconds
        info = sim.start()
        sims.append(sim)
        ready = tmp_path / f"ready-{len(sims)}.json"
        write_ready_file(info, ready)
        return Node(sim, info, tmp_path / "state", ready)

    yield start
    for sim in sims:
        sim.stop()
