"""Undo is compare-and-swap: it restores only what pvefix itself wrote. Another admin's edit made
after pvefix's write stays in place, and the report says exactly what was not undone (exit 3)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pvefix.errors import EXIT_REFUSED, RefusedError
from pvefix.executor.journal import Record
from pvefix.executor.snapshot import list_snapshots
from tests.executor.conftest import Node
from tests.simkit import api

THEIR_CMDLINE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt mitigations=off\n"


def test_a_host_file_edited_after_pvefix_wrote_it_is_left_as_the_other_admin_left_it(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")

    def other_admin_then_fail(record: Record) -> None:
        # pvefix has written /etc/kernel/cmdline; another admin edits it; then the refresh fails.
        if record["event"] == "step-end" and str(record.get("step", "")).startswith("file:"):
            n.sim.state.write_host("/etc/kernel/cmdline", THEIR_CMDLINE)
            raise RuntimeError("refresh interrupted")

    with pytest.raises(RefusedError) as caught:
        n.apply(100, 2, hook=other_admin_then_fail)
    message = str(caught.value)
    assert caught.value.exit_code == EXIT_REFUSED
    assert "COULD NOT UNDO" in message and "another writer changed it" in message
    assert "--force" in message
    assert n.host_file("/etc/kernel/cmdline") == THEIR_CMDLINE.encode()
    (snap,) = list_snapshots(n.state_dir)
    assert snap.status() == "failed", "the snapshot is kept for rollback --force"


def test_a_vm_key_changed_after_pvefix_wrote_it_is_not_put_back(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    prox = api(n.info, "ticket")

    def other_admin_then_fail(record: Record) -> None:
        if record["event"] == "step-end" and record.get("step") == "vm.cpu.phys-bits":
            vm = prox.nodes(n.info.node).qemu(100)
            vm.config.put(cpu="host")
            raise RuntimeError("interrupted after the cpu write")

    with pytest.raises(RefusedError) as caught:
        n.apply(100, 1, hook=other_admin_then_fail)
    assert "cpu is 'host', neither what pvefix wrote" in str(caught.value)
    pending = {i["key"]: i for i in prox.nodes(n.info.node).qemu(100).pending.get()}
    assert pending["cpu"].get("pending") == "host", "their value stands"


def test_rollback_leaves_a_file_changed_after_it_was_shown(node: Callable[..., Node]) -> None:
    from pvefix.executor.console import Console
    from pvefix.executor.options import RollbackOptions
    from pvefix.flow.rollback import run_rollback
    from tests.executor.conftest import Captured

    n = node("kpro6")
    result = n.apply(100, 2)
    theirs = "root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet mitigations=off\n"
    cap = Captured()

    def edit_at_confirmation(question: str) -> bool:  # another admin, while pvefix asks
        n.sim.state.write_host("/etc/kernel/cmdline", theirs)
        return True

    console = Console(cap.out, cap.err, edit_at_confirmation)
    with pytest.raises(RefusedError, match="changed while pvefix was rolling back"):
        run_rollback(n.conn(), n.state_dir, 100, result.snapshot_id,
                     RollbackOptions(yes=False, task_timeout=10), console)
    assert n.host_file("/etc/kernel/cmdline") == theirs.encode()
