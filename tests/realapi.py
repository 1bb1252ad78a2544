"""Proxmox VE's own API daemons (../shared/pve-api) as test nodes, and pvefix run against them.

`PveApiNodes` starts one real node per scenario for the whole test session (start-up costs about
7 s and 500 MB) and stops them all at the end; `fresh()` gives a node of one's own. A node's
ready file is pvefix's `--connection` JSON. `run_pvefix(...)` runs the installed `pvefix` script
as an admin would (a subprocess, its own state and config folders, 80 columns), so the flows are
exactly the documented commands. Tests get the nodes through the `pve_api` fixture
(tests/conformance/conftest.py), which skips with a reason starting "needs ../shared" where the
harness cannot run (no ../shared, not root, no namespaces).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tests.shared import NEEDS_SHARED, SHARED

T = TypeVar("T")

PVE_API = SHARED / "pve-api" / "pve-api"
SCENARIOS = Path(__file__).resolve().parents[1] / "pvefix" / "scenarios"
PVEFIX = str(Path(sys.executable).with_name("pvefix"))


def harness_missing(launcher: Path = PVE_API) -> str | None:
    """Why no real node can run here (None when one can): the harness's own readiness check,
    `pve-api check` (root, namespaces, overlayfs, its Debian Perl packages), asked once per
    test process."""
    return _why_not(str(launcher))


@functools.cache
def _why_not(launcher: str) -> str | None:
    if not Path(launcher).is_file():
        return f"{NEEDS_SHARED}: {launcher} is absent"
    try:
        check = subprocess.run([launcher, "check"], capture_output=True, text=True,
                               timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{NEEDS_SHARED}: pve-api check did not answer: {exc}"
    if check.returncode != 0:
        said = (check.stdout or check.stderr).strip() or f"exit status {check.returncode}"
        return f"{NEEDS_SHARED}: {said}"
    return None


class NodeFailed(RuntimeError):
    """A node that this machine could run did not come up (the test fails, it does not skip)."""


@dataclass
class RealNode:
    """One running node: its ready file (pvefix's --connection), its state folder, its tree."""

    key: str
    ready_file: Path
    ready: dict[str, Any]
    state: Path
    proc: subprocess.Popen[bytes]

    @property
    def tree(self) -> Path:
        return Path(self.ready["root"])

    def conf_path(self, vmid: int) -> Path:
        from pvefix.hosttree.tree import load_tree

        return load_tree(self.tree).vm_config_path(vmid)

    def conf(self, vmid: int) -> bytes:
        return self.conf_path(vmid).read_bytes()

    def exec(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A command inside the node (qm, pvesh, cat ...), as root of the node."""
        return subprocess.run([str(PVE_API), "exec", "--state", str(self.state), "--", *argv],
                              capture_output=True, text=True, timeout=timeout, check=False)

    def settle(self, vmid: int, timeout: float = 60) -> None:
        """Wait until no `qm cleanup VMID` runs on the node. qmeventd's cleanup of a QEMU that
        exited holds the VM's config lock; when a new QEMU was started before it ran (a restart),
        qemu-server's cleanup waits up to 30 s for that process with the lock held, and a write
        or power action meanwhile fails `can't lock file ... got timeout` (Proxmox's own
        behaviour; the stand-in QEMU runs the cleanup as qmeventd does)."""
        deadline = time.monotonic() + timeout
        while self.exec("pgrep", "-f", f"qm cleanup {vmid} ").returncode == 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"qm cleanup {vmid} still runs after {timeout} s")
            time.sleep(0.5)

    def ready_with(self, path: Path, **changes: Any) -> Path:
        """A copy of the ready file with some keys changed (e.g. another token), at `path`."""
        data = {**self.ready, **changes}
        path.write_text(json.dumps({k: v for k, v in data.items() if v is not None}))
        path.chmod(0o600)
        return path


class PveApiNodes:
    """Real Proxmox API nodes, one per scenario, started on first use, stopped at the end."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.nodes: dict[str, RealNode] = {}

    def node(self, scenario: str) -> RealNode:
        """SCENARIO's shared node: a test that changes it must put it back."""
        if scenario not in self.nodes:
            self.nodes[scenario] = self._start(scenario, scenario)
        return self.nodes[scenario]

    def fresh(self, scenario: str) -> RealNode:
        """A node of the caller's own (stopped at the end of the session like the others)."""
        key = f"{scenario}-{len(self.nodes)}"
        self.nodes[key] = self._start(scenario, key)
        return self.nodes[key]

    def _start(self, scenario: str, key: str) -> RealNode:
        state, ready = self.base / key, self.base / f"{key}.json"
        log = self.base / f"{key}.log"
        cmd = [str(PVE_API), "serve", "--scenario", str(SCENARIOS / scenario),
               "--state", str(state), "--ready-file", str(ready), "--ssh", "--pvefix", PVEFIX]
        with log.open("w") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 180
        while not ready.exists():
            if proc.poll() is not None:
                lines = log.read_text().strip().splitlines()
                raise NodeFailed(f"pve-api serve {scenario} failed: "
                                 f"{lines[-1] if lines else proc.returncode}")
            if time.monotonic() > deadline:
                proc.terminate()
                raise NodeFailed(f"pve-api serve {scenario}: not ready in 180 s (see {log})")
            time.sleep(0.2)
        time.sleep(0.1)  # the ready file is written whole, but give the writer its close
        return RealNode(key, ready, json.loads(ready.read_text()), state, proc)

    def stop_all(self) -> None:
        """Stop every node at once (each `stop` waits until its processes are gone), bounded:
        a node that does not go within a minute is killed."""
        from concurrent.futures import ThreadPoolExecutor

        def stop(node: RealNode) -> None:
            try:
                subprocess.run([str(PVE_API), "stop", "--state", str(node.state)],
                               capture_output=True, check=False, timeout=60)
                node.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait(timeout=10)

        with ThreadPoolExecutor(max_workers=max(1, len(self.nodes))) as pool:
            list(pool.map(stop, self.nodes.values()))
        self.nodes.clear()


@dataclass(frozen=True)
class Run:
    """One pvefix command's exit status and output."""

    argv: tuple[str, ...]
    rc: int
    out: str
    err: str

    def __str__(self) -> str:
        return (f"pvefix {' '.join(self.argv)} -> exit {self.rc}\n--- stdout\n{self.out[-3000:]}"
                f"\n--- stderr\n{self.err[-3000:]}")


def run_pvefix(args: list[str], home: Path, *, timeout: float = 240) -> Run:
    """`pvefix ARGS` as an admin runs it: the installed script, its own state and config
    folders under `home` (kept between the commands of one flow), 80 columns, no terminal."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PROXMOX_", "PVEFIX_", "PYTEST_"))}
    env.update(XDG_STATE_HOME=str(home / "state"), XDG_CONFIG_HOME=str(home / "config"),
               COLUMNS="80", HOME=str(home))
    done = subprocess.run([PVEFIX, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False, stdin=subprocess.DEVNULL)
    return Run(tuple(args), done.returncode, done.stdout, done.stderr)


def at_once(sides: dict[str, Callable[[], T]]) -> dict[str, T]:
    """Each side's flow (Proxmox's daemons, the simulator: nothing shared) run at the same
    time, so a test costs the slower side's time, not the sum (CI's 30-minute budget); an
    assertion on either side fails the test once both have ended."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(sides)) as pool:
        futures = {name: pool.submit(run) for name, run in sides.items()}
        return {name: future.result() for name, future in futures.items()}
