"""The undo pvefix prints never takes a VM down unannounced: a rollback with --restart whose
restored config would not start (intel-grub: VM 200 runs i440fx with `[PENDING] hostpci0:
...,pcie=1`) restores the config, says why, and leaves the VM running; one whose restored
[PENDING] holds staged changes says that the restart commits them and asks. Also after kill -9
at every journal record of `apply --restart`, on intel-grub and on kpro6."""

from __future__ import annotations

import io
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.executor.console import Console
from pvefix.executor.snapshot import list_snapshots
from pvefix.vmconfig.nextstart import NextStart, start_problems
from tests.executor.conftest import Node
from tests.executor.test_crash import apply_killed_at
from tests.simkit import grant

app = build_command()


def _run_printed(n: Node, undo: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The printed undo line as printed, answered yes, against the simulated node."""
    argv = shlex.split(undo)
    assert argv[:2] == ["pvefix", "rollback"], undo
    capsys.readouterr()
    # what `pvefix apply` puts in its printed line (commands/apply_cmd.py rollback_hint); the
    # apply here logged in with root@pam's password (Node.conn), intel-grub's token is privsep
    code = run_app(app, [*argv[1:], "--yes", "--connection", str(n.ready_file),
                         "--state-dir", str(n.state_dir), "--auth", "password"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_the_printed_undo_on_intel_grub_restores_and_keeps_the_vm_running(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("intel-grub")
    before = n.conf(200)
    assert start_problems(NextStart.from_text(before.decode()).values), "the trap is there"
    result = n.apply(200, 1, restart=True)
    assert n.sim.state.run_state(200).status == "running"
    assert "--restart" in result.rollback_command
    code, out = _run_printed(n, result.rollback_command, capsys)
    assert code == 0, out
    assert n.conf(200) == before, "the config is back, byte for byte"
    assert n.sim.state.run_state(200).status == "running", "not taken down"
    assert "VM 200 is not restarted" in out and "q35 machine model is not enabled" in out


def test_a_restart_that_commits_staged_changes_is_said_and_asked(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    # An admin staged a change before pvefix ran: the snapshot holds it in [PENDING].
    n.sim.state.tree.vm_config_path(100).write_text(
        n.conf(100).decode() + "\n[PENDING]\nballoon: 0\n")
    result = n.apply(100, 1)
    questions: list[str] = []
    out = io.StringIO()
    console = Console(out, io.StringIO(), lambda q: questions.append(q) or False)
    from pvefix.executor.options import RollbackOptions
    from pvefix.flow.rollback import run_rollback

    with pytest.raises(Exception, match="not confirmed"):
        run_rollback(n.conn(), n.state_dir, 100, result.snapshot_id,
                     RollbackOptions(restart=True, task_timeout=10), console)
    assert "commits the staged [PENDING] changes the snapshot holds (balloon: 0)" in (
        out.getvalue())
    assert questions and "committing its staged [PENDING] changes" in questions[0]
    assert n.sim.state.run_state(100).status == "running"


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("scenario", "vmid", "extra"), [
    ("intel-grub", 200, ("--qm-set",)),  # raw host= entries: root's `qm set` (a token connects)
    ("kpro6", 100, ()),
])
def test_kill_9_at_every_record_of_apply_restart_then_the_undo_as_printed(
    node: Callable[..., Node], scenario: str, vmid: int, extra: tuple[str, ...],
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    n = node(scenario)
    if scenario == "intel-grub":
        grant(n.info.root, n.info.token_id)  # its token is privilege-separated
    before = n.conf(vmid)
    machine = n.sim.state.run_state(vmid).running_machine or ""
    cannot_start = bool(start_problems(NextStart.from_text(before.decode()).values))
    killed = 0
    for seq in range(1, 60):
        n.state_dir = tmp_path / f"state-{seq}"
        if not apply_killed_at(n, vmid, 1, seq, "--restart", *extra):
            break
        killed += 1
        (snap,) = list_snapshots(n.state_dir)
        undo = f"pvefix rollback {vmid} --snapshot {snap.id} --restart"
        ran = n.sim.state.run_state(vmid).status == "running"
        code, out = _run_printed(n, undo, capsys)
        assert code == 0, f"record {seq}: {out}"
        assert n.conf(vmid) == before, f"after kill -9 at record {seq}"
        status = n.sim.state.run_state(vmid).status
        if cannot_start:
            assert "is not restarted" in out, f"record {seq}: said"
            assert status == ("running" if ran else "stopped"), f"record {seq}: not taken down"
        else:
            assert status == "running", f"record {seq}: {out}"
        n.sim.state.set_running(vmid, machine)  # the next drill starts as this one began
    assert killed >= 5
