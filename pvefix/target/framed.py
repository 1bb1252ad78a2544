"""Several short commands on one SSH channel, each with its own output and exit status.

A channel costs a round of SSH messages on both sides (open, confirm, exec, data, EOF, exit
status, close: ~2 ms of the client's CPU in paramiko, and as much on the node). Reading a
node's host facts took five (hostname, three files, `proxmox-boot-tool status`); one `sh -c`
script runs them in turn and writes a marker after each command, on stdout with `$?` and on
stderr without, so both streams split back into the commands' own. The marker carries a nonce
drawn per script (`secrets`): text a command prints cannot end a frame early unless it guesses
128 random bits. Each command is quoted with `shlex.join` inside the script, and the script is
one argument of `sh -c`, quoted again by the shell that runs it: an argument list all the way.

Only for commands that are independent, short and read-only: they run one after another, in
the order given, and a command that hangs holds the ones after it.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Sequence

from pvefix.errors import PvefixError
from pvefix.target.result import CommandResult

_PREFIX = "@@pvefix-frame"
# The script is one argument of `sh -c`: Linux takes at most 128 KiB in one (MAX_ARG_STRLEN).
MAX_SCRIPT = 96 * 1024


def fits(commands: Sequence[Sequence[str]]) -> bool:
    """Whether the commands framed stay one exec's command line (markers counted)."""
    return sum(len(shlex.join(argv)) + 2 * len(_PREFIX) + 120 for argv in commands) \
        <= MAX_SCRIPT


def new_nonce() -> str:
    return secrets.token_hex(16)


def framed_argv(commands: Sequence[Sequence[str]], nonce: str) -> list[str]:
    """`sh -c SCRIPT`: each command, then its marker on stdout (with `$?`) and on stderr."""
    if not re.fullmatch(r"[0-9a-f]{8,64}", nonce):
        raise ValueError("the nonce is hex digits (8 to 64)")
    steps = []
    for index, argv in enumerate(commands):
        if not argv:
            raise ValueError("an empty command cannot be framed")
        marker = f"{_PREFIX}:{nonce}:{index}"
        steps.append(f"{shlex.join(argv)}; echo {marker}:$?; echo {marker} >&2")
    return ["sh", "-c", "; ".join(steps)]


def unframe(commands: Sequence[Sequence[str]], nonce: str, result: CommandResult,
            where: str = "the node") -> list[CommandResult]:
    """The commands' own results from the framed script's one result. A frame that is
    missing (the script was cut short, a shell that is not sh) is a PvefixError."""
    out: list[CommandResult] = []
    stdout, stderr = result.stdout, result.stderr
    out_at = err_at = 0
    for index, argv in enumerate(commands):
        marker = f"{_PREFIX}:{nonce}:{index}"
        end = stdout.find(f"{marker}:", out_at)
        status_end = stdout.find("\n", end) if end >= 0 else -1
        err_end = stderr.find(f"{marker}\n", err_at)
        status = stdout[end + len(marker) + 1:status_end] if status_end >= 0 else ""
        if end < 0 or status_end < 0 or err_end < 0 or not status.isdigit():
            raise PvefixError(
                f"the framed commands on {where} stopped before `{shlex.join(argv)}` reported "
                f"(exit {result.exit_code}"
                f"{', timed out' if result.timed_out else ''}): {stderr[err_at:][:200]!r}")
        out.append(CommandResult(tuple(argv), int(status), stdout[out_at:end],
                                 stderr[err_at:err_end]))
        out_at = status_end + 1
        err_at = err_end + len(marker) + 1
    return out
