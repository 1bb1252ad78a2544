"""Benchmarks for start-up and corpus parse+write throughput.

Run: .venv/bin/python bench/startup_and_parse.py [--runs 21]   (or `make bench`)
     ... --against DIR   also times `plan` from another pvefix tree (e.g. `git archive main`
                         unpacked in DIR), interleaved with this one's: a change's cost.

Start-up is measured end to end as an admin sees it: a fresh interpreter each time, the same
interpreter for every command, the commands interleaved (so load on the machine hits them
alike), medians of `--runs` runs. Printed with the load average, because on a shared machine
the absolute figures move with it and the ratios much less. Budgets (issue 16):
`pvefix plan VMID --bundle DIR` within 4x of `python -c "import pydantic"`;
`pvefix --version` under 50 ms; parse+write at least 20,000 configs/s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("PVEFIX_SHARED", ROOT.parent / "shared")) / "corpus" / "qemu-server"


# As installed (pip and pipx compile every module to bytecode when they install): the first
# run writes pvefix's .pyc files even where PYTHONDONTWRITEBYTECODE is set for development.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


Command = tuple[list[str], tuple[int, ...], Path | None]  # argv, exit codes that pass, cwd


def _once(argv: list[str], ok: tuple[int, ...], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False, env=ENV, cwd=cwd)
    elapsed = time.perf_counter() - start
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed


def startup(commands: dict[str, Command], runs: int) -> dict[str, float]:
    """Median wall time (ms) of each command, the commands run in turn `runs` times (`python
    -m pvefix` runs the tree its cwd is in: this checkout's, or --against's)."""
    for argv, ok, cwd in commands.values():
        _once(argv, ok, cwd)  # warm the page cache and the bytecode cache
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (argv, ok, cwd) in commands.items():
            times[name].append(_once(argv, ok, cwd))
    return {name: statistics.median(t) * 1000 for name, t in times.items()}


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
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="runs per command (median)")
    parser.add_argument("--against", type=Path, help="another pvefix tree: its `plan` too")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from pvefix.hosttree import materialize_scenario

    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="pvefix-bench-start-") as tmp:
        bundle = Path(tmp) / "kpro6"
        materialize_scenario("kpro6", bundle)
        plan = [py, "-m", "pvefix", "plan", "100", "--bundle", str(bundle)]
        commands: dict[str, Command] = {
            "pass": ([py, "-c", "pass"], (0,), None),
            "pydantic": ([py, "-c", "import pydantic"], (0,), None),
            "version": ([py, "-m", "pvefix", "--version"], (0,), ROOT),
            "help": ([py, "-m", "pvefix", "--help"], (0,), ROOT),
            "plan": (plan, (0, 2), ROOT),
        }
        if args.against is not None:
            commands["against"] = (plan, (0, 2), args.against.resolve())
        load = os.getloadavg()
        ms = startup(commands, args.runs)
        load_after = os.getloadavg()
    rate, n = throughput()
    ratio = ms["plan"] / ms["pydantic"]
    print(f"start-up, medians of {args.runs} interleaved runs, load average "
          f"{load[0]:.1f} before / {load_after[0]:.1f} after ({os.cpu_count()} CPUs):")
    print(f"  python -c pass                      : {ms['pass']:7.1f} ms (interpreter floor)")
    print(f"  python -c 'import pydantic'         : {ms['pydantic']:7.1f} ms")
    print(f"  pvefix --version                    : {ms['version']:7.1f} ms (budget 50 ms)")
    print(f"  pvefix --help                       : {ms['help']:7.1f} ms")
    print(f"  pvefix plan 100 --bundle kpro6      : {ms['plan']:7.1f} ms = {ratio:.1f}x "
          "import pydantic (budget 4x)")
    if "against" in ms:
        print(f"  the same plan from {args.against}: {ms['against']:7.1f} ms = "
              f"{ms['against'] / ms['pydantic']:.2f}x (this tree: {ratio:.2f}x)")
    print(f"parse+render, {n} configs: {rate:9.0f} configs/s (budget 20,000/s)")


if __name__ == "__main__":
    main()
