"""Fixtures of the conformance tests: Proxmox VE's own API daemons (tests/realapi.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.realapi import NodeFailed, PveApiNodes, RealNode, harness_missing


class Nodes:
    """What a test asks for: `pve_api.node("kpro6")` (shared, put it back) or `.fresh(...)`."""

    def __init__(self, nodes: PveApiNodes) -> None:
        self._nodes = nodes

    def node(self, scenario: str) -> RealNode:
        try:
            return self._nodes.node(scenario)
        except NodeFailed as exc:
            pytest.fail(str(exc))

    def fresh(self, scenario: str) -> RealNode:
        try:
            return self._nodes.fresh(scenario)
        except NodeFailed as exc:
            pytest.fail(str(exc))


@pytest.fixture(scope="session")
def pve_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    """Proxmox VE's own pveproxy/pvedaemon/pvestatd (../shared/pve-api), one node per scenario
    for the whole session; skips, saying why, where they cannot run here."""
    why = harness_missing()
    if why:
        pytest.skip(why)
    nodes = PveApiNodes(tmp_path_factory.mktemp("pve-api"))
    yield Nodes(nodes)
    nodes.stop_all()
