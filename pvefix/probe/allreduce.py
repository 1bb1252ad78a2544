"""Parent side of the all-reduce sweep: one child process per GPU over loopback, once with
NCCL's defaults and once with NCCL_P2P_DISABLE=1.

NVLink multicast stays off in every child (NCCL_NVLS_ENABLE=0 and friends): on shared hosts a
program that uses it can take the GPUs out of service, and the sweep does not need it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from pvefix.probe._model import ValidationError as PydanticValidationError
from pvefix.probe.report import AllReduceRow, AllReduceRun, AllReduceSection
from pvefix.probe.sizes import Plan

WORKER = Path(__file__).with_name("_allreduce_worker.py")
MARK = "PVEFIX_RESULT "

#: Always set in the children, whatever the caller's environment says.
REQUIRED_ENV: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}

#: The two sweeps: label and the variables laid over the environment.
VARIANTS: tuple[tuple[str, dict[str, str]], ...] = (
    ("default", {}),
    ("p2p_disabled", {"NCCL_P2P_DISABLE": "1"}),
)


def child_env(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """The children's environment: `base`, then `extra`, then the required variables."""
    env = dict(base)
    env.update(extra)
    env.update(REQUIRED_ENV)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def recorded_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables worth recording: every NCCL_* and the multicast switches."""
    keep = {k: v for k, v in env.items() if k.startswith("NCCL_")}
    for key in REQUIRED_ENV:
        keep[key] = env[key]
    if "CUDA_VISIBLE_DEVICES" in env:
        keep["CUDA_VISIBLE_DEVICES"] = env["CUDA_VISIBLE_DEVICES"]
    return dict(sorted(keep.items()))


def free_port() -> int:
    """A TCP port free on loopback right now (the rendezvous for one sweep)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse_rank0_output(stdout: str) -> tuple[AllReduceRow, ...] | None:
    """The rows from rank 0's `PVEFIX_RESULT` line, or None when there is none or it is bad."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARK):
            try:
                data = json.loads(line[len(MARK) :])
                return tuple(AllReduceRow.model_validate(row) for row in data)
            except (ValueError, TypeError, PydanticValidationError):
                return None
    return None


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                proc.kill()
    for proc in procs:
        proc.wait()


def run_sweep(python: str, world: int, plan: Plan, label: str, env: dict[str, str],
              timeout: float) -> AllReduceRun:
    """One sweep: start `world` ranks, wait up to `timeout`, read rank 0's rows."""
    recorded = recorded_env(env)
    if timeout <= 5:
        return AllReduceRun(
            label=label, env=recorded, status="not_measured",
            reason="timeout: no time left in the probe's budget")
    port = free_port()
    sizes = ",".join(str(s) for s in plan.allreduce_sizes)
    procs: list[subprocess.Popen[str]] = []
    try:
        for rank in range(world):
            argv = [
                python, str(WORKER), f"--rank={rank}", f"--world={world}", f"--port={port}",
                f"--sizes={sizes}", f"--iters={plan.allreduce_iterations}"]
            procs.append(
                subprocess.Popen(
                    argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL, env=env, text=True, errors="replace",
                    start_new_session=True))
        deadline = time.monotonic() + timeout
        outputs: list[tuple[str, str]] = []
        for proc in procs:
            try:
                outputs.append(proc.communicate(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                _stop(procs)
                return AllReduceRun(
                    label=label, env=recorded, status="not_measured",
                    reason=f"timeout: all-reduce ran past {timeout:.0f} s")
    except OSError as exc:
        _stop(procs)
        return AllReduceRun(label=label, env=recorded, status="not_measured", reason=str(exc))
    failed = [(r, p.returncode) for r, p in enumerate(procs) if p.returncode != 0]
    if failed:
        rank, code = failed[0]
        tail = outputs[rank][1].strip().splitlines()[-1:] or [""]
        return AllReduceRun(
            label=label, env=recorded, status="not_measured",
            reason=f"rank {rank} exited with {code}: {tail[0][:300]}")
    rows = parse_rank0_output(outputs[0][0])
    if rows is None:
        return AllReduceRun(
            label=label, env=recorded, status="not_measured",
            reason="rank 0 printed no result line")
    return AllReduceRun(label=label, env=recorded, rows=rows)


def measure_allreduce(python: str | None, world: int, plan: Plan, budget: float,
                      base_env: Mapping[str, str] | None = None) -> AllReduceSection:
    """Both sweeps, or a section saying why none ran (one GPU, no PyTorch, no time)."""
    if world < 2:
        return AllReduceSection(
            status="not_measured", world_size=world,
            reason=f"{world} GPU(s) visible: all-reduce needs at least 2")
    if python is None:
        return AllReduceSection(
            status="not_measured", world_size=world, reason="PyTorch is not importable"
        )
    base = dict(os.environ if base_env is None else base_env)
    runs: list[AllReduceRun] = []
    deadline = time.monotonic() + budget
    for i, (label, extra) in enumerate(VARIANTS):
        share = (deadline - time.monotonic()) / (len(VARIANTS) - i)
        runs.append(run_sweep(python, world, plan, label, child_env(base, extra), share))
    if not any(r.measured for r in runs):
        return AllReduceSection(
            status="not_measured", world_size=world, runs=tuple(runs),
            reason="no sweep finished: " + "; ".join(f"{r.label}: {r.reason}" for r in runs))
    return AllReduceSection(world_size=world, runs=tuple(runs))
