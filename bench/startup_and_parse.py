"""Benchmarks for the foundation: CLI start-up and corpus parse+write throughput.

Run: .venv/bin/python bench/startup_and_parse.py   (or `make bench`)
Prints figures; budgets: `pvefix --version` under 150 ms, >= 20,000 configs/s parse+write.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("PVEFIX_SHARED", ROOT.parent / "shared")) / "corpus" / "qemu-server"


def startup(args: list[str], runs: int = 15) -> float:
    cmd = [sys.executable, "-m", "pvefix", *args]
    subprocess.run(cmd, check=True, capture_output=True)  # warm the page cache
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def python_floor(runs: int = 15) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def throughput(seconds: float = 2.0) -> tuple[float, int]:
    from pvefix.vmconfig import VMConfig

    texts = [p.read_text() for p in sorted(CORPUS.rglob("*.conf"))]
    done = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for text in texts:
            if VMConfig.parse(text).render() != text:
                raise SystemExit("round trip failed")
        done += len(texts)
    return done / (time.perf_counter() - t0), len(texts)


def main() -> None:
    floor = python_floor()
    version = startup(["--version"])
    help_ms = startup(["--help"])
    rate, n = throughput()
    print(f"python -c pass           : {floor:7.1f} ms (interpreter floor)")
    print(f"pvefix --version         : {version:7.1f} ms (budget 150 ms)")
    print(f"pvefix --help            : {help_ms:7.1f} ms")
    print(f"parse+render, {n} configs: {rate:9.0f} configs/s (budget 20,000/s)")


if __name__ == "__main__":
    main()
