"""Benchmark: GRUB files of 100k lines, read and edited as `pvefix plan` does.

Run: .venv/bin/python bench/grub_parse.py   (or `make bench`)

Budget (issue 15): a 100k-line /etc/default/grub under a second. "plan" is what the host
cmdline rule does with the file: evaluate it (GrubConfig), lint it, find where a parameter is
set, drop repeats, add `iommu=pt`, and evaluate the edited text again. "+drop-in" reads the same
100k lines a second time as /etc/default/grub.d/x.cfg (200k lines in all). Times are CPU seconds
of this process (time.process_time), best of 3, so other work on the machine inflates them less
than wall time; the load average is printed with them. The test suite checks linearity by
counting work (tests/cmdline/test_grub_linear.py), never with a clock.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pvefix.cmdline import Cmdline, KernelCmdlineFile
from pvefix.cmdline.grubd import GrubConfig
from pvefix.errors import PvefixError
from pvefix.paths import GRUB_D
from tests.cmdline.test_grub_linear import SHAPES, read_all

LINES = 100_000
MAIN = "/etc/default/grub"


def plan_like(text: str) -> None:
    """The host cmdline rule's work on one GRUB file (planner/rules/host_iommu.py)."""
    config = GrubConfig({MAIN: text})
    config.cmdline  # noqa: B018
    config.where("iommu", "pt")
    editor = config.files[MAIN]
    editor.findings()
    with contextlib.suppress(PvefixError):  # a value pvefix will not rewrite is refused
        editor.dedupe()
    with contextlib.suppress(PvefixError):
        editor.ensure("iommu", "pt")
    GrubConfig({MAIN: editor.render()}, parsed=config.files).cmdline  # noqa: B018


def with_dropin(text: str) -> None:
    GrubConfig({MAIN: text, f"{GRUB_D}/x.cfg": text}).cmdline  # noqa: B018
    read_all(text)


def kernel_cmdline(n: int) -> str:
    return "root=ZFS=rpool/ROOT/pve-1 " + " ".join(f"t{i}=v" for i in range(n)) + "\n"


def cpu_best(fn: Callable[[], object], runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def main() -> None:
    load = os.getloadavg()[0]
    print(f"GRUB files of {LINES:,} lines (or tokens); CPU seconds, best of 3; "
          f"load average {load:.2f} on {os.cpu_count()} CPUs")
    print(f"  {'shape':18} {'size':>8}  {'plan':>7}  {'+drop-in':>8}")
    worst = 0.0
    for name in sorted(SHAPES):
        text = SHAPES[name](LINES)
        plan = cpu_best(lambda text=text: plan_like(text))  # type: ignore[misc]
        both = cpu_best(lambda text=text: with_dropin(text), runs=1)  # type: ignore[misc]
        worst = max(worst, plan)
        print(f"  {name:18} {len(text) / 1e6:6.2f} MB  {plan:6.3f}s  {both:7.3f}s")
    line = kernel_cmdline(LINES)
    parsed = cpu_best(lambda: KernelCmdlineFile.parse(line).findings())
    edited = cpu_best(lambda: KernelCmdlineFile.parse(line).ensure("iommu", "pt"))
    tokens = cpu_best(lambda: Cmdline.parse(line).render())
    print(f"  /etc/kernel/cmdline, {LINES:,} tokens: parse+lint {parsed:.3f}s, edit "
          f"{edited:.3f}s; Cmdline.parse+render {tokens:.3f}s")
    print(f"worst plan shape: {worst:.3f}s (budget 1 s)")


if __name__ == "__main__":
    main()
