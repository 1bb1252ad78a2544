"""`timeout -k K SECONDS python3 -c SCRIPT MODE JOB` over the simulated node's SSH: `pvefix
rehearse`'s node script, run for real on this machine, so the simulated node rehearses with the
real QEMU where one is installed (and refuses as a node without QEMU would where none is).

Only pvefix's own node script runs (its text compared in full), with this Python; anything
else answers as a refused command would. It runs without the node lock: a rehearsal takes
seconds and reads nothing of the node's state. stdin stays open while it runs (the script ends
the run when it closes, as sshd closes it when the connection is lost).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from pvefix.rehearse.runner import node_script
from pvefix.sim.commands import Command, Result, Shell


def _timeout(sh: Shell, argv: list[str]) -> Result:
    shape = (len(argv) == 9 and argv[1] == "-k" and argv[4] == "python3" and argv[5] == "-c"
             and argv[2].isdigit() and argv[3].isdigit() and argv[7] in ("facts", "run"))
    if not shape or argv[6] != node_script():
        return Result(stderr="timeout: the pvefix simulator runs only `pvefix rehearse`'s "
                             "node script\n", code=125)
    if shutil.which("timeout") is None:
        return Result(stderr="bash: timeout: command not found\n", code=127)
    cmd = ["timeout", "-k", argv[2], argv[3], sys.executable, "-c", argv[6], argv[7], argv[8]]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    code = proc.wait()
    proc.stdin.close()
    return Result(out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), code)


REHEARSE_COMMANDS: dict[str, Command] = {"timeout": _timeout}
UNLOCKED: frozenset[str] = frozenset(REHEARSE_COMMANDS)
