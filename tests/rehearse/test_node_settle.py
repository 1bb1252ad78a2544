"""The node script reads query-pci only once the firmware has turned the stand-ins' decoding
on: OVMF writes BootOrder (the boot-manager signal) before its boot manager connects the
devices, and on a loaded node seconds may pass between the two (seen on the CI machine: a
read 1 s after BootOrder found every stand-in at 2^64-1 where the firmware places them)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pvefix.rehearse import node_script

UNDECODED = (1 << 64) - 1


def _pci(*addresses: int) -> list[dict[str, Any]]:
    """query-pci: a root port per stand-in (pci-testdev, 1b36:0005) and its BAR2."""
    ports = [{"id": {"vendor": 0x1B36, "device": 0x000C}, "regions": [],
              "pci_bridge": {"devices": [{"id": {"vendor": 0x1B36, "device": 0x0005},
                                          "regions": [{"bar": 2, "address": a,
                                                       "size": 1 << 35}]}]}}
             for a in addresses]
    host = {"id": {"vendor": 0x8086, "device": 0x29C0}, "regions": []}
    return [{"bus": 0, "devices": [host, *ports]}]


class FakeQmp:
    """Answers query-pci with the next snapshot (the last one from then on)."""

    def __init__(self, snapshots: list[list[dict[str, Any]]]) -> None:
        self.snapshots = snapshots
        self.asked = 0

    def cmd(self, name: str, **_: Any) -> Any:
        assert name == "query-pci"
        self.asked += 1
        return self.snapshots[min(self.asked, len(self.snapshots)) - 1]


def _job(count: int) -> dict[str, Any]:
    argv = ["-m", "1024"]
    for n in range(count):
        argv += ["-device", f"pci-testdev,membar=32768M,id=hostpci{n},bus=ich9-pcie-port-1"]
    return {"argv": argv, "timeout": 60}


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_script.time, "sleep", lambda _: None)


def test_it_reads_again_until_every_stand_in_shows_its_address(tmp_path: Path) -> None:
    placed = _pci(0x54000000000, 0x54800000000)
    qmp = FakeQmp([_pci(UNDECODED, UNDECODED), _pci(0x54000000000, UNDECODED), placed])
    got = node_script.settled_pci(qmp, _job(2), str(tmp_path), time.monotonic() + 60)
    assert got == placed and qmp.asked == 3
    assert node_script.stand_in_bars(got) == [0x54000000000, 0x54800000000]


def test_the_boot_managers_console_line_ends_the_wait(tmp_path: Path) -> None:
    (tmp_path / "serial.log").write_text("BdsDxe: failed to load Boot0001\n")
    first = _pci(UNDECODED)  # the firmware placed nothing: nothing more to wait for
    qmp = FakeQmp([first, _pci(0x3FE000000000)])
    assert node_script.settled_pci(qmp, _job(1), str(tmp_path), time.monotonic() + 60) is first
    assert qmp.asked == 1


def test_a_bar_never_placed_ends_the_wait_after_the_settle_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_script, "SETTLE_S", 0.05)
    qmp = FakeQmp([_pci(UNDECODED, 0x54800000000)])
    got = node_script.settled_pci(qmp, _job(2), str(tmp_path), time.monotonic() + 60)
    assert node_script.stand_in_bars(got) == [UNDECODED, 0x54800000000]
    assert qmp.asked >= 2
    assert not node_script.all_decoded(got, 2) and not node_script.all_decoded(_pci(1 << 40), 2)


class MtreeQmp:
    def __init__(self, mtree: str) -> None:
        self.mtree = mtree

    def cmd(self, name: str, **_: Any) -> Any:
        if name == "human-monitor-command":
            return self.mtree
        raise RuntimeError("not here")


@pytest.mark.parametrize("kind", ["ram", "i/o"])
def test_the_ram_ranges_are_read_with_and_without_a_numa_memory_device(kind: str) -> None:
    """`info mtree` shows ram-below-4g/ram-above-4g as ram (`-machine memory-backend=`) or,
    with a NUMA node's memory device (numa: 1, memory hotplug), as i/o: both are the RAM."""
    mtree = (f"    0000000000000000-000000007fffffff (prio 0, {kind}): alias ram-below-4g @pc.ram "
             "0000000000000000-000000007fffffff\n"
             f"    0000000100000000-000000047fffffff (prio 0, {kind}): alias ram-above-4g @pc.ram "
             "0000000080000000-00000003ffffffff\n"
             "    0000000100000000-000000c07fffffff (prio 0, i/o): device-memory\n")
    got = node_script.read_machine(MtreeQmp(mtree))
    assert got["ram"] == [(0, 0x80000000), (0x100000000, 0x480000000)]
