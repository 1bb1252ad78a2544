"""The seam between a guest and pvefix: what every way into a guest offers.

`GuestChannel` is upload a file, run an argument list, read a file, replace a file, close. The
agent (pvefix.target.guest.agent) and SSH (pvefix.target.guest.ssh) implement it; the probe,
the guest reads and the executor's guest file steps use only this. Every command is an
argument list; SSH quotes it with shlex.join, the agent passes it as its command array.

Reads are `cat PATH` on both channels (a missing file reads as None). Replacing a file never
leaves half a file behind: the new text goes to a temporary file beside the target, which is
then renamed over it (each channel says how it keeps the old file's mode).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from typing import Protocol

from pvefix.errors import PvefixError
from pvefix.target.files import FILE_TIMEOUT_S, cat_text, temp_path
from pvefix.target.result import CommandResult

__all__ = ["FILE_TIMEOUT_S", "REFRESH_TIMEOUT_S", "Files", "GuestChannel", "Runs", "cat_file",
           "check", "remove_quietly", "remove_temp", "temp_path"]

#: Seconds a boot loader refresh may take (update-grub scans every kernel).
REFRESH_TIMEOUT_S = 300.0


class Runs(Protocol):
    """Anything that runs an argument list and says who answers (a guest, a node's files)."""

    @property
    def where(self) -> str: ...

    def run(self, argv: Sequence[str], timeout: float) -> CommandResult: ...


class Files(Runs, Protocol):
    """A node or a guest as a file step sees it (pvefix.executor.steps): read a file (None when
    absent), replace one (a temporary file beside it, then a rename, the mode kept), run an
    argument list within a time. A node (pvefix.target.node.Node) and every GuestChannel are."""

    def read_file(self, path: str) -> str | None: ...

    def replace_file(self, path: str, text: str) -> None: ...


class GuestChannel(Protocol):
    """A way into a guest: files and commands."""

    where: str

    def upload(self, path: str, data: bytes) -> None: ...

    def run(self, argv: Sequence[str], timeout: float) -> CommandResult: ...

    def read_file(self, path: str) -> str | None:
        """A guest file's text (None when it does not exist)."""

    def replace_file(self, path: str, text: str) -> None:
        """Replace `path` with `text`: a temporary file, then a rename; the mode kept."""

    def close(self) -> None: ...


def check(target: Runs, argv: Sequence[str], timeout: float = FILE_TIMEOUT_S) -> CommandResult:
    """Run `argv`; PvefixError with its last stderr line unless it exits 0 in time."""
    result = target.run(argv, timeout)
    if result.timed_out:
        raise PvefixError(f"`{' '.join(argv)}` did not finish within {timeout:g} s",
                          source=target.where)
    if not result.ok:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise PvefixError(f"`{' '.join(argv)}` exited with {result.exit_code}"
                          + (f": {detail[-1][:300]}" if detail else ""), source=target.where)
    return result


def cat_file(channel: Runs, path: str) -> str | None:
    """`cat PATH` in the guest: its text, None when the file does not exist."""
    return cat_text(channel.run(["cat", path], FILE_TIMEOUT_S), path, channel.where)


def remove_temp(channel: Runs, tmp: str) -> None:
    """Remove a temporary file after a failed replace (a failure here changes nothing)."""
    with contextlib.suppress(PvefixError):
        channel.run(["rm", "-f", tmp], FILE_TIMEOUT_S)


def remove_quietly(channel: Runs, paths: Sequence[str]) -> None:
    """`rm -f PATHS` in the guest; a failure is a warning (what was read is still good)."""
    try:
        done = channel.run(["rm", "-f", *paths], 60.0)
        problem = None if done.ok else done.stderr.strip()[:200] or f"exit {done.exit_code}"
    except PvefixError as exc:
        problem = str(exc)
    if problem:
        print(f"pvefix: warning: could not remove {' '.join(paths)} in the guest "
              f"({channel.where}): {problem}", file=sys.stderr)
