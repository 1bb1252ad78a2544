"""Where a file step writes: a node or a guest, behind one small interface.

`FileTarget` is what FileStep and RefreshStep (pvefix.executor.steps) need of either side:
read a file (None when absent), replace one (a temporary file beside it, then a rename, the
mode kept), run an argument list. `NodeFiles` and `GuestFiles` are thin adapters over today's
node remote and guest channel; `check` is the one "run, and raise with its stderr unless it
exits 0" for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from pvefix.errors import PvefixError
from pvefix.executor.remote import Remote
from pvefix.verify.channel import ExecResult, GuestChannel
from pvefix.verify.guest_files import (
    FILE_TIMEOUT_S,
    REFRESH_TIMEOUT_S,
    read_guest_file,
    replace_guest_file,
)

__all__ = ["FILE_TIMEOUT_S", "REFRESH_TIMEOUT_S", "FileTarget", "GuestFiles", "NodeFiles",
           "Side", "check"]

Side = Literal["host", "guest"]


class CommandOutcome(Protocol):
    """What a command did, on either side."""

    @property
    def exit_code(self) -> int | None: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...
    @property
    def timed_out(self) -> bool: ...
    @property
    def ok(self) -> bool: ...


class FileTarget(Protocol):
    """A node or a guest, as file steps see it."""

    @property
    def side(self) -> Side: ...

    @property
    def where(self) -> str:
        """Who answers, for error messages ("root@kpro6 (10.0.0.5)", "QEMU guest agent ...")."""

    def read_file(self, path: str) -> str | None: ...

    def replace_file(self, path: str, text: str) -> None: ...

    def run(self, argv: Sequence[str], timeout: float) -> CommandOutcome: ...


def check(target: FileTarget, argv: Sequence[str],
          timeout: float = FILE_TIMEOUT_S) -> CommandOutcome:
    """Run `argv` on the target; PvefixError with its last stderr line unless it exits 0."""
    result = target.run(argv, timeout)
    if result.timed_out:
        raise PvefixError(f"`{' '.join(argv)}` did not finish within {timeout:g} s",
                          source=target.where)
    if not result.ok:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise PvefixError(f"`{' '.join(argv)}` exited with {result.exit_code}"
                          + (f": {detail[-1][:300]}" if detail else ""), source=target.where)
    return result


class NodeFiles:
    """A node over SSH (pvefix.executor.remote.Remote). Its commands run under the SSH
    session's own timeout."""

    side: Side = "host"

    def __init__(self, remote: Remote) -> None:
        self.remote = remote

    @property
    def where(self) -> str:
        remote = self.remote
        return f"{remote.conn.ssh_user}@{remote.node} ({remote.address()})"

    def read_file(self, path: str) -> str | None:
        return self.remote.read_file(path)

    def replace_file(self, path: str, text: str) -> None:
        self.remote.write_file(path, text)

    def run(self, argv: Sequence[str], timeout: float) -> CommandOutcome:
        result = self.remote.run(argv)
        return ExecResult(argv=result.argv, exit_code=result.exit_code, stdout=result.stdout,
                          stderr=result.stderr)


class GuestFiles:
    """A guest through its channel (QEMU guest agent or SSH, pvefix.verify)."""

    side: Side = "guest"

    def __init__(self, channel: GuestChannel) -> None:
        self.channel = channel

    @property
    def where(self) -> str:
        return self.channel.where

    def read_file(self, path: str) -> str | None:
        return read_guest_file(self.channel, path)

    def replace_file(self, path: str, text: str) -> None:
        replace_guest_file(self.channel, path, text)

    def run(self, argv: Sequence[str], timeout: float) -> CommandOutcome:
        return self.channel.run(argv, timeout)
