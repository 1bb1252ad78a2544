"""The node script reads query-pci only once the firmware has turned the stand-ins' decoding
on: OVMF writes BootOrder (the boot-manager signal) before its boot manager connects the
devices, and on a loaded node seconds may pass between the two (seen on the CI machine: a
read 1 s after BootOrder found every stand-in at 2^64-1 where the firmware places them)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pvefix.rehearse import build, node_script

UNDECODED = (1 << 64) - 1


def _pci(*addresses: int, model: str = "pci-testdev") -> list[dict[str, Any]]:
    """query-pci: a root port per stand-in (pci-testdev 1b36:0005, or ivshmem-plain 1af4:1110)
    with its id and its BAR2."""
    ident = {"pci-testdev": (0x1B36, 0x0005), "ivshmem-plain": (0x1AF4, 0x1110)}[model]
    ports = [{"id": {"vendor": 0x1B36, "device": 0x000C}, "regions": [],
              "pci_bridge": {"devices": [{"id": {"vendor": ident[0], "device": ident[1]},
                                          "qdev_id": f"hostpci{n}",
                                          "regions": [{"bar": 2, "address": a,
                                                       "size": 1 << 35}]}]}}
             for n, a in enumerate(addresses)]
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


def _job(count: int, model: str = "pci-testdev") -> dict[str, Any]:
    argv = ["-m", "1024"]
    for n in range(count):
        if model == "pci-testdev":
            argv += ["-device", f"pci-testdev,membar=32768M,id=hostpci{n},bus=ich9-pcie-port-1"]
        else:
            argv += ["-object", f"memory-backend-file,id=bar-hostpci{n},size=32768M,"
                     "mem-path=.,share=on",
                     "-device", f"ivshmem-plain,memdev=bar-hostpci{n},id=hostpci{n},bus=pci.0"]
    return {"argv": argv, "timeout": 60}


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_script.time, "sleep", lambda _: None)


def test_it_reads_again_until_every_stand_in_shows_its_address(tmp_path: Path) -> None:
    placed = _pci(0x54000000000, 0x54800000000)
    qmp = FakeQmp([_pci(UNDECODED, UNDECODED), _pci(0x54000000000, UNDECODED), placed])
    got = node_script.settled_pci(qmp, _job(2), str(tmp_path), time.monotonic() + 60)
    assert got == placed and qmp.asked == 3
    assert node_script.stand_in_bars(got, ["hostpci0", "hostpci1"]) == [
        0x54000000000, 0x54800000000]


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
    ids = ["hostpci0", "hostpci1"]
    assert node_script.stand_in_bars(got, ids) == [UNDECODED, 0x54800000000]
    assert qmp.asked >= 2
    assert not node_script.all_decoded(got, ids)
    assert not node_script.all_decoded(_pci(1 << 40), ids)  # hostpci1 not in query-pci


def test_ivshmem_stand_ins_are_waited_for_too(tmp_path: Path) -> None:
    """A function without an I/O BAR stands in as ivshmem-plain (build.py NO_IO): its BAR2
    is waited for as pci-testdev's is. (Counting pci-testdev alone, a VM of ivshmem stand-ins
    had nothing to wait for, and a loaded node read every BAR undecoded: "not placed".)"""
    placed = _pci(0x54000000000, 0x54800000000, model="ivshmem-plain")
    qmp = FakeQmp([_pci(UNDECODED, UNDECODED, model="ivshmem-plain"), placed])
    got = node_script.settled_pci(qmp, _job(2, "ivshmem-plain"), str(tmp_path),
                                  time.monotonic() + 60)
    assert got == placed and qmp.asked == 2


def test_the_stand_in_ids_are_those_the_job_boots() -> None:
    """The node script (sent alone to the node) names the stand-in models as build.py does;
    its ids are the job's stand-ins, for a VM of both kinds."""
    assert (f"{build.STAND_IN},", f"{build.NO_IO},") == node_script.STAND_IN_MODELS
    planned = {"machine": "q35", "bios": "ovmf", "cpu": "host", "memory": "4096"}
    functions: dict[str, list[tuple[str, int]]] = {}
    shapes: dict[str, build.BarShape] = {}
    for i in range(4):
        host = f"0000:{i + 1:02x}:00.0"
        planned[f"hostpci{i}"] = f"{host},pcie=1"
        functions[f"hostpci{i}"] = [(host, 32 << 30)]
        shapes[host] = build.BarShape(32 << 30, io=i % 2 == 0)
    node = build.NodeFacts(qemu="/usr/bin/qemu-system-x86_64", firmware_dir="/fw",
                           firmware_files=("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd"))
    job = build.build_job(build.Inputs(planned, functions, node,
                                       build.HostCpu("AuthenticAMD", 48), "tcg", True,
                                       shapes=shapes))
    assert sorted(node_script.stand_in_ids(job.argv)) == sorted(s.id for s in job.stand_ins)
    assert {w.split(",")[0] for w in job.argv if w.startswith(node_script.STAND_IN_MODELS)} \
        == {build.STAND_IN, build.NO_IO}


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
