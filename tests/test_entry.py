"""The process entry point (`pvefix`, `python -m pvefix`): main()'s exit code, and no final
sweep for reference cycles over everything the run made (docs/benchmarks.md)."""

from __future__ import annotations

import subprocess
import sys

from pvefix import __version__


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=120)


def test_the_entry_point_exits_with_mains_code_and_objects_frozen_for_the_exit() -> None:
    probe = ("import atexit, gc, sys; "
             "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0)); "
             "sys.argv = ['pvefix'] + sys.argv[1:]; "
             "from pvefix.main import entry; entry()")
    done = _run(probe.replace("sys.argv[1:]", "['--version']"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"pvefix {__version__}", "frozen True"]
    # A usage error is exit 1 (2 means drift or pending changes to pvefix's callers).
    done = _run(probe.replace("sys.argv[1:]", "['check']"))
    assert done.returncode == 1
    assert "name the VMs to check" in done.stderr
    assert done.stdout.splitlines()[-1] == "frozen True"


def test_python_dash_m_pvefix_is_the_entry_point() -> None:
    done = subprocess.run([sys.executable, "-m", "pvefix", "--version"], capture_output=True,
                          text=True, check=False, timeout=120)
    assert (done.returncode, done.stdout) == (0, f"pvefix {__version__}\n")
