"""Where a file step writes: a node or a guest, behind one small interface.

`FileTarget` is what FileStep and RefreshStep (pvefix.executor.steps) need of either side:
read a file (None when absent), replace one (a temporary file beside it, then a rename, the
mode kept), run an argument list within a time. `NodeFiles` and `GuestFiles` are thin
adapters over a node (pvefix.target.node.Node) and a guest channel (each guest channel reads
and replaces files its own way);
`check` (pvefix.target.guest.channel) is the one "run, and raise with its stderr unless it
exits 0" for both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from pvefix.target.guest.channel import FILE_TIMEOUT_S, REFRESH_TIMEOUT_S, GuestChannel, check
from pvefix.target.node import Node, replace_file
from pvefix.target.result import CommandResult

__all__ = ["FILE_TIMEOUT_S", "REFRESH_TIMEOUT_S", "FileTarget", "GuestFiles", "NodeFiles",
           "Side", "check"]

Side = Literal["host", "guest"]


class FileTarget(Protocol):
    """A node or a guest, as file steps see it (also a `Runs`, so `check` takes it)."""

    @property
    def side(self) -> Side: ...

    @property
    def where(self) -> str:
        """Who answers, for error messages ("root@kpro6 (10.0.0.5)", "QEMU guest agent ...")."""

    def read_file(self, path: str) -> str | None: ...

    def replace_file(self, path: str, text: str) -> None: ...

    def run(self, argv: Sequence[str], timeout: float) -> CommandResult: ...


class NodeFiles:
    """A node (pvefix.target.node.Node: SSH, or this host with --local). Its commands run
    within the time the step asks for (a boot loader refresh: REFRESH_TIMEOUT_S)."""

    side: Side = "host"

    def __init__(self, node: Callable[[], Node]) -> None:
        self.node = node  # asked on each use: a session that dropped is opened again

    @property
    def where(self) -> str:
        return self.node().where

    def read_file(self, path: str) -> str | None:
        return self.node().read_file(path)

    def replace_file(self, path: str, text: str) -> None:
        replace_file(self.node, path, text)

    def run(self, argv: Sequence[str], timeout: float) -> CommandResult:
        return self.node().run(argv, timeout)


class GuestFiles:
    """A guest through its channel (QEMU guest agent or SSH, pvefix.target.guest)."""

    side: Side = "guest"

    def __init__(self, channel: GuestChannel) -> None:
        self.channel = channel

    @property
    def where(self) -> str:
        return self.channel.where

    def read_file(self, path: str) -> str | None:
        return self.channel.read_file(path)

    def replace_file(self, path: str, text: str) -> None:
        self.channel.replace_file(path, text)

    def run(self, argv: Sequence[str], timeout: float) -> CommandResult:
        return self.channel.run(argv, timeout)
