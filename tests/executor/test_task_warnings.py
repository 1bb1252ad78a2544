"""A task that ends with `WARNINGS: N` succeeded: the warnings are shown, nothing is undone."""

from __future__ import annotations

from collections.abc import Callable

from tests.executor.conftest import Captured, Node
from tests.simkit import api, wait_task


def test_a_restart_whose_start_ends_with_warnings_is_a_success_with_the_warnings_shown(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    vm = api(n.info, "ticket").nodes(n.info.node).qemu(100)
    wait_task(api(n.info, "ticket"), vm.status.stop.post())
    vm.config.put(delete="efidisk0")  # OVMF without an EFI disk: Proxmox starts it with a WARN
    wait_task(api(n.info, "ticket"), vm.status.start.post())
    cap = Captured()
    result = n.apply(100, 1, restart=True, captured=cap)
    err = cap.err.getvalue()
    assert "WARN: no efidisk configured! Using temporary efivars disk." in err
    assert "the start task ended with WARNINGS: 1" in err
    assert result.activated == ["VM 100 restarted"]
    assert n.sim.state.run_state(100).status == "running"
    assert "machine: q35" in n.conf(100).decode(), "nothing was undone"
