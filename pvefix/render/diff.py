"""Unified diffs of configs and files, as the plan shows them."""

from __future__ import annotations

import difflib


def unified(before: str, after: str, path: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a{path}",
        tofile=f"b{path}",
        n=2,
    )
    out = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return out
