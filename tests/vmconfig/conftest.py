from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("PVEFIX_SHARED", Path(__file__).resolve().parents[3] / "shared"))
CORPUS = SHARED / "corpus" / "qemu-server"


@pytest.fixture(scope="session")
def corpus() -> Path:
    assert CORPUS.is_dir(), f"the Proxmox corpus is missing at {CORPUS} (set PVEFIX_SHARED)"
    return CORPUS
