"""GRUB files parse in linear time, checked by counting work, not by a clock.

The work (every Python and C function call, counted with sys.setprofile) of reading a file four
times as long must be at most about four times as much: a quadratic step would show as sixteen.
bench/grub_parse.py measures the wall time of 100k-line files.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable

import pytest

from pvefix.cmdline import GrubDefaultFile
from pvefix.cmdline.grubd import GrubConfig
from pvefix.errors import PvefixError
from pvefix.paths import GRUB_D

SHAPES: dict[str, Callable[[int], str]] = {
    "assignments": lambda n: "".join(f'GRUB_CMDLINE_LINUX_DEFAULT="quiet x{i}"\n'
                                     for i in range(n)),
    "comments": lambda n: "# c\n" * n + 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
    "multi-line value": lambda n: 'GRUB_CMDLINE_LINUX_DEFAULT="quiet\n' + "a\n" * n + '"\n',
    "continuations": lambda n: "GRUB_CMDLINE_LINUX_DEFAULT=quiet\\\n" + "a\\\n" * n + "\n",
    "tokens": lambda n: 'GRUB_CMDLINE_LINUX_DEFAULT="' + " ".join(f"t{i}" for i in range(n))
                        + '"\n',
    "duplicates": lambda n: 'GRUB_CMDLINE_LINUX_DEFAULT="' + " ".join(["quiet"] * n) + '"\n',
    "other variables": lambda n: "GRUB_TIMEOUT=5\n" * n,
}


def work(fn: Callable[[], object]) -> int:
    calls = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def read_all(text: str) -> None:
    grub = GrubDefaultFile.parse(text)
    grub.findings()
    config = GrubConfig({"/etc/default/grub": text, f"{GRUB_D}/x.cfg": text})
    config.cmdline  # noqa: B018
    config.where("iommu", "pt")
    # Refusals are fine here (a multi-line value is not rewritten); only the work counts.
    with contextlib.suppress(PvefixError):
        grub.dedupe()
    with contextlib.suppress(PvefixError):
        grub.ensure("iommu", "pt")


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_reading_and_editing_is_linear(shape: str) -> None:
    make = SHAPES[shape]
    small, large = work(lambda: read_all(make(300))), work(lambda: read_all(make(1200)))
    assert large <= 4.6 * small + 2000, f"{shape}: {small} calls for 300, {large} for 1200"
