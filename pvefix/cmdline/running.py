"""What the running kernel's /proc/cmdline says of a cmdline change: the tokens it lacks, and
those it still has, after a host (or guest) reboot."""

from __future__ import annotations

from collections.abc import Iterable


def cmdline_problems(proc: str, changes: Iterable[tuple[str | None, str | None]]) -> list[str]:
    """What /proc/cmdline lacks (or still has) for these (before, after) cmdline changes."""
    running = set(proc.split())
    problems = []
    for before, after in changes:
        old, new = set((before or "").split()), set((after or "").split())
        missing = sorted(new - old - running)
        stale = sorted((old - new) & running)
        if missing:
            problems.append("/proc/cmdline lacks " + " ".join(missing))
        if stale:
            problems.append("/proc/cmdline still has " + " ".join(stale))
    return problems
