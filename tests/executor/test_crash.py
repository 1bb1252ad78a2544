"""kill -9 at every step boundary: `pvefix apply` runs as its own process, the test watches its
journal and SIGKILLs it right after the boundary's record is on disk; then `pvefix rollback`
puts the target back to the same bytes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.executor.journal import ENV_HOLD, read_journal
from pvefix.executor.snapshot import list_snapshots
from tests.executor.conftest import Node

app = build_command()  # the CLI as `pvefix` runs it (commands built lazily)

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # `pytest -m "not slow"` for a quick run


def _latest_seq(state_dir: Path) -> int:
    seqs = [r["seq"] for path in state_dir.glob("snapshots/*/*/journal.jsonl")
            for r in read_journal(path)]
    return max(seqs, default=0)


def apply_killed_at(n: Node, vmid: int, phase: int, seq: int, *extra: str) -> bool:
    """Run `pvefix apply` (with `extra` options) until journal record `seq`, then SIGKILL it.
    False if the apply finished before reaching that record (there is no such boundary)."""
    env = {**os.environ, ENV_HOLD: str(seq), "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "pvefix", "apply", str(vmid), "--phase", str(phase), "--yes",
            "--connection", str(n.ready_file), "--state-dir", str(n.state_dir),
            "--task-timeout", "10", *extra]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    try:
        while _latest_seq(n.state_dir) < seq:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                assert proc.returncode == 0, f"apply failed on its own: {err}"
                return False
            assert time.monotonic() < deadline, "the apply never reached the boundary"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert proc.returncode == -signal.SIGKILL
        return True
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.parametrize(("scenario", "vmid", "phase"), [
    ("windows-igd", 300, 1),
    ("kpro6", 100, 2),
], ids=["vm-config", "host-cmdline"])
def test_kill_9_at_every_step_boundary_then_rollback_gives_the_same_target(
    node: Callable[..., Node], scenario: str, vmid: int, phase: int, tmp_path: Path
) -> None:
    n = node(scenario)
    before = n.fingerprint(vmid)
    killed = 0
    for seq in range(1, 50):
        n.state_dir = tmp_path / f"state-{seq}"
        if not apply_killed_at(n, vmid, phase, seq):
            break
        killed += 1
        (snap,) = list_snapshots(n.state_dir)
        last = snap.records()[-1]["event"]
        assert snap.status() == ("applied" if last == "apply-end" else "interrupted")
        code = run_app(app, ["rollback", str(vmid), "--yes", "--connection", str(n.ready_file),
                             "--state-dir", str(n.state_dir)])
        assert code == 0
        assert n.fingerprint(vmid) == before, f"after kill -9 at record {seq}"
    assert killed >= 5
