"""A host reboot that stops other running VMs (`apply --reboot-host --stop-others`) is
confirmed by typing the node's name, as terraform asks for a typed `yes`: a `y` typed out of
habit refuses, so does a missing terminal; `--yes` still applies without asking. `pvefix apply`
runs as its own process, its stdin a terminal (a pty) the test types into."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pvefix.errors import EXIT_OK, EXIT_REFUSED
from tests.executor.conftest import Node
from tests.simkit import api, wait_task

REPO = Path(__file__).resolve().parents[2]


def _apply_typing(n: Node, typed: bytes | None, *extra: str) -> subprocess.CompletedProcess[str]:
    """`pvefix apply 100 --phase 2 --reboot-host --stop-others` with `typed` at its terminal
    (None: stdin is not a terminal)."""
    argv = [sys.executable, "-m", "pvefix", "apply", "100", "--phase", "2", "--reboot-host",
            "--stop-others", "--connection", str(n.ready_file), "--state-dir", str(n.state_dir),
            *extra]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if typed is None:
        return subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=120, check=False)
    leader, follower = pty.openpty()
    os.write(leader, typed)
    try:
        return subprocess.run(argv, env=env, stdin=follower, capture_output=True, text=True,
                              timeout=120, check=False)
    finally:
        os.close(follower)
        os.close(leader)


def _with_neighbour(node: Callable[..., Node]) -> Node:
    n = node("kpro6")
    prox = api(n.info, "ticket")
    wait_task(prox, prox.nodes(n.info.node).qemu(101).status.start.post())
    assert n.sim.state.run_state(101).status == "running"
    return n


def test_y_or_no_terminal_refuses_and_only_the_typed_node_name_reboots(
    node: Callable[..., Node]
) -> None:
    n = _with_neighbour(node)
    before = n.fingerprint(100)
    habit = _apply_typing(n, b"y\n")
    assert habit.returncode == EXIT_REFUSED, habit.stderr
    assert "Type kpro6 to confirm (anything else refuses):" in habit.stderr
    assert "The host reboot also stops VM 101 on node kpro6" in habit.stderr
    assert "not confirmed: the node's name (kpro6) was not typed; nothing was written" in (
        habit.stderr)
    unattended = _apply_typing(n, None)
    assert unattended.returncode == EXIT_REFUSED, unattended.stderr
    assert "stdin is not a terminal" in unattended.stderr
    assert "--yes to apply without asking" in unattended.stderr
    assert n.fingerprint(100) == before, "nothing was written"
    assert n.sim.state.run_state(101).status == "running", "the neighbour was not stopped"

    typed = _apply_typing(n, b"kpro6\n")
    assert typed.returncode == EXIT_OK, typed.stderr
    assert "activated: host kpro6 rebooted" in typed.stdout
    assert n.fingerprint(100) != before
    assert n.sim.state.run_state(101).status == "running", "started again after the reboot"


def test_yes_still_applies_without_asking(node: Callable[..., Node]) -> None:
    n = _with_neighbour(node)
    done = _apply_typing(n, None, "--yes")
    assert done.returncode == EXIT_OK, done.stderr
    assert "Type kpro6" not in done.stderr
    assert "activated: VM 101 up again" in done.stdout
