from __future__ import annotations

import pytest

from tests.shared import shared_path

FIRECRACKER = "fixtures/guest-h200-firecracker/system.txt"


def section(text: str, name: str) -> str:
    """The body of a `### name` section of a captured system.txt (without the header)."""
    lines = text.split("\n")
    start = lines.index(f"### {name}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("### ")), len(lines))
    return "\n".join(lines[start:end]) + "\n"


@pytest.fixture(scope="session")
def firecracker_proc_cmdline() -> str:
    """The real /proc/cmdline of a Firecracker guest with an H200 (has pci=realloc=off and --)."""
    return section(shared_path(FIRECRACKER).read_text(), "proc_cmdline")
