"""How many config GETs a second the simulator serves (proxmoxer, keep-alive, zero latency).

Starts `pvefix sim serve` in its own process (its own GIL, as in real use), then drives
GET /nodes/{node}/qemu/{vmid}/config through proxmoxer's https backend (a requests Session, so
one kept-alive TLS connection per client) from 1 and then N client processes, and prints the
rate for each. Usage: python bench/sim_throughput.py [--seconds 5] [--clients 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import signal
import sys
import tempfile
import time
from pathlib import Path


def _client(info: dict[str, str], vmid: int, seconds: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    from proxmoxer import ProxmoxAPI

    host = info["api_url"].removeprefix("https://")
    user, _, token = info["token_id"].partition("!")
    prox = ProxmoxAPI(host, user=user, token_name=token, token_value=info["token_secret"],
                      verify_ssl=info["ca_cert"])
    config = prox.nodes(info["node"]).qemu(vmid).config
    config.get()  # connect and warm up
    count, deadline = 0, time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        data = config.get()
        assert "digest" in data
        count += 1
    out.put((count, time.perf_counter() - start))


def run(clients: int, seconds: float, info: dict[str, str], vmid: int) -> float:
    queue: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    procs = [mp.Process(target=_client, args=(info, vmid, seconds, queue)) for _ in range(clients)]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=seconds + 60) for _ in procs]
    for proc in procs:
        proc.join()
    return sum(count / elapsed for count, elapsed in results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--scenario", default="kpro6")
    parser.add_argument("--vmid", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from pvefix.sim.serve import spawn_simulator

    with tempfile.TemporaryDirectory(prefix="pvefix-bench-") as tmp:
        proc, ready = spawn_simulator(args.scenario, Path(tmp) / "tree", Path(tmp) / "ready.json")
        try:
            info = ready.model_dump()
            rates = {n: run(n, args.seconds, info, args.vmid)
                     for n in sorted({1, max(1, args.clients)})}
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    if args.json:
        print(json.dumps({"config_gets_per_s": {str(k): round(v, 1) for k, v in rates.items()},
                          "seconds": args.seconds, "scenario": args.scenario}))
    else:
        for n, rate in rates.items():
            print(f"config GET via proxmoxer, keep-alive, {n} client process(es): {rate:,.0f}/s")
        print(f"best: {max(rates.values()):,.0f} config GETs/s (target >= 1,000)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
