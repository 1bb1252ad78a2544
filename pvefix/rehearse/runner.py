"""Run the rehearsal on the VM's node, a Node (pvefix.target.node: SSH, or this host with
--local): the node script (node_script.py) under `timeout`, first for the node's facts, then for
the firmware boot. Nothing here touches the VM: no vfio, disk, network or display, no VM file.
"""

from __future__ import annotations

import base64
import json
import shlex
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from pvefix.errors import PvefixError
from pvefix.rehearse.build import DATA_LIMIT, Job, NodeFacts, RehearseRefused
from pvefix.target.node import Node
from pvefix.target.result import CommandResult

QEMU_CANDIDATES = ("/usr/bin/kvm", "qemu-system-x86_64")  # Proxmox's, then a distribution's
PVE_FIRMWARE_DIR = "/usr/share/pve-edk2-firmware"
TCG_MIN_TIMEOUT = 30.0  # seconds: a TCG boot of OVMF takes 2-45 s (docs/rehearse.md)
MIN_FREE = 1 << 30  # MemAvailable the node must have (a run peaks at about 300 MB)
KILL_GRACE = 5  # seconds `timeout` waits after SIGTERM before SIGKILL
LOCK_WAIT = 60.0  # seconds a run waits for another rehearsal on the node to finish


@cache
def node_script() -> str:
    """The text of the script that runs on the node (standard library only)."""
    return Path(__file__).with_name("node_script.py").read_text(encoding="utf-8")


def node_argv(mode: str, job: Mapping[str, Any], seconds: float) -> list[str]:
    """`timeout -k 5 SECONDS python3 -c SCRIPT MODE JOB`: the script, bounded in time
    (SIGTERM, then SIGKILL); the job as base64 JSON (no quoting to get wrong)."""
    payload = base64.b64encode(json.dumps(job).encode("utf-8")).decode("ascii")
    return ["timeout", "-k", str(KILL_GRACE), str(max(1, int(seconds))), "python3", "-c",
            node_script(), mode, payload]


def _answer(result: CommandResult, what: str, where: str) -> dict[str, Any]:
    if result.timed_out:
        raise PvefixError(f"the rehearsal's {what} on {where} gave no answer in time")
    if result.exit_code == 127:
        raise RehearseRefused(f"{where} has no python3 or no timeout(1), which the rehearsal "
                              f"needs: {result.stderr.strip()[:200]}")
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        status = "killed by its time limit" if result.exit_code in (124, 137) else (
            f"exit status {result.exit_code}")
        raise PvefixError(f"the rehearsal's {what} on {where} printed no result ({status}): "
                          f"{result.stderr.strip()[-300:]}")
    try:
        data = json.loads(lines[-1])
    except json.JSONDecodeError:
        raise PvefixError(f"the rehearsal's {what} on {where} printed no JSON result") from None
    if not isinstance(data, dict):
        raise PvefixError(f"the rehearsal's {what} on {where} printed no JSON object")
    return data


def read_facts(target: Node, where: str, firmware_dir: str,
               qemu: Sequence[str] = QEMU_CANDIDATES) -> NodeFacts:
    job = {"firmware_dir": firmware_dir, "qemu": list(qemu)}
    result = target.run(node_argv("facts", job, 60), 70)
    return NodeFacts.from_json(_answer(result, "fact read", where))


def choose_accel(node: NodeFacts, wanted: str, timeout: float, where: str) -> str:
    """KVM when /dev/kvm is usable, else TCG; refused (with the reason) when it cannot run."""
    if node.qemu is None:
        raise RehearseRefused(f"{where} has no QEMU (looked for {', '.join(QEMU_CANDIDATES)})")
    if node.mem_available is not None and node.mem_available < MIN_FREE:
        raise RehearseRefused(f"{where} has {node.mem_available >> 20} MiB of memory available;"
                              f" the rehearsal wants {MIN_FREE >> 20} MiB free")
    if wanted == "kvm" and not node.kvm:
        raise RehearseRefused(f"/dev/kvm is not usable on {where} (--accel kvm asked for it)")
    accel = wanted if wanted != "auto" else ("kvm" if node.kvm else "tcg")
    if accel == "tcg" and timeout < TCG_MIN_TIMEOUT:
        raise RehearseRefused(
            f"no KVM access on {where}, and --timeout {timeout:g} s leaves no time for TCG "
            f"(give --timeout {TCG_MIN_TIMEOUT:g} or more)")
    return accel


def run_job(target: Node, job: Job, node: NodeFacts, *, vmid: int, timeout: float,
            watch_stdin: bool, where: str) -> dict[str, Any]:
    """Boot the firmware on the node; the node script's result (see node_script.py). Another
    rehearsal on the node is waited for LOCK_WAIT seconds at most, then refused (why)."""
    payload = {
        "qemu_path": node.qemu, "argv": job.argv, "timeout": timeout, "vmid": vmid,
        "vars_template": job.vars_template, "vars_signal": job.firmware == "ovmf",
        "ram_mb": job.ram_mb, "data_limit": DATA_LIMIT, "watch_stdin": watch_stdin,
        "lock_wait": LOCK_WAIT,
    }
    result = target.run(node_argv("run", payload, timeout + 30 + LOCK_WAIT),
                        timeout + 45 + LOCK_WAIT)
    answer = _answer(result, "run", where)
    if answer.get("outcome") == "busy":
        raise RehearseRefused(f"{where}: {answer.get('why')}")
    return answer


def command_line(node: NodeFacts, job: Job) -> str:
    """The QEMU command the rehearsal runs (for --show-command and the JSON)."""
    return shlex.join([node.qemu or "qemu", *job.argv])
