"""Activation is explicit and checked: --restart (start task and running-machine), a start
failure rolled back with --auto-rollback (or the exact rollback command printed), and
--reboot-host with progress until API and SSH are back and /proc/cmdline shows the change."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.executor.transaction import ApplyFailed
from pvefix.sources.live import read_live
from tests.executor.conftest import Captured, Node

START_ERROR = "start failed: QEMU exited with code 1"


def _failing_start(n: Node) -> None:
    """The next start of VM 300 fails (a simulator fault: QEMU refusing to come up)."""
    n.sim.state.faults.update(fail_start={300: START_ERROR})


def test_a_vm_that_fails_to_start_is_rolled_back_and_started_again_with_auto_rollback(
    node: Callable[..., Node], tmp_path: Path
) -> None:
    n = node("windows-igd")
    before = n.fingerprint(300)
    cap = Captured()
    _failing_start(n)
    with pytest.raises(ApplyFailed) as caught:
        n.apply(300, 1, restart=True, auto_rollback=True, captured=cap)
    message = str(caught.value)
    assert START_ERROR in message
    assert "rolled back (--auto-rollback)" in message
    assert "VM 300 started again on the old config" in message
    assert n.fingerprint(300) == before
    assert n.sim.state.run_state(300).running_machine == "pc-i440fx-9.2+pve1"


def test_without_auto_rollback_the_exact_rollback_command_is_printed_and_works(
    node: Callable[..., Node], tmp_path: Path
) -> None:
    n = node("windows-igd")
    before = n.fingerprint(300)
    _failing_start(n)
    with pytest.raises(ApplyFailed) as caught:
        n.apply(300, 1, restart=True)
    message = str(caught.value)
    assert "the changes are in place and the VM is stopped" in message
    command = message.split("and start it: ", 1)[1].split()
    assert command[:3] == ["pvefix", "rollback", "300"] and "--restart" in command
    snapshot_id = command[command.index("--snapshot") + 1]
    assert n.sim.state.run_state(300).status == "stopped"
    n.rollback(300, snapshot_id, restart=True)
    assert n.fingerprint(300) == before


def test_restart_shows_progress_and_checks_the_running_machine(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    cap = Captured()
    n.apply(100, 1, restart=True, captured=cap)
    err = cap.err.getvalue()
    assert "VM 100: shutting down (clean ACPI shutdown" in err
    assert "VM 100: running, running-machine pc-q35-10.1+pve0" in err
    assert "[PENDING]" not in n.conf(100).decode()


def test_reboot_host_waits_for_api_and_ssh_with_progress_then_checks_proc_cmdline(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6", reboot_seconds=0.5)
    cap = Captured()
    result = n.apply(100, 2, reboot_host=True, captured=cap)
    err = cap.err.getvalue()
    assert "host kpro6: rebooting" in err
    assert "api down, ssh down" in err
    assert "host kpro6: back after" in err
    assert result.activated[0].startswith("host kpro6 rebooted")
    proc = (n.host_file("/proc/cmdline") or b"").decode()
    assert "iommu=pt" in proc.split()


def test_rollback_after_a_host_reboot_restores_the_file_and_refreshes_the_loader_again(
    node: Callable[..., Node]
) -> None:
    n = node("intel-grub", reboot_seconds=0.3)
    before = n.fingerprint(200)
    n.apply(200, 2, reboot_host=True)
    cap = Captured()
    n.rollback(200, captured=cap)
    out = cap.out.getvalue()
    assert "boot loader refreshed again: update-grub" in out
    assert "until it reboots" in out
    after = n.fingerprint(200)
    assert after["/etc/default/grub"] == before["/etc/default/grub"]
    assert after["installed"] == before["installed"], "the loader boots the old line again"
    assert "iommu=pt" in (after["/proc/cmdline"] or b"").decode(), "still running the new one"


def test_pve_snapshot_warns_and_the_pvefix_snapshot_keeps_it(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    cap = Captured()
    result = n.apply(100, 1, pve_snapshot=True, captured=cap)
    assert "rolls back the disks" in cap.err.getvalue()
    text = n.conf(100).decode()
    assert "[pvefix_" in text, "the Proxmox snapshot section is in the config"
    from pvefix.executor.snapshot import list_snapshots

    (snap,) = list_snapshots(n.state_dir)
    assert snap.id == result.snapshot_id and snap.meta.pve_snapshot
    assert f"[{snap.meta.pve_snapshot}]" in snap.vm_config_text()
    n.rollback(100)
    assert f"[{snap.meta.pve_snapshot}]" in n.conf(100).decode(), "rollback keeps it"
    assert "pcie" not in n.conf(100).decode().split("[")[0]


def test_without_ssh_the_api_view_is_snapshotted_and_restored_key_by_key(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    conn = n.conn(ssh=False)
    before = read_live(conn, 100)
    n.apply(100, 1, conn=conn, restart=True)
    cap = Captured()
    n.rollback(100, conn=conn, captured=cap)
    assert "restored through the API (every key and the description" in cap.out.getvalue()
    after = read_live(conn, 100)
    from pvefix.vmconfig.nextstart import NextStart

    # Every key, the description included, as it was.
    assert NextStart.from_text(after.vm.config_text).values == NextStart.from_text(
        before.vm.config_text).values
