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


LOCKED = "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout"


def test_a_task_refused_only_for_the_config_lock_is_sent_again(
    node: Callable[..., Node]
) -> None:
    """Right after a restart, qmeventd's cleanup of the old QEMU can hold the VM's config lock
    for up to 30 s (seen on Proxmox's own daemons, tests/conformance/test_real_api_flows.py):
    such a task changed nothing, so pvefix sends it again instead of failing the apply."""
    n = node("kpro6")
    n.sim.faults.update(fail_start={100: LOCKED})  # the next start task ends with it, once
    cap = Captured()
    result = n.apply(100, 1, restart=True, captured=cap)
    assert "VM 100's config lock is held by another task" in cap.err.getvalue()
    assert result.activated == ["VM 100 restarted"]
    assert n.sim.state.run_state(100).status == "running"


def test_a_lock_held_through_every_retry_says_what_held_it_and_that_nothing_changed() -> None:
    from pvefix.target.tasks import LOCK_RETRIES, TaskFailed

    failed = TaskFailed("UPID:kpro6:1:2:3:qmstart:100:root@pam!ci:", LOCKED)
    assert f"{LOCK_RETRIES + 1} times" in str(failed)
    assert "this task changed nothing" in str(failed)


def test_a_task_refused_for_a_privilege_names_what_to_grant_to_the_tasks_own_token() -> None:
    from pvefix.target.tasks import TaskFailed

    failed = TaskFailed("UPID:kpro6:1:2:3:qmconfig:100:root@pam!ci:",
                        "403 Permission check failed (/mapping/pci/pro6000, Mapping.Use)")
    text = str(failed)
    assert "lacks Mapping.Use on /mapping/pci/pro6000" in text
    assert "--tokens 'root@pam!ci' --roles PVEMappingUser" in text


def test_a_config_write_that_finds_the_lock_held_is_sent_again_and_lands(
    node: Callable[..., Node]
) -> None:
    """The simulator holds VM 100's config lock for its next two config updates (a backup, the
    cleanup after a restart): each fails as Proxmox's do after the 10 s wait, pvefix sends it
    again, and the apply lands whole."""
    from pvefix.target.tasks import LOCK_RETRIES

    n = node("kpro6")
    n.sim.faults.update(config_lock={100: LOCK_RETRIES - 1})
    cap = Captured()
    result = n.apply(100, 1, captured=cap)
    assert cap.err.getvalue().count("VM 100's config lock is held by another task") == (
        LOCK_RETRIES - 1)
    assert result.done and "machine: q35" in n.conf(100).decode()
    assert n.sim.faults.settings.config_lock == {100: 0}


def test_a_config_lock_held_through_every_retry_fails_the_apply_with_nothing_changed(
    node: Callable[..., Node]
) -> None:
    import pytest

    from pvefix.executor.transaction import ApplyFailed
    from pvefix.target.tasks import LOCK_RETRIES

    n = node("kpro6")
    before = n.fingerprint(100)
    n.sim.faults.update(config_lock={100: LOCK_RETRIES + 1})
    with pytest.raises(ApplyFailed) as failed:
        n.apply(100, 1, captured=Captured())
    assert f"{LOCK_RETRIES + 1} times" in str(failed.value)
    assert n.fingerprint(100) == before
