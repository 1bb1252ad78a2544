from __future__ import annotations

from pathlib import Path

import pytest

from tests.shared import CORPUS, SHARED, shared_path

__all__ = ["CORPUS", "SHARED"]


@pytest.fixture(scope="session")
def corpus() -> Path:
    return shared_path("corpus/qemu-server")
