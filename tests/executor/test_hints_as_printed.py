"""Every command pvefix prints for the admin to run (`Next:`, `to undo:`, the Ctrl-C lines)
runs exactly as printed: the story from `pvefix plan` through each phase to `pvefix check`,
then every undo, newest first, each taken from the output and run with shlex.split in the same
environment, its stdin a terminal that answers y. The Ctrl-C lines are provoked: SIGINT at a
journal boundary (PVEFIX_JOURNAL_HOLD_AFTER), after the writes and while undoing."""

from __future__ import annotations

import os
import pty
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.errors import EXIT_CHANGES, EXIT_INTERRUPTED, EXIT_OK
from pvefix.executor.journal import ENV_HOLD, read_journal
from tests.executor.conftest import Node

REPO = Path(__file__).resolve().parents[2]
# A printed command: after `Next:` (on its line, or whole on the next when the two do not fit
# the terminal), `to undo:` or `undo them with:` (the Ctrl-C lines).
HINT = re.compile(r"(?:^Next: |^Next:\n  |to undo: |undo them with: )(pvefix .*)$",
                  re.MULTILINE)

pytestmark = pytest.mark.slow


def _start(line: str, n: Node, hold: str | None = None) -> subprocess.Popen[str]:
    """The printed `line`, as printed (shlex.split; `pvefix` is this checkout's), in this
    environment, a terminal on stdin that answers y."""
    argv = shlex.split(line)
    assert argv[0] == "pvefix", line
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if hold:
        env[ENV_HOLD] = hold
    leader, follower = pty.openpty()
    os.write(leader, b"y\n" * 4)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pvefix", *argv[1:]], env=env, stdin=follower, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=n.state_dir.parent,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # Ctrl-C as at a shell
    proc.pty = (leader, follower)  # type: ignore[attr-defined]
    return proc


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    out, err = proc.communicate(timeout=180)
    for fd in proc.pty:  # type: ignore[attr-defined]
        os.close(fd)
    assert "Traceback" not in err, err
    return proc.returncode, out + err


def _run(line: str, n: Node) -> tuple[int, str]:
    return _finish(_start(line, n))


def _hints(text: str) -> list[str]:
    return list(dict.fromkeys(HINT.findall(text)))  # the summary and the end repeat `Next:`


def _last_event(state_dir: Path) -> str | None:
    records = [r for path in state_dir.glob("snapshots/*/*/journal.jsonl")
               for r in read_journal(path)]
    # Records of one apply often share a millisecond: its own order (seq) breaks the tie.
    return max(records, key=lambda r: (r["at"], r["seq"]))["event"] if records else None


def _interrupt_at(proc: subprocess.Popen[str], n: Node, event: str) -> None:
    """SIGINT once the apply holds after its journal's `event` record."""
    deadline = time.monotonic() + 90  # a loaded machine; under pytest-timeout's 120 s
    while _last_event(n.state_dir) != event:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            _, said = _finish(proc)
            raise AssertionError(f"the apply never held at {event} (last: "
                                 f"{_last_event(n.state_dir)}):\n{said[-3000:]}")
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)


def follow(line: str | None, n: Node, *, until: str = "\0", limit: int = 5,
           after: Callable[[list[str], str | None], None] | None = None,
           ) -> tuple[list[str], list[str], str | None]:
    """Run each `Next:` line as printed, from `line` until none is printed or one starts with
    `until`: (the lines run, the undo lines printed on the way, the line it stopped at). Each
    run must exit 0 and print at most one `Next:`; `after(ran, next_line)` runs after each."""
    ran: list[str] = []
    undos: list[str] = []
    while line is not None and not line.startswith(until):
        assert len(ran) < limit, ran
        code, out = _run(line, n)
        assert code == EXIT_OK, f"{line}\n{out}"
        ran.append(line)
        printed = _hints(out)
        undos += [h for h in printed if h.startswith("pvefix rollback ")]
        onward = [h for h in printed if not h.startswith("pvefix rollback ")]
        assert len(onward) <= 1, printed
        line = onward[0] if onward else None
        if after is not None:
            after(ran, line)
    return ran, undos, line


