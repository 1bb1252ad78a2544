"""The node side of the target seam: one `Node` for what the executor does on a Proxmox node,
over SSH or on this host (--local), so that nothing outside pvefix.target asks which.

`run(argv, timeout)` honours the caller's time on both (a boot loader refresh asks for 300 s,
more than the connection's --timeout) and reports a command that outlasts it as `timed_out`
(exit status None), never as an exit status of its own. Files are read with `cat` (None when
absent) and replaced atomically (a temporary file beside the target, then a rename; the old
file's mode kept).

`Sessions.host()` (pvefix.target.sessions) hands out the one that fits the connection;
`Sessions.at()` a `ReopeningNode`, what the executor holds: the node asked afresh on each use,
so a session that dropped is opened again. tests/fakes/node.py is an in-memory one for fast
tests of the apply's stages.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from pvefix.errors import PvefixError
from pvefix.target.files import ReplaceFailed
from pvefix.target.result import CommandResult

if TYPE_CHECKING:
    from pvefix.target.local import LocalShell
    from pvefix.target.ssh import SshShell

#: Commands LocalShell does in-process under its root (the file commands and `cat`): they
#: never outlast a timeout, so they keep that path.
_IN_PROCESS = frozenset({"cat", "mkdir", "rm", "cp", "mv"})


class Node(Protocol):
    """A Proxmox node's files and commands, as the executor uses them."""

    @property
    def where(self) -> str:
        """Who answers, for messages ("root@kpro6 (10.0.0.5:22 (ssh.nodes))")."""

    @property
    def watch_stdin(self) -> bool:
        """Whether a long node script should end when its stdin closes (a lost SSH
        connection closes it; a local subprocess has none to watch)."""

    def run(self, argv: Sequence[str], timeout: float | None = None) -> CommandResult:
        """Run an argument list within `timeout` seconds (None: the connection's
        --timeout); past it the result is `timed_out`."""

    def run_many(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]:
        """Independent short reads as one batch (the fact registry's rounds: over SSH one
        channel, framed, pvefix.target.framed), results in order, within the connection's
        --timeout each."""

    def read_file(self, path: str) -> str | None:
        """A file's text, None when it does not exist."""

    def replace_file(self, path: str, text: str) -> None:
        """Replace `path` atomically (raises ReplaceFailed / PvefixError)."""


class SshNode:
    """A node over its SSH session (pvefix.target.ssh.SshShell)."""

    watch_stdin = True

    def __init__(self, shell: SshShell, where: str) -> None:
        self.shell = shell
        self.where = where

    def run(self, argv: Sequence[str], timeout: float | None = None) -> CommandResult:
        return self.shell.execute(argv, timeout)

    def run_many(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]:
        return self.shell.run_batch(commands)

    def read_file(self, path: str) -> str | None:
        return self.shell.read_file(path)

    def replace_file(self, path: str, text: str) -> None:
        self.shell.replace_file(path, text)


class LocalNode:
    """This host (--local): file commands under the local root, other commands as
    subprocesses (pvefix.target.local.LocalShell)."""

    watch_stdin = False

    def __init__(self, shell: LocalShell, where: str) -> None:
        self.shell = shell
        self.where = where

    def run(self, argv: Sequence[str], timeout: float | None = None) -> CommandResult:
        if argv and argv[0] in _IN_PROCESS:
            return self.shell.run(argv)
        return self.shell.execute(argv, timeout)

    def run_many(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]:
        return self.shell.run_many(commands)

    def read_file(self, path: str) -> str | None:
        return self.shell.read_file(path)

    def replace_file(self, path: str, text: str) -> None:
        self.shell.replace_file(path, text)


class ReopeningNode:
    """Node `name` asked afresh on each use (`node`): an SSH session that dropped (network,
    sshd restart, a host reboot) is opened again, so that undo and rollback still reach the
    host; a replace that failed has its temporary file removed, on a new session when that
    one broke. `timeout`: the connection's --timeout, for `run_in_time` and `check`."""

    def __init__(self, name: str, node: Callable[[], Node], timeout: float) -> None:
        self.name = name
        self.node = node
        self.timeout = timeout

    @property
    def where(self) -> str:
        return self.node().where

    @property
    def watch_stdin(self) -> bool:
        return self.node().watch_stdin

    def run(self, argv: Sequence[str], timeout: float | None = None) -> CommandResult:
        return self.node().run(argv, timeout)

    def run_many(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]:
        return self.node().run_many(commands)

    def read_file(self, path: str) -> str | None:
        return self.node().read_file(path)

    def replace_file(self, path: str, text: str) -> None:
        try:
            self.node().replace_file(path, text)
        except ReplaceFailed as exc:
            with contextlib.suppress(Exception):
                self.node().run(["rm", "-f", exc.tmp])
            raise

    def run_in_time(self, argv: Sequence[str], timeout: float | None = None) -> CommandResult:
        """Run one command within `timeout` seconds (None: --timeout); one that outlasts it
        is a PvefixError (a node command that hangs is a failure, not a result). Any exit
        status is returned."""
        node = self.node()
        result = node.run(argv, timeout)
        if result.timed_out:
            seconds = self.timeout if timeout is None else timeout
            raise PvefixError(f"command {shlex.join(argv)!r} on {node.where}: not done within"
                              f" {seconds:g} s" + (" (--timeout)" if timeout is None else ""))
        return result

    def check(self, argv: Sequence[str]) -> CommandResult:
        """Run a command within --timeout and raise, with its stderr, unless it exits 0."""
        result = self.run_in_time(argv)
        if not result.ok:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise PvefixError(f"`{' '.join(argv)}` exited with {result.exit_code}"
                              + (f": {detail[-1]}" if detail else ""), source=self.where)
        return result


if TYPE_CHECKING:  # every implementation conforms (mypy checks it)
    def _ssh(node: SshNode) -> Node:
        return node

    def _local(node: LocalNode) -> Node:
        return node

    def _reopening(node: ReopeningNode) -> Node:
        return node
