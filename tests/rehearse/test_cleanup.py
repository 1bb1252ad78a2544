"""The node script ends a run cleanly on a lost connection (its stdin closes) and on SIGTERM
(what `timeout` and Ctrl-C send): QEMU's process group is gone and the private folder removed.
Real QEMU, OVMF hanging on a window that does not fit (conformance: `make conformance`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from pvefix.rehearse.build import HostCpu, Inputs, NodeFacts, build_job
from pvefix.rehearse.node_script import LOCK_DIR_ENV
from pvefix.rehearse.runner import node_argv
from tests.shared import fwlab_edk2_and_qemu

pytestmark = pytest.mark.conformance


@pytest.fixture(autouse=True)
def _own_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The script's node lock in a folder of the test's own: another rehearsal running on
    this machine at the same time (another test process) would hold /run/lock's, and this
    run would answer `busy` instead of starting."""
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path))


def _hanging_job(watch_stdin: bool, vmid: int) -> dict[str, object]:
    edk2 = fwlab_edk2_and_qemu()
    qemu = shutil.which("qemu-system-x86_64")
    assert qemu is not None, "fw-lab's preflight found it"
    node = NodeFacts(qemu=qemu, firmware_dir=str(edk2),
                     firmware_files=tuple(sorted(os.listdir(edk2))))
    planned = {"machine": "q35", "bios": "ovmf", "cpu": "qemu64", "memory": "2048",
               "args": "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=1048576"}
    functions = {}
    for i in range(8):
        planned[f"hostpci{i}"] = f"0000:{i + 1:02x}:00.0,pcie=1"
        functions[f"hostpci{i}"] = [(f"0000:{i + 1:02x}:00.0", 128 << 30)]
    job = build_job(Inputs(planned, functions, node, HostCpu("AuthenticAMD", 48), "tcg", True))
    return {"qemu_path": qemu, "argv": job.argv, "timeout": 300, "vmid": vmid,
            "vars_template": job.vars_template, "vars_signal": True, "ram_mb": job.ram_mb,
            "watch_stdin": watch_stdin}


def _ours(vmid: int) -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob(f"pvefix-rehearse-{vmid}-*"))


# Each test's run has a VMID of its own: the two tests may run at the same time (pytest-xdist
# workers), and one must not take the other's folder for a leftover of its own.
_LOST, _SIGTERM = 4242, 4243


def _start(watch_stdin: bool, vmid: int) -> tuple[subprocess.Popen[bytes], set[Path]]:
    before = _ours(vmid)
    argv = node_argv("run", _hanging_job(watch_stdin, vmid), 300)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not (_ours(vmid) - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ours(vmid) - before, "the run's folder never appeared"
    time.sleep(2)  # QEMU is up, OVMF hangs
    return proc, before


def _ended_clean(proc: subprocess.Popen[bytes], before: set[Path],
                 vmid: int) -> dict[str, object]:
    proc.wait(timeout=30)  # the output is one short line: no pipe fills up
    assert proc.stdout is not None
    out = proc.stdout.read()
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["outcome"] == "stopped" and result["tmp_removed"] is True
    assert not (_ours(vmid) - before)
    group = int(str(result["pid_group"])) if "pid_group" in result else None
    if group is not None:
        with pytest.raises(ProcessLookupError):
            os.killpg(group, 0)
    return result


def test_a_lost_connection_ends_the_run_and_cleans_up() -> None:
    proc, before = _start(watch_stdin=True, vmid=_LOST)
    assert proc.stdin is not None
    proc.stdin.close()  # what sshd does when the connection drops
    result = _ended_clean(proc, before, _LOST)
    assert "connection to pvefix was lost" in str(result["why"])


def test_sigterm_through_timeout_ends_the_run_and_cleans_up() -> None:
    proc, before = _start(watch_stdin=False, vmid=_SIGTERM)
    proc.send_signal(signal.SIGTERM)  # to `timeout`, which passes it on
    result = _ended_clean(proc, before, _SIGTERM)
    assert "signal 15" in str(result["why"])
