"""`pvefix check --rehearse` on a simulated cluster: one node with 8 GPU VMs, and 4 nodes with
8 GPU VMs each, rehearsed for real (this machine's QEMU under TCG, fw-lab's edk2 2025.02 OVMF,
through each simulated node's SSH and the node script).

The tree is the generated `cluster3` with a fourth node (`dorado`, a copy of borealis's host
files) and every node's VMs replaced by 8 stopped VMs passing that node's first GPU: q35/OVMF
with the L4's 32 GiB BAR, and on cygnus i440fx/SeaBIOS with the H100 NVL's 128 GiB BAR.
Timed in-process (`pvefix.main.main`), the simulator in the same process; each figure is the
rehearsal's own note ("rehearsed ... in N s") and the wall time of the whole check. For
comparison the cluster is also rehearsed one node at a time (NODE_WORKERS set to 1 for that
run; `--workers 1` would do it too, but the check's read deadlocks with one worker: see
docs/benchmarks.md). Usage:

    python bench/rehearse_cluster.py [--per-node 8] [--repeat 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

NODES = {"atlas": "0000:01:00.0", "borealis": "0000:3b:00.0", "cygnus": "0000:41:00.0",
         "dorado": "0000:3b:00.0"}
FIRST = {"atlas": 400, "borealis": 500, "cygnus": 600, "dorado": 700}
EDK2 = HERE.parent.parent / "shared" / "fw-lab" / "firmware" / "edk2-2025.02"


def _conf(vmid: int, node: str, gpu: str) -> str:
    """q35 with OVMF and the L4 (32 GiB BAR); on cygnus the H100 NVL (128 GiB BAR) on
    Proxmox's defaults (i440fx, SeaBIOS), which places it: OVMF's default window does not,
    and a firmware that does not finish would time each run out instead of measuring it."""
    if node == "cygnus":
        head = f"hostpci0: {gpu}\n"
    else:
        head = f"bios: ovmf\nhostpci0: {gpu},pcie=1\nmachine: q35\n"
    return (f"{head}boot: order=scsi0\ncores: 4\nmemory: 8192\nname: gpu{vmid}\nostype: l26\n"
            f"scsi0: local-zfs:vm-{vmid}-disk-0,size=32G\n")


def make_tree(dest: Path, per_node: int) -> list[int]:
    """cluster3 with a fourth node and `per_node` GPU VMs on each; the VM ids."""
    from pvefix.hosttree import materialize_scenario

    materialize_scenario("cluster3", dest)
    shutil.copytree(dest / "nodes" / "borealis", dest / "nodes" / "dorado")
    meta_path = dest / "pvefix-host.json"
    meta = json.loads(meta_path.read_text())
    meta["cluster_nodes"].append("dorado")
    meta["nodes"]["dorado"] = meta["nodes"]["borealis"]
    meta.pop("vms", None)  # run states of cluster3's own VMs: every new VM is stopped
    meta_path.write_text(json.dumps(meta))
    vmids = []
    for node, gpu in NODES.items():
        folder = dest / "etc" / "pve" / "nodes" / node / "qemu-server"
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.conf"):
            old.unlink()
        for vmid in range(FIRST[node], FIRST[node] + per_node):
            (folder / f"{vmid}.conf").write_text(_conf(vmid, node, gpu))
            vmids.append(vmid)
    return vmids


def check(ready: Path, desired: Path, vmids: list[int], *extra: str) -> dict[str, Any]:
    """One `check --rehearse` of `vmids`: its wall time, the rehearsal's own seconds, the
    outcomes."""
    from pvefix.main import main

    out = ready.parent / "check.json"
    start = time.monotonic()
    main(["check", *map(str, vmids), "--connection", str(ready), "--desired", str(desired),
          "--rehearse", "--rehearse-accel", "tcg", "--rehearse-firmware-dir", str(EDK2),
          "--rehearse-timeout", "60", "--format", "json", "-o", str(out), *extra])
    wall = time.monotonic() - start
    data = json.loads(out.read_text())
    note = next(n for n in data["notes"] if n.startswith("rehearsed"))
    took = re.search(r" in ([0-9.]+) s", note)
    outcomes: dict[str, int] = {}
    for item in data["items"]:
        if item["key"] == "rehearsal":
            outcomes[item["got"]] = outcomes.get(item["got"], 0) + 1
    return {"vms": len(vmids), "wall_s": round(wall, 1),
            "rehearse_s": float(took.group(1)) if took else None, "outcomes": outcomes}


def serial(ready: Path, desired: Path, vmids: list[int]) -> dict[str, Any]:
    """`check` with one node rehearsing at a time."""
    from pvefix.flow import check_rehearsal

    saved = check_rehearsal.NODE_WORKERS
    check_rehearsal.NODE_WORKERS = 1
    try:
        return check(ready, desired, vmids)
    finally:
        check_rehearsal.NODE_WORKERS = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-node", type=int, default=8, help="GPU VMs on each node")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each measurement")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if not EDK2.is_dir() or shutil.which("qemu-system-x86_64") is None:
        print(f"skipped: needs qemu-system-x86_64 and fw-lab's firmware ({EDK2})")
        return
    from pvefix.main import main as pvefix_main
    from pvefix.sim.serve import Simulator, write_ready_file

    base = Path(tempfile.mkdtemp(prefix="pvefix-bench-rehearse-"))
    os.environ["XDG_CONFIG_HOME"] = str(base)
    os.environ["PVEFIX_STATE_DIR"] = str(base / "state")
    vmids = make_tree(base / "tree", args.per_node)
    sim = Simulator(str(base / "tree"), base / "sim", task_seconds=0.05)
    ready = base / "ready.json"
    write_ready_file(sim.start(), ready)
    results: dict[str, list[dict[str, Any]]] = {"one node": [], "cluster": [],
                                                "cluster, one node at a time": []}
    try:
        desired = base / "desired.toml"
        pvefix_main(["desired", *map(str, vmids), "--from", "current", "--connection",
                     str(ready), "-o", str(desired)])
        one = [v for v in vmids if FIRST["borealis"] <= v < FIRST["cygnus"]]
        for _ in range(args.repeat):
            results["one node"].append(check(ready, desired, one))
            results["cluster"].append(check(ready, desired, vmids))
            results["cluster, one node at a time"].append(serial(ready, desired, vmids))
    finally:
        sim.stop()
        shutil.rmtree(base, ignore_errors=True)
    load = os.getloadavg()
    if args.json:
        print(json.dumps({"load": load, "results": results}, indent=2))
        return
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, {os.cpu_count()} cores")
    for what, runs in results.items():
        for run in runs:
            print(f"{what}: {run['vms']} VMs, rehearsals {run['rehearse_s']} s, "
                  f"whole check {run['wall_s']} s, {run['outcomes']}")


if __name__ == "__main__":
    main()
