"""One rank of the all-reduce sweep, run as a child process (one per GPU).

`python3 _allreduce_worker.py --rank R --world N --port P --sizes 8,32,...`
Standalone: only the standard library and PyTorch. Rank 0 prints one line
`PVEFIX_RESULT {json}` with the median latency per size and whether the sum was right.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
from datetime import timedelta
from typing import Any

MARK = "PVEFIX_RESULT "


def sweep(rank: int, world: int, port: int, sizes: list[int], iters: int) -> list[dict[str, Any]]:
    torch = importlib.import_module("torch")
    dist = importlib.import_module("torch.distributed")

    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
        timeout=timedelta(seconds=120))
    rows = []
    try:
        expected = world * (world + 1) / 2
        for size in sizes:
            numel = max(1, size // 4)
            t = torch.full((numel,), float(rank + 1), dtype=torch.float32, device="cuda")
            dist.all_reduce(t)
            torch.cuda.synchronize()
            correct = bool(torch.all(t == expected).item())
            for _ in range(5):
                dist.all_reduce(t)
            torch.cuda.synchronize()
            times = []
            for _ in range(iters):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                dist.all_reduce(t)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1000.0)
            # The slowest rank's median is what a tensor-parallel step waits for.
            med = torch.tensor([statistics.median(times)], dtype=torch.float64, device="cuda")
            dist.all_reduce(med, op=dist.ReduceOp.MAX)
            ok = torch.tensor([1 if correct else 0], dtype=torch.int32, device="cuda")
            dist.all_reduce(ok, op=dist.ReduceOp.MIN)
            latency = float(med.item())
            nbytes = numel * 4
            rows.append(
                {
                    "bytes": nbytes,
                    "latency_us": latency,
                    # nccl-tests' bus bandwidth for all-reduce: algbw * 2(n-1)/n
                    "bus_bandwidth_gbps": nbytes / (latency * 1e3) * 2 * (world - 1) / world,
                    "correct": bool(ok.item())})
    finally:
        dist.destroy_process_group()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sizes", required=True)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows = sweep(args.rank, args.world, args.port, sizes, args.iters)
    if args.rank == 0:
        print(MARK + json.dumps(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
