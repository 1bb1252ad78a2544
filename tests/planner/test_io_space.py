"""pvefix.planner.io_space held to the fw-lab runs that measured OVMF's I/O port space
(tests/planner/io_space_runs.json): on the edk2 builds measured, OVMF drops a GPU exactly
where the VM's I/O windows reach IO_WINDOWS_DROPPED, and places every BAR at
IO_WINDOWS_PLACED and below; and the planner counts the windows of a VM as the runs lay them
out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pvefix.planner import io_space

RUNS = json.loads((Path(__file__).parent / "io_space_runs.json").read_text())["runs"]


def _windows(run: dict[str, Any]) -> int:
    """Root ports with an I/O BAR behind them (each stand-in has one) plus pci-bridges with a
    transitional virtio function."""
    ports = int(run["bars"].split("x")[0])
    bridges = {next(p for p in d.split(",") if p.startswith("bus=")) for d in run["devices"]
               if "disable-legacy=on" not in d}
    return ports + len(bridges)


@pytest.mark.parametrize("run", RUNS, ids=[r["label"] for r in RUNS])
def test_the_io_window_count_decides_what_ovmf_drops(run: dict[str, Any]) -> None:
    count = _windows(run)
    dropped = run["outcome"] == "not-placed"
    if run["firmware_set"].startswith("edk2"):
        assert io_space.edk2_measured(run["firmware_set"])
        assert dropped == (count >= io_space.IO_WINDOWS_DROPPED), (run["label"], count)
        if dropped:  # one GPU, the largest consumer, not a share of each
            assert run["bars_assigned"] == int(run["bars"].split("x")[0]) - 1
    else:  # SeaBIOS: the finding is OVMF's only
        assert not dropped and count >= io_space.IO_WINDOWS_DROPPED


def test_the_thresholds_are_the_runs_edges() -> None:
    edk2 = [(_windows(r), r["outcome"]) for r in RUNS if r["firmware_set"].startswith("edk2")]
    assert max(c for c, o in edk2 if o == "placed") == io_space.IO_WINDOWS_PLACED
    assert min(c for c, o in edk2 if o == "not-placed") == io_space.IO_WINDOWS_DROPPED
