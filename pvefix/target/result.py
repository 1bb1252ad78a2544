"""What a command did, on a node (SSH or the local backend) or in a guest (SSH or the QEMU
guest agent): one type for all of them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CommandResult:
    """A command's argument list, output and exit status (None when it has none: it timed
    out, or a signal ended it where no status is reported)."""

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out