def _plan_next(n: Node, vmid: int, *extra: str) -> str:
    code, out = _run(shlex.join(["pvefix", "plan", str(vmid), "--connection", str(n.ready_file),
                                 "--state-dir", str(n.state_dir), *extra]), n)
    assert code == EXIT_CHANGES, out
    (first,) = _hints(out)
    return first


@pytest.mark.parametrize(("scenario", "vmid", "extra"), [
    ("kpro6", 100, ()),
    # Its API token is privilege-separated: only root@pam's password reads VM 200, so every
    # printed command must keep --auth password.
    ("intel-grub", 200, ("--auth", "password")),
], ids=["kpro6", "intel-grub"])
def test_the_story_runs_hint_by_hint_as_printed(
    node: Callable[..., Node], scenario: str, vmid: int, extra: tuple[str, ...]
) -> None:
    n = node(scenario)
    before, booted = n.conf(vmid), n.host_file("/proc/cmdline")
    ran, undos, _ = follow(_plan_next(n, vmid, *extra), n)
    assert [shlex.split(r)[1:5] for r in ran] == [
        ["apply", str(vmid), "--phase", "1"], ["apply", str(vmid), "--phase", "2"],
        ["check", str(vmid), "--connection", str(n.ready_file)]]
    assert "--restart" in ran[0].split() and "--reboot-host" in ran[1].split()
    assert len(undos) == 2
    # The host was rebooted for phase 2: its undo reboots it too, so the old line runs again.
    assert "--reboot-host" in undos[1].split() and "--reboot-host" not in undos[0].split()
    for undo in reversed(undos):  # the newest first
        code, out = _run(undo, n)
        assert code == EXIT_OK, f"{undo}\n{out}"
    assert n.conf(vmid) == before, "the printed undos put the VM config back, byte for byte"
    assert n.host_file("/proc/cmdline") == booted, "the host runs its old kernel cmdline again"


def test_ctrl_c_after_the_writes_prints_the_undo_and_it_runs(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    code, out = _run(_plan_next(n, 100), n)
    assert code == EXIT_OK, out
    phase2 = next(h for h in _hints(out) if h.startswith("pvefix apply 100 --phase 2 "))
    host_before = n.host_file("/etc/kernel/cmdline")
    # Ctrl-C while the host reboot begins: the cmdline is written and stays so.
    proc = _start(phase2, n, hold="activation-begin")
    _interrupt_at(proc, n, "activation-begin")
    code, out = _finish(proc)
    assert code == EXIT_INTERRUPTED, out
    assert "interrupted (Ctrl-C) after the changes were written: they stay in place" in out
    assert n.host_file("/etc/kernel/cmdline") != host_before
    (undo,) = [h for h in _hints(out) if h.startswith("pvefix rollback ")]
    code, out = _run(undo, n)
    assert code == EXIT_OK, f"{undo}\n{out}"
    assert n.host_file("/etc/kernel/cmdline") == host_before


def test_a_second_ctrl_c_while_undoing_prints_the_undo_and_it_runs(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    before = n.conf(100)
    proc = _start(_plan_next(n, 100), n, hold="step-end,undo-begin")
    _interrupt_at(proc, n, "step-end")  # the first Ctrl-C: the undo begins ...
    _interrupt_at(proc, n, "undo-begin")  # ... and the second stops it
    code, out = _finish(proc)
    assert code == EXIT_INTERRUPTED, out
    assert "STILL CHANGED (not undone): VM config machine: (absent) -> q35" in out
    assert n.conf(100) != before
    (undo,) = [h for h in _hints(out) if h.startswith("pvefix rollback ")]
    code, out = _run(undo, n)
    assert code == EXIT_OK, f"{undo}\n{out}"
    assert n.conf(100) == before
