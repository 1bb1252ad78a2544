"""The measured paths on a real GPU (run on the lent H200 machines; skipped without CUDA)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pvefix.probe import allreduce, p2p
from pvefix.probe.sizes import plan_for

WORKER = Path(p2p.__file__).with_name("_p2p_worker.py")


def cuda_gpus() -> int:
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, check=False)
    except subprocess.TimeoutExpired:
        return 0
    return int(out.stdout.strip() or 0) if out.returncode == 0 else 0


GPUS = cuda_gpus()
needs_gpu = pytest.mark.skipif(GPUS < 1, reason="no CUDA GPU usable through PyTorch here")
needs_two = pytest.mark.skipif(GPUS < 2, reason="fewer than 2 CUDA GPUs here")


@pytest.mark.gpu
@needs_gpu
def test_the_worker_measures_every_gpu_against_host_memory():
    out = subprocess.run(
        [sys.executable, str(WORKER), "--bandwidth-bytes=33554432", "--check-bytes=4194304",
         "--iters=10"], capture_output=True, text=True, timeout=300, check=True,
    )
    section = p2p.parse_worker_output(out.stdout)
    assert section.measured, section.reason
    assert len(section.host_paths) == GPUS
    for host in section.host_paths:
        assert 0 < host.h2d_latency_us < 10_000
        assert host.h2d_bandwidth_gbps > 1


@pytest.mark.gpu
@needs_two
def test_every_ordered_pair_delivers_the_pattern_to_the_peer():
    out = subprocess.run(
        [sys.executable, str(WORKER), "--bandwidth-bytes=33554432", "--check-bytes=4194304",
         "--iters=10"], capture_output=True, text=True, timeout=300, check=True,
    )
    section = p2p.parse_worker_output(out.stdout)
    assert len(section.pairs) == GPUS * (GPUS - 1)
    for pair in section.pairs:
        assert pair.data_delivered, json.dumps(pair.model_dump())


@pytest.mark.gpu
@needs_two
def test_all_reduce_sums_right_with_and_without_p2p():
    section = allreduce.measure_allreduce(sys.executable, GPUS, plan_for(True), 240)
    assert section.measured, section.reason
    assert [r.label for r in section.runs] == ["default", "p2p_disabled"]
    for run in section.runs:
        assert run.measured, run.reason
        assert all(row.correct for row in run.rows)
        assert run.env["NCCL_NVLS_ENABLE"] == "0"
