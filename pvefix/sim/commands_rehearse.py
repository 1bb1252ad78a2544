"""`timeout -k K SECONDS python3 -c SCRIPT MODE JOB` over the simulated node's SSH: `pvefix
rehearse`'s node script, run for real on this machine, so the simulated node rehearses with the
real QEMU where one is installed (and refuses as a node without QEMU would where none is).

Only pvefix's own node script runs (its text compared in full), with this Python; anything
else answers as a refused command would. Each simulated node's runs take a rehearsal lock of
that node's own (PVEFIX_REHEARSE_LOCK_DIR, a folder per node beside the simulator's tree), as
each real node has its own /run/lock: the nodes of one simulated cluster rehearse at once, two
runs on one node do not. It runs without the simulator's node lock: a rehearsal takes
seconds and reads nothing of the node's state. stdin stays open while it runs and is closed
when the client's SSH connection goes away (`client_gone`, set by the SSH server per exec), as
sshd closes it: the script then ends the run, kills QEMU and removes its folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pvefix.rehearse.node_script import LOCK_DIR_ENV
from pvefix.rehearse.runner import node_script
from pvefix.sim.commands import Command, Result, Shell

_GONE: dict[int, Callable[[], bool]] = {}  # thread -> its exec's "has the client gone?" test


@contextmanager
def client_gone(test: Callable[[], bool]) -> Iterator[None]:
    """While an exec request runs: `test()` says whether its client has disconnected."""
    _GONE[threading.get_ident()] = test
    try:
        yield
    finally:
        _GONE.pop(threading.get_ident(), None)


def _watch(proc: subprocess.Popen[bytes], gone: Callable[[], bool] | None) -> None:
    """Close the script's stdin once the client is gone (as sshd does)."""
    while gone is not None and proc.poll() is None:
        if gone():
            assert proc.stdin is not None
            proc.stdin.close()
            return
        time.sleep(0.2)


def _lock_dir(sh: Shell) -> Path:
    """The simulated node's lock folder (made on first use), outside its host tree."""
    folder = sh.state.tree.root.parent / f".rehearse-lock-{sh.state.node}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def _timeout(sh: Shell, argv: list[str]) -> Result:
    shape = (len(argv) == 9 and argv[1] == "-k" and argv[4] == "python3" and argv[5] == "-c"
             and argv[2].isdigit() and argv[3].isdigit() and argv[7] in ("facts", "run"))
    if not shape or argv[6] != node_script():
        return Result(stderr="timeout: the pvefix simulator runs only `pvefix rehearse`'s "
                             "node script\n", code=125)
    if shutil.which("timeout") is None:
        return Result(stderr="bash: timeout: command not found\n", code=127)
    cmd = ["timeout", "-k", argv[2], argv[3], sys.executable, "-c", argv[6], argv[7], argv[8]]
    env = {**os.environ, LOCK_DIR_ENV: str(_lock_dir(sh))}
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    watcher = threading.Thread(target=_watch, args=(proc, _GONE.get(threading.get_ident())),
                               daemon=True)
    watcher.start()
    assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
    out = proc.stdout.read()  # not communicate(): it would close stdin at once
    err = proc.stderr.read()
    code = proc.wait()
    watcher.join()
    if not proc.stdin.closed:
        proc.stdin.close()
    return Result(out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), code)


REHEARSE_COMMANDS: dict[str, Command] = {"timeout": _timeout}
UNLOCKED: frozenset[str] = frozenset(REHEARSE_COMMANDS)
