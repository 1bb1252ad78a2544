"""`python3 /tmp/NAME.pyz ARGS` over the simulated node's SSH, for `pvefix verify`'s SSH path.

Only a zipapp uploaded (by SFTP) directly into the host tree's /tmp runs, for real, isolated
and without site-packages; anything else answers as a missing program would. It runs without
the node lock: a probe takes seconds and reads nothing of the node's state.
"""

from __future__ import annotations

from pvefix.sim.commands import Command, Result, Shell
from pvefix.sim.guest import GuestRefused, run_host_pyz


def _python3(sh: Shell, argv: list[str]) -> Result:
    if len(argv) < 2 or not argv[1].endswith(".pyz"):
        return Result(stderr="python3: the pvefix simulator runs only "
                             "`python3 /tmp/NAME.pyz [ARGS]`\n", code=2)
    try:
        code, out, err = run_host_pyz(sh.state.tree.root / "tmp", sh.host(argv[1]), argv[2:])
    except GuestRefused as exc:
        return Result(stderr=f"python3: {exc}\n", code=2)
    return Result(out.decode("utf-8", "surrogateescape"), err.decode("utf-8", "surrogateescape"),
                  code)


GUEST_COMMANDS: dict[str, Command] = {"python3": _python3}
UNLOCKED: frozenset[str] = frozenset(GUEST_COMMANDS)
