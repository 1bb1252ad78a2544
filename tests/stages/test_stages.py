"""The stages of apply, fast: prepare (pure refusals) over the shipped kpro6 scenario read as a
bundle, and the write stage's steps and the restore stage's host files over a fake Node
(tests/fakes/node.py). The simulator drills (tests/executor, tests/guest) hold the same stages
end to end over real HTTPS and SSH."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pvefix.digest import sha256_text
from pvefix.errors import PvefixError, RefusedError
from pvefix.executor.restore import restore_files
from pvefix.executor.snapshot import take_snapshot
from pvefix.executor.steps import StepContext, build_steps
from pvefix.executor.transaction import ApplyFailed
from pvefix.executor.vmwrite import VmWriter
from pvefix.executor.write import run_steps
from pvefix.flow.prepare import Asked, prepare
from pvefix.planner import plan as make_plan
from pvefix.planner.model import Plan
from pvefix.sources.bundle import read_bundle
from pvefix.state import AccessFacts, HostState
from pvefix.target.guest.channel import REFRESH_TIMEOUT_S
from pvefix.target.node import ReopeningNode
from pvefix.target.sessions import Sessions
from tests.executor.conftest import Captured
from tests.fakes.node import FakeNode, takes

SCENARIO = Path(__file__).resolve().parents[2] / "pvefix" / "scenarios" / "kpro6"
CMDLINE = "/etc/kernel/cmdline"
REFRESH = ("proxmox-boot-tool", "refresh")


def _live(*, ssh: bool = True, **vm: Any) -> HostState:
    state = read_bundle(SCENARIO, 100)
    access = AccessFacts(method="api", user="root@pam", auth="ticket", ssh=ssh)
    return state.model_copy(update={"access": access, "vm": state.vm.model_copy(update=vm)})


def _said() -> tuple[list[str], Any]:
    lines: list[str] = []
    return lines, lines.append


def test_prepare_returns_the_phase_and_what_activation_will_do() -> None:
    live = _live()
    lines, say = _said()
    ready = prepare(live, None, Asked(phase=1, restart=True), say)
    assert ready.phase.number == 1 and not ready.use_qm
    assert ready.starts == (live.vm.status == "running") and not ready.reboots
    host = prepare(live, None, Asked(phase=2, reboot_host=True), say)
    assert host.reboots and not host.starts and lines == []


def test_prepare_refuses_a_locked_vm_host_files_without_ssh_and_a_missing_phase() -> None:
    _, say = _said()
    with pytest.raises(RefusedError, match=r"VM 100 is locked \(backup\)"):
        prepare(_live(lock="backup"), None, Asked(phase=1), say)
    with pytest.raises(RefusedError, match="needs SSH to the node"):
        prepare(_live(ssh=False), None, Asked(phase=2), say)
    with pytest.raises(PvefixError, match=r"no phase 9 \(phases: 1, 2\)"):
        prepare(_live(), None, Asked(phase=9), say)


def test_prepare_refuses_a_reboot_of_the_host_pvefix_runs_on() -> None:
    _, say = _said()
    with pytest.raises(RefusedError, match="--reboot-host with --local"):
        prepare(_live(), None, Asked(phase=2, reboot_host=True, on_this_host=True), say)
    assert prepare(_live(), None, Asked(phase=2, on_this_host=True), say).phase.number == 2


def test_prepare_refuses_a_stale_plan_and_plans_afresh_with_replan() -> None:
    saved = make_plan(_live())
    moved = _live(digest="0" * 40)
    lines, say = _said()
    with pytest.raises(RefusedError, match="the plan is stale"):
        prepare(moved, saved, Asked(phase=1), say)
    assert prepare(moved, saved, Asked(phase=1, replan=True), say).phase.number == 1
    assert lines and "planning afresh" in lines[0]


def _host_phase(tmp_path: Path) -> tuple[HostState, Plan, FakeNode, StepContext]:
    live = _live()
    plan = make_plan(live)
    node = FakeNode(files={CMDLINE: live.file(CMDLINE).text or ""})
    # The VM config is not touched by phase 2: no sessions behind it (no SSH for its bytes).
    no_ssh = SimpleNamespace(conn=SimpleNamespace(reaches_node=False))
    ctx = StepContext(sessions=cast(Sessions, no_ssh), vmid=100,
                      writer=cast(VmWriter, None), vm_digest=live.vm.digest,
                      backup_suffix="20260101T000000Z",
                      node=ReopeningNode("kpro6", lambda: node, 30))
    return live, plan, node, ctx


def test_write_runs_a_refresh_longer_than_the_connection_timeout(tmp_path: Path) -> None:
    live, plan, node, ctx = _host_phase(tmp_path)
    node.answers[REFRESH] = takes(45)  # past a 30 s --timeout, well within the refresh's time
    phase = plan.phase(2)
    assert phase is not None
    snapshot = take_snapshot(tmp_path, live, plan, 2, {})
    steps = build_steps(plan, phase, snapshot, guest=False, one_vm_write=False)
    done, manual = run_steps(ctx, snapshot.journal(), Captured().console(), snapshot, steps,
                             None)
    assert node.files[CMDLINE] == plan.host_files_after[CMDLINE]
    assert (REFRESH, REFRESH_TIMEOUT_S) in node.calls and done and manual == []


def test_a_refresh_past_its_time_is_a_timeout_and_the_write_is_undone(tmp_path: Path) -> None:
    live, plan, node, ctx = _host_phase(tmp_path)
    before = node.files[CMDLINE]
    node.answers[REFRESH] = takes(400, 1)  # too long once; the undo's refresh is quick
    phase = plan.phase(2)
    assert phase is not None
    snapshot = take_snapshot(tmp_path, live, plan, 2, {})
    steps = build_steps(plan, phase, snapshot, guest=False, one_vm_write=False)
    with pytest.raises(ApplyFailed, match="did not finish within 300 s") as failed:
        run_steps(ctx, snapshot.journal(), Captured().console(), snapshot, steps, None)
    assert "124" not in str(failed.value)
    assert node.files[CMDLINE] == before
    assert node.commands().count(REFRESH) == 2, "refreshed again after the old file is back"


def test_restore_puts_the_host_file_back_and_refreshes_again(tmp_path: Path) -> None:
    live, plan, node, ctx = _host_phase(tmp_path)
    node.answers[REFRESH] = takes(1)
    snapshot = take_snapshot(tmp_path, live, plan, 2, {})
    journal = snapshot.journal()
    journal.record("step-begin", step="refresh", kind="refresh", argv=list(REFRESH))
    changed = plan.host_files_after[CMDLINE]
    node.files[CMDLINE] = changed
    now = live.model_copy(update={"files": {**live.files, CMDLINE: live.file(CMDLINE).model_copy(
        update={"text": changed, "sha256": sha256_text(changed)})}})
    restored = restore_files(ctx, snapshot, now, journal)
    assert node.files[CMDLINE] == live.file(CMDLINE).text
    assert restored == [f"{CMDLINE} restored",
                        "boot loader refreshed again: proxmox-boot-tool refresh"]
    assert node.calls[-1] == (REFRESH, REFRESH_TIMEOUT_S)
