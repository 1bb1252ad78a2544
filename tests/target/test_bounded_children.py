"""--local children are bounded: each in its own process group, stopped as a group past its
time (SIGTERM, then SIGKILL after a grace), every wait bounded. A grandchild holding the output
(`sh -c "sleep 8 & echo started"`) or a child that ignores SIGTERM cannot keep pvefix past
timeout + grace; and the readers' LocalShell reports a timeout as `timed_out`, never exit 124."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from pvefix.target.local import LocalShell
from pvefix.target.process import GRACE, run_process

TIMEOUT = 1.0
SLACK = 1.5  # a loaded 2-core CI machine


def _alive(marker: str) -> list[int]:
    """Processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                status = (entry / "status").read_text()
            except OSError:
                continue
            if marker.encode() in cmdline and "State:\tZ" not in status:
                found.append(int(entry.name))
    return found


def _gone(marker: str) -> bool:
    deadline = time.monotonic() + 2
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(marker)


def test_a_grandchild_holding_the_output_is_stopped_with_its_group() -> None:
    marker = f"8.{os.getpid()}1"
    started = time.monotonic()
    result = LocalShell().execute(["sh", "-c", f"sleep {marker} & echo started"], TIMEOUT)
    took = time.monotonic() - started
    assert result.timed_out and result.exit_code is None
    assert took < TIMEOUT + GRACE + SLACK, f"waited {took:.1f} s"
    assert _gone(marker), "the grandchild was killed with the group"


def test_a_child_ignoring_term_is_killed_after_the_grace() -> None:
    marker = f"8.{os.getpid()}2"
    started = time.monotonic()
    result = LocalShell().execute(["sh", "-c", f"trap '' TERM; sleep {marker}; echo late"],
                                  TIMEOUT)
    took = time.monotonic() - started
    assert result.timed_out and "late" not in result.stdout
    assert TIMEOUT + GRACE - 0.2 < took < TIMEOUT + GRACE + SLACK, f"took {took:.1f} s"
    assert _gone(marker)


def test_a_quick_child_keeps_its_status_and_output() -> None:
    result = LocalShell().execute(["sh", "-c", "echo out; echo err >&2; exit 3"], TIMEOUT)
    assert (result.exit_code, result.stdout, result.stderr, result.timed_out) == (
        3, "out\n", "err\n", False)


def test_the_readers_shell_reports_a_timeout_as_timed_out_not_124() -> None:
    marker = f"8.{os.getpid()}3"
    shell = LocalShell(timeout=TIMEOUT)
    started = time.monotonic()
    result = shell.run(["sh", "-c", f"sleep {marker} & echo started"])
    assert time.monotonic() - started < TIMEOUT + GRACE + SLACK
    assert result.timed_out and result.exit_code is None and not result.ok
    assert _gone(marker)


def test_run_process_is_bounded_too() -> None:
    marker = f"8.{os.getpid()}4"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_process(["sh", "-c", f"trap '' TERM; sleep {marker} & echo started"], TIMEOUT)
    assert time.monotonic() - started < TIMEOUT + 2 * GRACE + SLACK
    assert _gone(marker)


def test_each_child_leads_its_own_process_group() -> None:
    result = LocalShell().execute(["sh", "-c", "ps -o pgid= -p $$; ps -o pid= -p $$"], TIMEOUT)
    pgid, pid = result.stdout.split()
    assert pgid == pid and int(pgid) != os.getpgrp()
