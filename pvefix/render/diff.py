"""Unified diffs of configs and files, as the plan shows them."""

from __future__ import annotations

import difflib

from pvefix.planner.model import Phase, Plan


def unified(before: str, after: str, path: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a{path}", tofile=f"b{path}", n=2)
    out = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return out


def file_diffs(plan: Plan, phase: Phase) -> list[tuple[str, str]]:
    """The whole-file diffs a phase makes, host files then guest files: (label, diff). A guest
    file's diff says so in its header, so it is never mistaken for the host's file."""
    out: list[tuple[str, str]] = []
    host = sorted({c.file for c in phase.changes if c.target == "host-cmdline"})
    for path in host:
        if path in plan.host_files_after:
            out.append((path, unified(plan.host_files_before.get(path, ""),
                                      plan.host_files_after[path], path)))
    guest = sorted({c.file for c in phase.changes if c.target == "guest-cmdline"})
    for path in guest:
        if path in plan.guest_files_after:
            out.append((f"guest {path}", unified(plan.guest_files_before.get(path, ""),
                                                 plan.guest_files_after[path],
                                                 f"{path} (in the guest)")))
    return out
