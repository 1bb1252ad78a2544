"""A progress bar on stderr, only when stderr is a terminal (CI logs stay clean)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 30


class ProgressBar:
    """Call with (done, total); redraws at most every 50 ms, and always at the end."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self._last = 0.0
        self.shown = False

    @classmethod
    def for_terminal(cls, label: str, stream: TextIO | None = None) -> ProgressBar | None:
        out = stream or sys.stderr
        return cls(label, out) if out.isatty() else None

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < 0.05:
            return
        self._last = now
        filled = WIDTH * done // max(total, 1)
        bar = "#" * filled + "-" * (WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total}")
        self.shown = True
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
