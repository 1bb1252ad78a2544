"""Simulated kpro6 nodes whose VM 100 (8 x RTX PRO 6000, i440fx, a 40-bit CPU) runs with a
QEMU guest agent, so pvefix can read and change its guest."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pvefix.sim.serve import Simulator, write_ready_file
from pvefix.target.guest.access import GuestAccess
from tests.executor.conftest import Node
from tests.simkit import api, wait_task

VMID = 100
AGENT = GuestAccess(method="agent")


def give_agent(node: Node, vmid: int = VMID) -> None:
    """`agent: 1` takes effect at a cold start: stop the VM, set it, start it again."""
    prox = api(node.info, "ticket")
    vm = prox.nodes(node.info.node).qemu(vmid)
    if vm.status.current.get()["status"] == "running":
        wait_task(prox, vm.status.stop.post())
    vm.config.put(agent="1")
    wait_task(prox, vm.status.start.post())


def guest_root(node: Node, vmid: int = VMID) -> Path:
    """The simulated guest's files on this machine (etc/default/grub, proc/cmdline, ...).
    The simulator makes a guest's tree on first use, so a test that looks before anything
    reached the guest (it may run first on its xdist worker) reaches it through the agent."""
    root = Path(node.info.root) / ".pvefix-sim" / "guests" / str(vmid)
    if not (root / "etc" / "default" / "grub").exists():
        from pvefix.target.open import open_guest

        channel = open_guest(node.conn(), AGENT, vmid)
        try:
            channel.read_file("/etc/default/grub")
        finally:
            channel.close()
    return root


def start_node(root: Path, state: Path) -> tuple[Simulator, Node]:
    sim = Simulator("kpro6", root, task_seconds=0.02)
    sim.state.tree.meta.reboot_seconds = 0.3
    info = sim.start()
    ready = root.parent / f"{root.name}-ready.json"
    write_ready_file(info, ready)
    node = Node(sim, info, state, ready)
    give_agent(node)
    return sim, node


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """One kpro6 node for the tests of a module that only read, or restore what they change."""
    base = tmp_path_factory.mktemp("guest-node")
    sim, node = start_node(base / "kpro6", base / "state")
    yield node
    sim.stop()


@pytest.fixture
def own_node(tmp_path: Path) -> Iterator[Callable[..., Node]]:
    """A node of the test's own (for tests that leave it changed)."""
    sims: list[Simulator] = []

    def start(**_: Any) -> Node:
        sim, node = start_node(tmp_path / f"kpro6-{len(sims)}", tmp_path / "state")
        sims.append(sim)
        return node

    yield start
    for sim in sims:
        sim.stop()
