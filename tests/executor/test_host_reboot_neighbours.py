"""A host reboot stops every VM on the node: pvefix lists them, refuses while another VM runs or
any is locked (unless --stop-others), never stops a locked one, and brings back every VM that
ran. A stopped VM restarted for its config stays stopped unless --start."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pvefix.errors import EXIT_REFUSED, RefusedError
from tests.executor.conftest import Captured, Node
from tests.simkit import api, wait_task


def _start(n: Node, vmid: int) -> None:
    prox = api(n.info, "ticket")
    assert wait_task(prox, prox.nodes(n.info.node).qemu(vmid).status.start.post())[
        "exitstatus"].startswith(("OK", "WARNINGS"))


def test_a_host_reboot_is_refused_while_another_vm_runs(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    _start(n, 101)
    before = n.fingerprint(100)
    cap = Captured()
    with pytest.raises(RefusedError) as caught:
        n.apply(100, 2, reboot_host=True, captured=cap)
    message = str(caught.value)
    assert caught.value.exit_code == EXIT_REFUSED
    assert "other VMs run: VM 101" in message and "--stop-others" in message
    # The node's VMs are listed once, before the refusal, not again inside it.
    assert "VM 101 (monitoring), running" in cap.out.getvalue()
    assert "VM 101 (monitoring)" not in message
    assert n.fingerprint(100) == before
    assert n.sim.state.run_state(101).status == "running"


def test_stop_others_shuts_them_down_reboots_and_brings_every_vm_back(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    _start(n, 101)
    cap = Captured()
    result = n.apply(100, 2, reboot_host=True, stop_others=True, captured=cap)
    err = cap.err.getvalue()
    assert "VM 101: shutting down (clean ACPI shutdown" in err
    assert any(line.startswith("host kpro6 rebooted") for line in result.activated)
    assert any(line.startswith("VM 100 up") for line in result.activated)
    assert any(line.startswith("VM 101 up") for line in result.activated)
    assert n.sim.state.run_state(100).status == "running"
    assert n.sim.state.run_state(101).status == "running"


def test_a_locked_neighbour_is_never_stopped(node: Callable[..., Node]) -> None:
    n = node("kpro6", inject=["lock=101:backup"])
    api(n.info, "ticket").nodes(n.info.node).qemu(101).config.get()  # the lock lands
    with pytest.raises(RefusedError, match=r"locked VMs: VM 101 \(lock backup\)"):
        n.apply(100, 2, reboot_host=True, stop_others=True)


def test_a_stopped_vm_gets_its_config_and_stays_stopped_unless_start(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    prox = api(n.info, "ticket")
    wait_task(prox, prox.nodes(n.info.node).qemu(100).status.stop.post())
    cap = Captured()
    result = n.apply(100, 1, restart=True, captured=cap)
    assert "stays stopped (add --start to start it)" in cap.err.getvalue()
    assert result.activated == []
    assert n.sim.state.run_state(100).status == "stopped"
    assert "machine: q35" in n.conf(100).decode()
