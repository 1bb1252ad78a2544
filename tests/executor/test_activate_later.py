"""Activation later (issue 29 item 1): a host cmdline configured by `apply --phase 2` without
`--reboot-host` is a phase `plan` shows (activation only: nothing to write) and `apply --phase 2
--reboot-host` activates, with the same guards; `plan` and `check` agree. Over real HTTPS and
SSH against the simulator, through the CLI as `pvefix` runs it."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, EXIT_REFUSED
from pvefix.executor.snapshot import list_snapshots
from tests.executor.conftest import Node

app = build_command()
DRIFT = 2  # pvefix check: drift found


def _target(n: Node) -> list[str]:
    return ["--connection", str(n.ready_file), "--state-dir", str(n.state_dir)]


def _booted(n: Node) -> list[str]:
    return (n.host_file("/proc/cmdline") or b"").decode().split()


def _configured_not_booted(n: Node, capsys: pytest.CaptureFixture[str]) -> None:
    """kpro6 after phases 1 (restarted) and 2 (not rebooted): iommu=pt in the file only."""
    assert run_app(app, ["apply", "100", "--phase", "1", "--restart", "--yes", *_target(n)]) == 0
    capsys.readouterr()
    assert run_app(app, ["apply", "100", "--phase", "2", "--yes", *_target(n)]) == EXIT_OK
    assert "iommu=pt" in (n.host_file("/etc/kernel/cmdline") or b"").decode()
    assert "iommu=pt" not in _booted(n)
    # What to run next is the activation it left, not `check` (which would report drift).
    assert ("Next: pvefix apply 100 --phase 2 --reboot-host --connection "
            f"{n.ready_file} --state-dir {n.state_dir}\n") in capsys.readouterr().out


def test_plan_shows_a_configured_not_booted_cmdline_as_a_phase_and_check_agrees(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6")
    _configured_not_booted(n, capsys)
    assert run_app(app, ["check", "100", *_target(n)]) == DRIFT
    assert "configured, not booted yet" in capsys.readouterr().out
    assert run_app(app, ["plan", "100", *_target(n)]) == EXIT_CHANGES
    out = capsys.readouterr().out
    assert "already follow every rule" not in out
    assert "host.cmdline.activate" in out or "configured, not yet booted" in out
    assert "--phase 2 --reboot-host" in out
    # it would do nothing without (too wide for one line with its options: the command whole on
    # the next)
    assert re.search(r"^Next:\n  pvefix apply 100 --phase 2 --reboot-host ", out, re.M), out


def test_apply_phase_2_reboot_host_later_activates_it_and_writes_nothing(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6", reboot_seconds=0.3)
    _configured_not_booted(n, capsys)
    files = {p: n.host_file(p) for p in ("/etc/kernel/cmdline", "/etc/default/grub")}
    conf = n.conf(100)

    # Without --reboot-host it would do nothing: said so, nothing written, no snapshot.
    count = len(list_snapshots(n.state_dir))
    assert run_app(app, ["apply", "100", "--phase", "2", "--yes", *_target(n)]) == EXIT_ERROR
    assert "--reboot-host" in capsys.readouterr().err
    assert len(list_snapshots(n.state_dir)) == count

    # Not confirmed: the same guards as any host reboot (the node's VMs listed), nothing done.
    assert run_app(app, ["apply", "100", "--phase", "2", "--reboot-host",
                         *_target(n)]) == EXIT_REFUSED
    assert "A host reboot stops every VM on kpro6" in capsys.readouterr().out

    assert run_app(app, ["apply", "100", "--phase", "2", "--reboot-host", "--yes",
                         *_target(n)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "iommu=pt" in _booted(n), out
    assert {p: n.host_file(p) for p in files} == files, "an activation writes no file"
    assert n.conf(100) == conf
    assert n.sim.state.run_state(100).status == "running", "the VM that ran is up again"
    snap = list_snapshots(n.state_dir)[-1]
    events = [r.get("event") for r in snap.records()]
    assert "step-begin" not in events and "activation-end" in events
    assert snap.status() == "applied"

    assert run_app(app, ["check", "100", *_target(n)]) == EXIT_OK
    assert run_app(app, ["plan", "100", *_target(n)]) == EXIT_OK
    capsys.readouterr()

    # Its rollback has nothing to restore, and says so.
    assert run_app(app, ["rollback", "100", "--snapshot", snap.id, "--yes",
                         *_target(n)]) == EXIT_OK
    said = capsys.readouterr().out
    assert "nothing to restore" in said, said
    writer = list_snapshots(n.state_dir)[-2]  # the plain phase 2 that wrote the file
    back = f"pvefix rollback 100 --snapshot {writer.id} --reboot-host " + shlex.join(_target(n))
    assert back in said, said
    assert {p: n.host_file(p) for p in files} == files
    # ... and the way back it names runs as printed: the old line boots again.
    assert run_app(app, [*shlex.split(back)[1:], "--yes"]) == EXIT_OK
    assert "iommu=pt" not in _booted(n) and "iommu=pt" not in (
        n.host_file("/etc/kernel/cmdline") or b"").decode()


def test_rollback_reboot_host_restores_the_files_and_boots_the_old_line(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6", reboot_seconds=0.3)
    before = n.host_file("/etc/kernel/cmdline")
    assert run_app(app, ["apply", "100", "--phase", "2", "--reboot-host", "--yes",
                         *_target(n)]) == EXIT_OK
    assert "iommu=pt" in _booted(n)
    snap = list_snapshots(n.state_dir)[-1]
    capsys.readouterr()
    # The same guards as apply's reboot: the node's VMs listed, a question (here: no).
    assert run_app(app, ["rollback", "100", "--reboot-host", *_target(n)]) == EXIT_REFUSED
    said = capsys.readouterr().out
    assert "A host reboot stops every VM on kpro6" in said
    assert n.host_file("/etc/kernel/cmdline") != before, "not confirmed: nothing written"

    assert run_app(app, ["rollback", "100", "--reboot-host", "--yes", *_target(n)]) == EXIT_OK
    said = capsys.readouterr().out
    assert n.host_file("/etc/kernel/cmdline") == before
    assert "iommu=pt" not in _booted(n), said
    assert "restored: host kpro6 rebooted" in said
    assert n.sim.state.run_state(100).status == "running"
    events = [(r.get("event"), r.get("kind")) for r in snap.records()]
    end = events.index(("rollback-end", None))
    assert events[end + 1:end + 3] == [("activation-begin", "reboot-host"),
                                       ("activation-end", "reboot-host")], events


def test_rollback_reboot_host_later_activates_files_restored_earlier(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6", reboot_seconds=0.3)
    assert run_app(app, ["apply", "100", "--phase", "2", "--reboot-host", "--yes",
                         *_target(n)]) == EXIT_OK
    capsys.readouterr()
    assert run_app(app, ["rollback", "100", "--yes", *_target(n)]) == EXIT_OK
    said = capsys.readouterr().out
    assert "iommu=pt" in _booted(n), "restored in the file, the new line still runs"
    later = said.split("to reboot it now (every VM on it stops):\n", 1)[1].split("\n", 1)[0].strip()
    assert "--reboot-host" in later and shlex.split(later)[-4:] == _target(n), later
    assert run_app(app, [*shlex.split(later)[1:], "--yes"]) == EXIT_OK, later  # as printed
    said = capsys.readouterr().out
    assert "iommu=pt" not in _booted(n), said
    assert "host kpro6 rebooted" in said
    # Once the old line runs, there is nothing to activate: no reboot, said so.
    assert run_app(app, [*shlex.split(later)[1:], "--yes"]) == EXIT_OK
    assert "nothing to activate" in capsys.readouterr().out


def test_rollback_reboot_host_right_after_a_rollback_reboots_for_that_one_only(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str]
) -> None:
    """`pvefix rollback 100 --reboot-host` after `pvefix rollback 100` (phase 2 restored, not
    rebooted) reboots for that rollback: it does not roll phase 1 back too."""
    n = node("kpro6", reboot_seconds=0.3)
    assert run_app(app, ["apply", "100", "--phase", "1", "--restart", "--yes",
                         *_target(n)]) == EXIT_OK
    assert run_app(app, ["apply", "100", "--phase", "2", "--reboot-host", "--yes",
                         *_target(n)]) == EXIT_OK
    assert run_app(app, ["rollback", "100", "--yes", *_target(n)]) == EXIT_OK
    conf = n.conf(100)
    assert "iommu=pt" in _booted(n)
    capsys.readouterr()
    assert run_app(app, ["rollback", "100", "--reboot-host", "--yes", *_target(n)]) == EXIT_OK
    said = capsys.readouterr().out
    assert "iommu=pt" not in _booted(n), said
    assert n.conf(100) == conf, "phase 1 stays"
    assert "q35" in n.conf(100).decode()
    phase1, phase2 = list_snapshots(n.state_dir)
    assert (phase1.status(), phase2.status()) == ("applied", "rolled-back")
    # Rebooted once for it: the next one is phase 1's rollback again, as always.
    capsys.readouterr()
    assert run_app(app, ["rollback", "100", "--reboot-host", *_target(n)]) == EXIT_REFUSED
    assert phase1.id in capsys.readouterr().out


def test_apply_output_fits_80_columns_but_for_the_commands_to_copy(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The node's VMs listed before a reboot and the result's prose are filled to the width
    (an 8-GPU VM's line was 300 columns), a VM's further lines hanging under it; the phase's
    before/after values and the printed commands stay whole, to be read and copied."""
    monkeypatch.setenv("COLUMNS", "80")
    n = node("kpro6", reboot_seconds=0.3)
    assert run_app(app, ["apply", "100", "--phase", "2", "--reboot-host", "--yes",
                         *_target(n)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "passes hostpci0: mapping=pro6000" in out  # the long line is there, filled
    listing = out.split("A host reboot stops every VM on kpro6:\n", 1)[1].split("Phase 2", 1)[0]
    prose = [line for line in out.splitlines() if line.startswith(("activated: ", "pending: "))]
    assert max(len(line) for line in [*listing.splitlines(), *prose]) <= 80, out
    assert [line[:5] for line in listing.splitlines()] == ["  VM "] + ["     "] * (
        len(listing.splitlines()) - 2) + ["  VM "], "a VM's own lines hang under it"
