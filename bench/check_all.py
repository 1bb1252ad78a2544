"""`pvefix check --all` against the simulator's `large` scenario (8 nodes, 1,000 VMs).

Starts `pvefix sim serve --scenario large --latency-ms 20` in its own process, writes a desired
state for every VM (from the tree itself, so there is no drift), then times the check: the
in-process call (with request count and peak concurrency) and the whole CLI as a subprocess.
Target: under 3 s for all 1,000 VMs at 20 ms. Usage:
    python bench/check_all.py [--latency-ms 20] [--workers 32] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _desired_for_tree(root: Path) -> object:
    from pvefix.desired import desired_from_state
    from pvefix.desired.store import merge
    from pvefix.hosttree.tree import load_tree
    from pvefix.sources.bundle import read_tree

    tree = load_tree(root)
    return merge([(str(v), desired_from_state(read_tree(tree, v))) for v in sorted(tree.vms())])


def _peak(records: list[object]) -> int:
    events = []
    for r in records:
        events.append((r.start, 1))  # type: ignore[attr-defined]
        events.append((r.end, -1))  # type: ignore[attr-defined]
    peak = level = 0
    for _, step in sorted(events):
        level += step
        peak = max(peak, level)
    return peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from pvefix.check import cluster
    from pvefix.check.run import check_live
    from pvefix.connection.settings import resolve_connection
    from pvefix.desired import DesiredState, dumps_desired
    from pvefix.sim.serve import spawn_simulator

    with tempfile.TemporaryDirectory(prefix="pvefix-bench-check-") as tmp:
        base = Path(tmp)
        proc, _ = spawn_simulator(
            "large", base / "tree", base / "ready.json",
            extra_args=["--latency-ms", str(args.latency_ms)],
        )
        try:
            desired = _desired_for_tree(base / "tree")
            assert isinstance(desired, DesiredState)
            desired_file = base / "desired.toml"
            desired_file.write_text(dumps_desired(desired), encoding="utf-8")
            conn = resolve_connection(connection_file=base / "ready.json", env={},
                                      config=None)
            times, requests, peaks, codes = [], [], [], []
            opened = cluster.open_api
            for _ in range(args.repeat):
                seen: list[object] = []

                def recording_open(connection: object, workers: int,
                                   seen: list[object] = seen) -> object:
                    api = opened(connection, workers)  # type: ignore[arg-type]
                    api.session.records = []  # type: ignore[attr-defined]
                    seen.append(api.session)  # type: ignore[attr-defined]
                    return api

                cluster.open_api = recording_open  # type: ignore[assignment]
                start = time.perf_counter()
                report = check_live(conn, desired, [], all_vms=True, workers=args.workers)
                times.append(time.perf_counter() - start)
                cluster.open_api = opened
                records = seen[0].records  # type: ignore[attr-defined]
                requests.append(len(records))  # type: ignore[arg-type]
                peaks.append(_peak(records))  # type: ignore[arg-type]
                codes.append(report.exit_code)
            cli_times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-m", "pvefix", "check", "--all", "--desired",
                     str(desired_file), "--connection", str(base / "ready.json"),
                     "--workers", str(args.workers), "--format", "json"],
                    capture_output=True, text=True, check=False,
                )
                cli_times.append(time.perf_counter() - start)
                if done.returncode != 0:
                    print(done.stderr, file=sys.stderr)
                    raise SystemExit(f"pvefix check exited {done.returncode}")
            vm_count = len(desired.vms)
            items = len(report.items)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    result = {
        "scenario": "large", "vms": vm_count, "latency_ms": args.latency_ms,
        "workers": args.workers, "items": items, "exit_codes": codes,
        "check_s": {"best": round(min(times), 3), "median": round(statistics.median(times), 3)},
        "cli_s": {"best": round(min(cli_times), 3),
                  "median": round(statistics.median(cli_times), 3)},
        "api_requests": requests[0], "peak_concurrent_requests": max(peaks),
        "target_s": 3.0,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"pvefix check --all: {vm_count} VMs on 8 nodes, {args.latency_ms} ms latency, "
              f"{args.workers} workers")
        print(f"  in-process check: best {result['check_s']['best']} s, median "
              f"{result['check_s']['median']} s ({requests[0]} API requests, peak "
              f"{max(peaks)} in flight, {items} properties, exit {codes[0]})")
        print(f"  whole CLI (process start to exit): best {result['cli_s']['best']} s, "
              f"median {result['cli_s']['median']} s   (target < 3 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
