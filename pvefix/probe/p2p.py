"""Parent side of the measured P2P check: pick an interpreter with PyTorch, run the worker
in a child process with a timeout, and turn its JSON into a P2PMeasuredSection.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

from pvefix.probe._model import ValidationError as PydanticValidationError
from pvefix.probe.report import P2PMeasuredSection, not_measured
from pvefix.probe.shell import CommandRunner
from pvefix.probe.sizes import Plan

WORKER = Path(__file__).with_name("_p2p_worker.py")
_HAS_TORCH = "import importlib.util as u, sys; sys.exit(0 if u.find_spec('torch') else 1)"


def find_torch_python(explicit: str | None, run: CommandRunner, *,
                      timeout: float = 15.0) -> tuple[str | None, str]:
    """The interpreter to measure with: `explicit`, else this one, else `python3` on PATH.

    Returns (path, "") or (None, reason). Never imports torch in this process.
    """
    if explicit:
        result = run([explicit, "-c", _HAS_TORCH], timeout)
        return (explicit, "") if result.ok else (None, f"{explicit} has no PyTorch")
    if importlib.util.find_spec("torch") is not None:
        return sys.executable, ""
    other = shutil.which("python3")
    if other and Path(other).resolve() != Path(sys.executable).resolve():
        if run([other, "-c", _HAS_TORCH], timeout).ok:
            return other, ""
        return None, f"PyTorch is not importable (tried {sys.executable} and {other})"
    return None, f"PyTorch is not importable (tried {sys.executable})"


def parse_worker_output(stdout: str, *, source: str = "p2p worker") -> P2PMeasuredSection:
    """The worker's last stdout line as a section; garbage becomes not_measured, not a crash."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return not_measured(P2PMeasuredSection, f"{source} printed nothing")
    try:
        data = json.loads(lines[-1])
        return P2PMeasuredSection.model_validate(data)
    except (ValueError, PydanticValidationError) as exc:
        first = str(exc).splitlines()[0][:200]
        return not_measured(P2PMeasuredSection, f"{source} output not understood: {first}")


def measure_p2p(python: str, plan: Plan, timeout: float, run: CommandRunner) -> P2PMeasuredSection:
    """Run the P2P worker under `python`; a timeout or crash is reported, never raised."""
    if timeout <= 1:
        return not_measured(P2PMeasuredSection, "timeout: no time left in the probe's budget")
    argv = [
        python,
        str(WORKER),
        f"--latency-bytes={plan.latency_bytes}",
        f"--bandwidth-bytes={plan.bandwidth_bytes}",
        f"--check-bytes={plan.check_bytes}",
        f"--iters={plan.iterations}"]
    result = run(argv, timeout)
    if result.timed_out:
        return not_measured(P2PMeasuredSection, f"timeout: P2P check ran past {timeout:.0f} s")
    if not result.ok:
        tail = result.stderr.strip().splitlines()[-1:] or [""]
        return not_measured(P2PMeasuredSection, f"P2P worker failed: {result.why()} {tail[0]}")
    return parse_worker_output(result.stdout)
