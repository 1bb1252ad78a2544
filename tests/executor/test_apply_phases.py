"""Each phase of each built-in scenario applies through the real API and SSH, lands as the plan
says, and rolls back to the very same bytes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pvefix.executor.snapshot import list_snapshots
from pvefix.planner import plan as make_plan
from pvefix.sources.live import read_live
from tests.executor.conftest import Captured, Node

# (scenario, vmid, phase, what the phase changes)
CASES = [
    ("kpro6", 100, 1, "vm"),
    ("kpro6", 100, 2, "host"),
    ("kpro6", 101, 2, "host"),
    ("intel-grub", 200, 1, "vm"),
    ("intel-grub", 200, 2, "host"),
    ("intel-grub", 201, 2, "host"),
    ("windows-igd", 300, 1, "vm"),
]


@pytest.mark.parametrize(("scenario", "vmid", "phase", "kind"), CASES,
                         ids=[f"{s}-{v}-phase{p}" for s, v, p, _ in CASES])
def test_each_phase_applies_as_planned_and_rolls_back_byte_for_byte(
    node: Callable[..., Node], scenario: str, vmid: int, phase: int, kind: str
) -> None:
    n = node(scenario)
    before = n.fingerprint(vmid)
    plan = make_plan(read_live(n.conn(), vmid))
    planned = plan.phase(phase)
    assert planned is not None, f"no phase {phase} in {[p.number for p in plan.phases]}"
    changes = planned.changes

    result = n.apply(vmid, phase, restart=kind == "vm")

    after = read_live(n.conn(), vmid)
    for change in changes:
        if change.target == "vm-config":
            assert f"{change.key}: {change.after}\n" in after.vm.config_text
        if change.target == "host-cmdline":
            assert change.file is not None
            assert after.file(change.file).text == plan.host_files_after[change.file]
    if kind == "vm":
        assert after.vm.status == "running"
        assert "q35" in (after.vm.running_machine or "")
        assert result.activated == [f"VM {vmid} restarted"]
    if kind == "host":
        assert n.fingerprint(vmid)["installed"] != before["installed"], "boot loader refreshed"
        assert any("next host reboot" in p for p in result.pending)

    n.rollback(vmid)
    assert n.fingerprint(vmid) == before


def test_a_running_vm_without_restart_gets_pending_changes_and_is_told_how_to_activate(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    result = n.apply(100, 1)
    text = n.conf(100).decode()
    assert "[PENDING]" in text and "machine: q35" in text.split("[PENDING]")[1]
    assert n.sim.state.run_state(100).running_machine == "pc-i440fx-10.1+pve0"
    assert any("[PENDING]" in p and "qm shutdown 100 && qm start 100" in p
               for p in result.pending)


def test_the_snapshot_holds_config_files_plan_and_journal_privately(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    before = n.conf(100)
    result = n.apply(100, 2)
    (snap,) = list_snapshots(n.state_dir, 100)
    assert snap.id == result.snapshot_id
    assert (snap.path / "vm.conf").read_bytes() == before
    assert snap.meta.vm.digest == "50a5963922d36140ccc49694ce7c900b366f98dd"
    assert snap.file_text("/etc/kernel/cmdline") == "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"
    assert snap.plan().phases[1].number == 2
    events = [r["event"] for r in snap.records()]
    assert events[0] == "apply-start" and events[-1] == "apply-end"
    assert events.count("step-begin") == events.count("step-end") == 2
    for path in [snap.path, *snap.path.rglob("*")]:
        mode = path.stat().st_mode & 0o777
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path}: {oct(mode)}"
    assert (n.state_dir.stat().st_mode & 0o777) == 0o700
    assert snap.status() == "applied"


def test_a_dated_backup_of_the_host_file_stays_on_the_host(node: Callable[..., Node]) -> None:
    n = node("intel-grub")
    original = n.host_file("/etc/default/grub")
    n.apply(200, 2)
    folder = n.sim.state.tree.host_path("/etc/default/grub").parent
    backups = sorted(folder.glob("grub.pvefix-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == original


def test_nothing_is_written_without_a_yes(node: Callable[..., Node]) -> None:
    from pvefix.errors import RefusedError

    n = node("kpro6")
    before = n.fingerprint(100)
    cap = Captured()
    with pytest.raises(RefusedError, match="not confirmed: nothing was written"):
        n.apply(100, 1, yes=False, captured=cap)
    assert "vm.machine.q35" in cap.out.getvalue(), "the phase is shown first"
    assert n.fingerprint(100) == before
    assert list_snapshots(n.state_dir) == []
