"""Benchmark: GRUB files of 100k lines, read, linted, evaluated with a drop-in and edited.

Run: .venv/bin/python bench/grub_parse.py   (or `make bench`)
Budget (issue 15): a 100k-line /etc/default/grub under a second for the plain shapes
(comments, other variables, assignments); the test suite checks linearity by counting work
(tests/cmdline/test_grub_linear.py), never with a clock.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cmdline.test_grub_linear import SHAPES, read_all

LINES = 100_000


def main() -> None:
    print(f"GRUB parsing, {LINES:,} lines (or tokens) per file; read + lint + evaluate + edit")
    for name in sorted(SHAPES):
        text = SHAPES[name](LINES)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            read_all(text)
            best = min(best, time.perf_counter() - t0)
        print(f"  {name:18} {len(text) / 1e6:6.2f} MB  {best:6.3f} s")


if __name__ == "__main__":
    main()
