"""What a simulated guest's `nvidia-smi` says about its GPUs, decided by the running QEMU.

A simulated guest has no GPU. So that tests can see the P2P phase work end to end, each guest
gets a stand-in `nvidia-smi` (first on its PATH) that lists one GPU per NVIDIA vfio-pci device
of the VM's running QEMU command line (sim/qemu_cmdline.py) and answers `topo -p2p MODE` as the
guest driver would: `OK` between two GPUs of one x-nv-gpudirect-clique while KVM is visible
(no `kvm=off` on -cpu), `NS` otherwise (DOMAIN.md section 6). `--query-gpu` and `topo -p2p`
are answered; anything else exits 1 (the probe then says it was not measured). It measures
nothing: latency, bandwidth and data delivery need real GPUs (pvefix probe on a real guest).
"""

from __future__ import annotations

import contextlib
import itertools
import shlex
import shutil
from pathlib import Path

from pvefix.sim.qemu_cmdline import qemu_pid
from pvefix.sim.state import NodeState
from pvefix.vmconfig.args import clique_map

NVIDIA = "0x10de"
MODES = ("r", "w", "n", "a", "p")
SCRIPT = """#!/bin/sh
# pvefix simulator: a stand-in nvidia-smi (pvefix/sim/guest_gpus.py)
d=$(dirname "$0")/nvidia-smi.d
case "$1" in
  --query-gpu=*) exec cat "$d/query.csv" ;;
  topo) [ "$2" = "-p2p" ] && [ -f "$d/p2p-$3.txt" ] && exec cat "$d/p2p-$3.txt" ;;
esac
echo "pvefix simulator: nvidia-smi $* is not emulated" >&2
exit 1
"""


def gpus_and_matrix(words: list[str], nvidia: set[str],
                    blocked: bool = False) -> tuple[list[str], list[list[str]]]:
    """(vfio-pci ids of NVIDIA GPUs in QEMU order, the topo -p2p matrix between them);
    `blocked`: a host whose GPUs cannot P2P (the `p2p-blocked` fault)."""
    ids: list[str] = []
    for w, v in itertools.pairwise(words):
        if w == "-device" and v.startswith("vfio-pci,"):
            opts = dict(p.split("=", 1) for p in v.split(",")[1:] if "=" in p)
            if opts.get("host") in nvidia and "id" in opts:
                ids.append(opts["id"])
    cpu = words[words.index("-cpu") + 1] if "-cpu" in words else ""
    hidden = "kvm=off" in cpu.split(",")
    cliques = clique_map(shlex.join(words))
    matrix = []
    for a in ids:
        row = []
        for b in ids:
            same = cliques.get(a) is not None and cliques.get(a) == cliques.get(b)
            row.append("X" if a == b else ("OK" if same and not (hidden or blocked) else "NS"))
        matrix.append(row)
    return ids, matrix


def _matrix_text(n: int, matrix: list[list[str]]) -> str:
    labels = [f"GPU{i}" for i in range(n)]
    lines = [" \t" + "\t".join(labels)]
    for label, row in zip(labels, matrix, strict=True):
        lines.append(f" {label}\t" + "\t".join(row))
    lines.append("")
    lines.append("Legend:")
    lines.append("  X    = Self")
    lines.append("  OK   = Status Ok")
    lines.append("  NS   = Not supported")
    return "\n".join(lines) + "\n"


def write_view(state: NodeState, vmid: int, root: Path) -> None:
    """(Re)write guest `root`'s nvidia-smi view from VM `vmid`'s running QEMU (none: stopped)."""
    from pvefix.sim.vmops import running_cmdline

    bin_dir = root / "bin"
    text = running_cmdline(state, qemu_pid(vmid))
    nvidia = {d.address for d in state.tree.pci_devices()
              if d.vendor == NVIDIA and d.is_display}
    blocked = vmid in state.faults.settings.p2p_blocked
    ids, matrix = (gpus_and_matrix(text.split("\0")[:-1], nvidia, blocked) if text
                   else ([], []))
    if not ids:  # stopped, or no NVIDIA GPU passed: no nvidia-smi, as on such a guest
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(bin_dir)
        return
    data = bin_dir / "nvidia-smi.d"
    data.mkdir(parents=True, exist_ok=True, mode=0o700)
    rows = [f"{i}, NVIDIA Simulated GPU, 00000000:{i + 1:02X}:00.0, 97887, 580.95.05, 5, 16, 5, 16"
            for i in range(len(ids))]
    (data / "query.csv").write_text("".join(r + "\n" for r in rows))
    for mode in MODES:
        (data / f"p2p-{mode}.txt").write_text(_matrix_text(len(ids), matrix) if ids else "")
    script = bin_dir / "nvidia-smi"
    script.write_text(SCRIPT)
    script.chmod(0o700)
