"""`pvefix check --all` against the simulator's generated `large` cluster (8 nodes).

One simulator (`pvefix sim serve --scenario large --vms N`, its own process); a desired state for
every VM (from the tree itself, so there is no drift). Latency is set live through the
simulator's /_sim/inject, so the same cluster is read at 0 ms and at --latency-ms:

- bulk path (every VM config in one SSH command, run states in one API wave) and, for
  comparison, the per-VM API path, both in-process; `/_sim/stats` counts requests, SSH
  channels and waves (idle-to-busy transitions of the simulator) for each;
- sequential round trips measured as (t at L ms - t at 0 ms) / L ms;
- the whole CLI as a subprocess at L ms;
- Ansible's community.proxmox.proxmox_vm_info (config=current), when bench/out/ansible-venv
  has it (see bench/ansible_vm_info.py), in the same run against the same simulator.

Printed as ratios and wave counts. Usage:
    python bench/check_all.py [--vms 1000] [--latency-ms 20] [--repeat 3] [--ansible] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# As installed (pip compiles every module to bytecode at install): the warm-up run writes
# pvefix's .pyc files even where PYTHONDONTWRITEBYTECODE is set for development, so the timed
# runs do not time the compiler (bench/startup_and_parse.py does the same).
INSTALLED_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _desired_for_tree(root: Path) -> Any:
    from pvefix.desired.tree import desired_from_tree
    from pvefix.hosttree.tree import load_tree

    return desired_from_tree(load_tree(root))


class Sim:
    """The simulator's controls: latency and stats, with a root ticket."""

    def __init__(self, info: Any) -> None:
        self.info = info

    def stats(self, reset: bool = False) -> dict[str, Any]:
        from pvefix.sim.stats import fetch_stats

        i = self.info
        return fetch_stats(i.api_url, i.ca_cert, i.user, i.password, reset=reset)

    def latency(self, ms: int) -> None:
        import requests

        i = self.info
        with requests.Session() as s:
            login = s.post(f"{i.api_url}/api2/json/access/ticket", verify=i.ca_cert,
                           data={"username": i.user, "password": i.password}, timeout=30).json()
            s.cookies.set("PVEAuthCookie", login["data"]["ticket"])
            s.headers["CSRFPreventionToken"] = login["data"]["CSRFPreventionToken"]
            s.post(f"{i.api_url}/api2/json/_sim/inject", data={"latency": str(ms)},
                   verify=i.ca_cert, timeout=30).raise_for_status()


