"""An in-memory Node (pvefix.target.node.Node) for fast tests of the apply's stages: files
in a dict (`rm -f` and `cp -p` act on it), other commands answered from a script (argv ->
CommandResult, or a function of the call), every call recorded with the time it was given.
Nothing here knows Proxmox: what a command does is what the test scripts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pvefix.target.result import CommandResult

Answer = CommandResult | Callable[["FakeNode", tuple[str, ...], float | None], CommandResult]


@dataclass
class FakeNode:
    """Files and scripted commands; `calls` lists (argv, timeout) in order."""

    files: dict[str, str] = field(default_factory=dict)
    answers: dict[tuple[str, ...], Answer] = field(default_factory=dict)
    calls: list[tuple[tuple[str, ...], float | None]] = field(default_factory=list)
    where: str = "root@fake (in memory)"
    watch_stdin: bool = False

    def run(self, argv: Sequence[str], timeout: float | None = None) -> CommandResult:
        args = tuple(argv)
        self.calls.append((args, timeout))
        if args[:2] == ("rm", "-f"):
            for path in args[2:]:
                self.files.pop(path, None)
            return CommandResult(args, 0, "", "")
        if args[:2] == ("cp", "-p") and len(args) == 4 and args[2] in self.files:
            self.files[args[3]] = self.files[args[2]]
            return CommandResult(args, 0, "", "")
        answer = self.answers.get(args)
        if answer is None:
            return CommandResult(args, 127, "", f"{args[0]}: not scripted in this test\n")
        return answer if isinstance(answer, CommandResult) else answer(self, args, timeout)

    def run_many(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]:
        return [self.run(argv) for argv in commands]

    def read_file(self, path: str) -> str | None:
        return self.files.get(path)

    def replace_file(self, path: str, text: str) -> None:
        self.files[path] = text

    def commands(self) -> list[tuple[str, ...]]:
        return [argv for argv, _ in self.calls]


def takes(*seconds: float) -> Answer:
    """A command that needs `seconds` (the next value on each call, the last one after):
    timed out when the caller gave it less, else exit 0."""
    left = list(seconds)

    def answer(node: FakeNode, argv: tuple[str, ...], timeout: float | None) -> CommandResult:
        need = left.pop(0) if len(left) > 1 else left[0]
        if timeout is not None and timeout < need:
            return CommandResult(argv, None, "", "", timed_out=True)
        return CommandResult(argv, 0, "", "")

    return answer
