"""Exercise the pair and all-reduce code paths on ONE GPU (not a P2P measurement).

The pair path copies GPU0 -> GPU0 and the all-reduce runs with one rank: this only shows that
the code runs on real CUDA and NCCL, so that a first multi-GPU run is not also its first run.
Usage on a GPU machine: `python3 tests/probe/smoke_single_gpu.py > smoke.json`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2]))

from pvefix.probe import allreduce
from pvefix.probe.sizes import plan_for

spec = importlib.util.spec_from_file_location("w", allreduce.WORKER.with_name("_p2p_worker.py"))
assert spec is not None and spec.loader is not None
worker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)
torch = importlib.import_module("torch")

result = {"self_pair": worker._pair(torch, 0, 0, 4, 32 << 20, 4 << 20, 10), "sweeps": []}
for label, extra in allreduce.VARIANTS:
    env = allreduce.child_env(os.environ, extra)
    run = allreduce.run_sweep(sys.executable, 1, plan_for(False), label, env, 240)
    result["sweeps"].append(run.model_dump())
print(json.dumps(result, indent=1))