def _timed(sim: Sim, repeat: int, run: Callable[[], Any]) -> tuple[float, dict[str, Any], Any]:
    """Best of `repeat` runs, the stats of the last one, and its result."""
    times: list[float] = []
    cost: dict[str, Any] = {}
    result = None
    for _ in range(repeat):
        sim.stats(reset=True)
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
        cost = sim.stats(reset=True)
    return min(times), cost, result


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--vms", type=int, default=1000, help="VMs in the generated cluster")
    parser.add_argument("--latency-ms", type=int, default=20, help="latency per request/command")
    parser.add_argument("--workers", type=int, default=32, help="API requests in flight")
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (best)")
    parser.add_argument("--per-vm", action="store_true",
                        help="also time the per-VM API path (the fallback without SSH)")
    parser.add_argument("--ansible", action="store_true",
                        help="also run Ansible's proxmox_vm_info (bench/out/ansible-venv)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent))
    from pvefix.check.run import check_live
    from pvefix.desired import dumps_desired
    from pvefix.sim.serve import spawn_simulator
    from pvefix.target.settings import resolve_connection

    lat = args.latency_ms
    out: dict[str, Any] = {"scenario": "large", "vms": args.vms, "latency_ms": lat,
                           "load_before": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="pvefix-bench-check-") as tmp:
        base = Path(tmp)
        start = time.perf_counter()
        proc, info = spawn_simulator("large", base / "tree", base / "ready.json",
                                     extra_args=["--vms", str(args.vms)], timeout_s=300)
        out["sim_start_s"] = round(time.perf_counter() - start, 2)
        try:
            sim = Sim(info)
            desired = _desired_for_tree(base / "tree")
            desired_file = base / "desired.toml"
            desired_file.write_text(dumps_desired(desired), encoding="utf-8")
            conn = resolve_connection(connection_file=base / "ready.json", env={}, config=None)

            def bulk() -> Any:
                return check_live(conn, desired, [], all_vms=True, workers=args.workers)

            def per_vm() -> Any:
                return check_live(conn, desired, [], all_vms=True, workers=args.workers,
                                  bulk=False)

            def cli() -> Any:
                done = subprocess.run(
                    [sys.executable, "-m", "pvefix", "check", "--all", "--desired",
                     str(desired_file), "--connection", str(base / "ready.json"),
                     "--workers", str(args.workers), "--format", "json"],
                    capture_output=True, text=True, check=False, env=INSTALLED_ENV)
                if done.returncode != 0:
                    raise SystemExit(f"pvefix check exited {done.returncode}: {done.stderr}")
                return json.loads(done.stdout)

            sim.latency(0)
            bulk()  # warm-up, not timed: the simulator's and the client's first-run costs
            # At 0 ms and at L ms in turn, so a change of the machine's load hits both alike.
            runs0: list[float] = []
            runs1: list[float] = []
            cost1: dict[str, Any] = {}
            for _ in range(args.repeat):
                sim.latency(0)
                t, _, report = _timed(sim, 1, bulk)
                runs0.append(t)
                assert report.read_path == "bulk" and report.exit_code == 0, report.notes
                sim.latency(lat)
                t, cost1, _ = _timed(sim, 1, bulk)
                runs1.append(t)
            t0, t1 = min(runs0), min(runs1)
            # How far repeated runs at one latency differ: a difference between the two
            # latencies below it is the machine's, not round trips.
            spread = max(max(runs0) - t0, max(runs1) - t1)
            cli()  # warm-up, not timed: writes the bytecode an install would have
            tc, _, cli_json = _timed(sim, args.repeat, cli)
            out["bulk"] = {
                "t0_s": round(t0, 3), "t_s": round(t1, 3), "cli_s": round(tc, 3),
                "round_trips": round((t1 - t0) / (lat / 1000), 1) if lat else None,
                "spread_s": round(spread, 3), "waves": cost1["waves"],
                "api_requests": cost1["requests_total"],
                "ssh_channels": cost1["ssh_channels_total"],
                "ssh_connections": cost1["ssh_connections"],
                "requests": cost1["requests"], "read_path": cli_json["read_path"],
                "items": len(report.items),
            }
            if args.per_vm:
                sim.latency(0)
                p0, _, _ = _timed(sim, 1, per_vm)
                sim.latency(lat)
                p1, pcost, _ = _timed(sim, 1, per_vm)
                out["per_vm"] = {
                    "t0_s": round(p0, 3), "t_s": round(p1, 3),
                    "round_trips": round((p1 - p0) / (lat / 1000), 1) if lat else None,
                    "waves": pcost["waves"], "api_requests": pcost["requests_total"],
                }
            if args.ansible:
                sys.path.insert(0, str(HERE))
                from ansible_vm_info import run_vm_info

                sim.latency(lat)
                ta, acost, count = _timed(sim, 1, lambda: run_vm_info(info, base))
                out["ansible"] = {"t_s": round(ta, 3), "vms": count,
                                  "api_requests": acost["requests_total"],
                                  "waves": acost["waves"]}
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    out["load_after"] = round(os.getloadavg()[0], 2)
    b = out["bulk"]
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"pvefix check --all: {args.vms} VMs on 8 nodes (large), {lat} ms per request/command,"
          f" simulator up in {out['sim_start_s']} s; load average {out['load_before']} before,"
          f" {out['load_after']} after ({os.cpu_count()} CPUs)")
    def trips_text(trips: float | None, runs: int, spread: float | None = None) -> str:
        if trips is None:
            return "no latency injected"
        if runs < 3:
            return (f"{trips} sequential round trips by timing, from one run each: that is the "
                    "machine's noise; the simulator's wave count is the figure")
        if spread is not None and abs(trips) * lat / 1000 < spread:
            return (f"{trips} sequential round trips by timing, within the {spread:.3f} s the "
                    "repeated runs differ by: not measurable; the simulator's wave count is "
                    "the figure")
        if trips < 0.5:
            return (f"{trips} sequential round trips, i.e. none measurable: the latency is "
                    "hidden behind the work, which is CPU-bound here")
        return f"{trips} sequential round trips"

    print(f"  bulk path: {b['t_s']} s at {lat} ms, {b['t0_s']} s at 0 ms -> "
          f"{trips_text(b['round_trips'], args.repeat, b['spread_s'])} (target <= 6); "
          "simulator counted "
          f"{b['waves']} waves, {b['api_requests']} API requests, {b['ssh_connections']} SSH "
          f"connection with {b['ssh_channels']} channels; whole CLI {b['cli_s']} s "
          f"(read path in its JSON: {b['read_path']})")
    if "per_vm" in out:
        p = out["per_vm"]
        print(f"  per-VM API path (no SSH): {p['t_s']} s at {lat} ms "
              f"({trips_text(p['round_trips'], 1)}; {p['waves']} waves, "
              f"{p['api_requests']} requests): bulk is "
              f"{p['t_s'] / b['t_s']:.1f}x faster")
    if "ansible" in out:
        a = out["ansible"]
        print(f"  Ansible community.proxmox.proxmox_vm_info (config=current): {a['t_s']} s for "
              f"{a['vms']} VMs ({a['api_requests']} requests, {a['waves']} waves): "
              f"pvefix check --all is {a['t_s'] / b['t_s']:.1f}x faster in-process, "
              f"{a['t_s'] / b['cli_s']:.1f}x as whole processes (target >= 30x, goal 50x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
