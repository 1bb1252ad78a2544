"""Fixtures of the simulator's own tests (shared ones live in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pvefix.sim.serve import ReadyInfo
from tests.simkit import api


@pytest.fixture(scope="session")
def node(kpro6_sim: ReadyInfo) -> str:
    return kpro6_sim.node


@pytest.fixture
def own(fresh_sim: Callable[..., ReadyInfo]) -> Callable[..., tuple[ReadyInfo, Any, Any]]:
    """A simulator of this test's own: (info, token client, ticket client)."""

    def make(scenario: str = "kpro6", **options: Any) -> tuple[ReadyInfo, Any, Any]:
        info = fresh_sim(scenario, **options)
        return info, api(info, "token"), api(info, "ticket")

    return make
