"""Paths to real captured outputs, and a splitter for the '### name' dumps in ../shared."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.shared import FIXTURES, NEEDS_SHARED

SHARED_GUEST = FIXTURES / "guest-h200-firecracker"
H200_1GPU = Path(__file__).parent / "fixtures" / "h200-1gpu"


def split_sections(text: str) -> dict[str, str]:
    """'### topo -m\\n...' blocks -> {'topo -m': '...'} (the shared fixtures' dump format)."""
    out: dict[str, str] = {}
    name = None
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("### "):
            if name is not None:
                out[name] = "".join(lines)
            name, lines = line[4:].strip(), []
        else:
            lines.append(line)
    if name is not None:
        out[name] = "".join(lines)
    return out


@pytest.fixture
def shared_guest() -> Callable[[str], dict[str, str]]:
    """Sections of one file of the real H200 guest capture in ../shared/fixtures."""
    if not SHARED_GUEST.is_dir():
        pytest.skip(f"{NEEDS_SHARED}: fixtures not present at {SHARED_GUEST}")

    def read(name: str) -> dict[str, str]:
        return split_sections((SHARED_GUEST / name).read_text(encoding="utf-8"))

    return read


@pytest.fixture
def h200() -> Path:
    """Folder of raw outputs captured on the lent one-GPU H200 machine."""
    return H200_1GPU
