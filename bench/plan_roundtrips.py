"""Round trips of a live read (what `pvefix plan` does before planning) against the simulator.

Counts sequential API waves and requests (from a record of every request's start and end on
the requests Session), SSH connections, rounds and exec channels, and wall time, with latency
added to every API request and SSH command. Target: at most 2 API waves plus one SSH session.

    .venv/bin/python bench/plan_roundtrips.py --latency-ms 20 [--scenario kpro6 --vmid 100]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from pvefix.sim.serve import running_simulator, write_ready_file
from pvefix.sources.live import LiveTrace, read_live
from pvefix.target.api import count_waves
from pvefix.target.settings import resolve_connection


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--scenario", default="kpro6")
    parser.add_argument("--vmid", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp, running_simulator(
        args.scenario, Path(tmp) / "root", latency_ms=args.latency_ms
    ) as info:
        ready = Path(tmp) / "ready.json"
        write_ready_file(info, ready)
        base = resolve_connection(connection_file=ready, env={})
        cases = [
            ("token, node known", {"auth": "token"}),
            ("token, node unknown", {"auth": "token", "node": None}),
            ("password, node known", {"auth": "password"}),
            ("token, no SSH", {"auth": "token", "ssh": False}),
        ]
        for label, changes in cases:
            conn = base.model_copy(update=changes)
            walls: list[float] = []
            for _ in range(args.repeat):
                trace = LiveTrace(record_api=True)
                start = time.perf_counter()
                read_live(conn, args.vmid, trace=trace)
                walls.append(time.perf_counter() - start)
            assert trace.api is not None
            records = trace.api.records
            rows.append((
                label,
                len(records),
                count_waves(records),
                1 if trace.ssh_connect else 0,
                len(trace.ssh_rounds),
                sum(n for _, _, n in trace.ssh_rounds),
                statistics.median(walls) * 1000,
            ))

    print(f"live read of VM {args.vmid} on '{args.scenario}', {args.latency_ms} ms added to "
          f"every API request and SSH command, median of {args.repeat}")
    header = ("case", "API req", "API waves", "SSH conn", "SSH rounds", "SSH execs", "wall ms")
    print(f"{header[0]:<24}" + "".join(f"{h:>11}" for h in header[1:]))
    for row in rows:
        print(f"{row[0]:<24}" + "".join(f"{v:>11}" for v in row[1:6]) + f"{row[6]:>11.0f}")
    worst = max(row[2] for row in rows)
    print(f"max API waves: {worst} (target <= 2); SSH: one connection per read")
    return 0 if worst <= 2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
