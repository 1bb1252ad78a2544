"""The one seam through which the probe runs programs: argv in, text out, bounded in time.

Tests pass a fake runner; the real one never raises for a missing program, a non-zero exit
or a timeout, it says which in the result.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CommandResult:
    """What a program did: its exit status and output, or why it did not run to the end."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    missing: bool = False
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.missing and not self.timed_out

    def why(self) -> str:
        """A short reason this result is not usable (or 'ok')."""
        if self.missing:
            return "not found"
        if self.timed_out:
            return "timed out"
        if self.returncode != 0:
            first = (self.stderr.strip() or self.stdout.strip()).splitlines()[:1]
            detail = f": {first[0][:200]}" if first else ""
            return f"exit status {self.returncode}{detail}"
        return "ok"


class CommandRunner(Protocol):
    def __call__(
        self, argv: list[str], timeout: float, env: Mapping[str, str] | None = None
    ) -> CommandResult: ...


def run_command(argv: list[str], timeout: float,
                env: Mapping[str, str] | None = None) -> CommandResult:
    """Run `argv` with a timeout; its whole process group is killed when the time is up."""
    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None, text=True, errors="replace",
            start_new_session=True,  # so a timeout can end the children it started too
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError):
        return CommandResult(tuple(argv), None, missing=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return CommandResult(tuple(argv), proc.returncode, out, err, timed_out=True)
    return CommandResult(tuple(argv), proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        proc.kill()
