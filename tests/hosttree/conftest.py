"""Shared fixtures: working copies of built-in scenarios, and a private cache directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvefix.hosttree import HostTree, materialize_scenario


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """resolve_scenario('large') generates into the cache: keep it out of the real home."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def kpro6(tmp_path: Path) -> HostTree:
    """A writable copy of the kpro6 scenario."""
    return materialize_scenario("kpro6", tmp_path / "kpro6")
