"""One apply or rollback per VM at a time: a second one is refused naming who holds the VM;
a lock whose process is gone is cleared; the locks are released when the apply ends."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.errors import EXIT_REFUSED, RefusedError
from tests.executor.conftest import Captured, Node


def _holder(pid: int, host: str | None = None) -> str:
    return json.dumps({"host": host or socket.gethostname(), "pid": pid, "user": "alice",
                       "action": "apply phase 1", "since": time.time()})


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def test_a_second_apply_is_refused_while_another_holds_the_vm(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    locks = n.state_dir / "locks"
    locks.mkdir(parents=True)
    lock = locks / "kpro6-100.lock"
    lock.write_text(_holder(os.getpid()))
    before = n.fingerprint(100)
    with lock.open("r") as held, pytest.raises(RefusedError) as caught:
        fcntl.flock(held, fcntl.LOCK_EX)  # a running pvefix holds the file locked
        n.apply(100, 1)
    assert caught.value.exit_code == EXIT_REFUSED
    assert "another pvefix is changing this VM: apply phase 1 by alice" in str(caught.value)
    assert n.fingerprint(100) == before


def test_a_lock_on_the_node_from_another_machine_is_named_with_how_to_clear_it(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    folder = "/run/pvefix/vm-100.lock"
    n.sim.state.write_host(f"{folder}/owner", _holder(4242, host="admin-laptop"))
    with pytest.raises(RefusedError) as caught:
        n.apply(100, 1)
    message = str(caught.value)
    assert "on node kpro6: apply phase 1 by alice on admin-laptop (pid 4242)" in message
    assert f"rm -r {folder}" in message
    assert not (n.state_dir / "locks" / "kpro6-100.lock").exists(), "the local lock is released"


def test_locks_of_a_process_that_is_gone_are_cleared_and_the_apply_goes_on(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    dead = _dead_pid()
    locks = n.state_dir / "locks"
    locks.mkdir(parents=True)
    (locks / "kpro6-100.lock").write_text(_holder(dead))
    n.sim.state.write_host("/run/pvefix/vm-100.lock/owner", _holder(dead))
    cap = Captured()
    n.apply(100, 1, captured=cap)
    err = cap.err.getvalue()
    assert "cleared a stale local lock" in err and "cleared a stale lock on the node" in err
    assert not (locks / "kpro6-100.lock").exists()
    assert n.host_file("/run/pvefix/vm-100.lock/owner") is None
    assert isinstance(n.state_dir, Path)
