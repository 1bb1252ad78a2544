"""The simulated guest's nvidia-smi follows the running QEMU: P2P NS without a clique, OK
between GPUs of one clique once the VM has been cold-started with it, NS again with kvm=off."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pvefix.probe.report import Report
from pvefix.sim.guest_gpus import gpus_and_matrix
from pvefix.sim.serve import ReadyInfo
from pvefix.target.guest.access import GuestAccess
from pvefix.verify.take import take_probe
from tests.simkit import api, wait_task
from tests.verify.conftest import connection

GPU_A, GPU_B = "0000:01:00.0", "0000:21:00.0"
WORDS = ["-cpu", "host", "-device", f"vfio-pci,host={GPU_A},id=hostpci0", "-device",
         f"vfio-pci,host={GPU_B},id=hostpci1", "-device", "vfio-pci,host=0000:99:00.0,id=x"]
SETS = ["-set", "device.hostpci0.x-nv-gpudirect-clique=0",
        "-set", "device.hostpci1.x-nv-gpudirect-clique=0"]


def test_the_matrix_follows_the_cliques_and_kvm_visibility() -> None:
    nvidia = {GPU_A, GPU_B}
    assert gpus_and_matrix(WORDS, nvidia) == (["hostpci0", "hostpci1"], [["X", "NS"], ["NS", "X"]])
    assert gpus_and_matrix(WORDS + SETS, nvidia)[1] == [["X", "OK"], ["OK", "X"]]
    hidden = ["-cpu", "host,kvm=off", *WORDS[2:], *SETS]
    assert gpus_and_matrix(hidden, nvidia)[1] == [["X", "NS"], ["NS", "X"]]
    other = [*SETS[:3], "device.hostpci1.x-nv-gpudirect-clique=1"]
    assert gpus_and_matrix(WORDS + other, nvidia)[1] == [["X", "NS"], ["NS", "X"]]


def _cells(report: Report) -> set[str]:
    matrix = report.p2p_status.modes["r"]
    return {c for row in matrix.cells for c in row if c != "X"}


def test_the_probe_in_the_guest_sees_ns_then_ok_after_a_cold_start_with_the_clique(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path
) -> None:
    info = fresh_sim("kpro6")
    prox = api(info, "ticket")
    vm = prox.nodes(info.node).qemu(100)
    wait_task(prox, vm.status.stop.post())
    vm.config.put(agent="1")
    wait_task(prox, vm.status.start.post())
    conn = connection(info, tmp_path)
    before = take_probe(conn, GuestAccess(method="agent"), 100, quick=True)
    assert len(before.gpus.gpus) == 8
    assert _cells(before) == {"NS"}
    args = " ".join(f"-set device.hostpci{i}.x-nv-gpudirect-clique=0" for i in range(8))
    vm.config.post(args=args)  # pending while it runs: the guest still sees NS
    assert _cells(take_probe(conn, GuestAccess(method="agent"), 100, quick=True)) == {"NS"}
    wait_task(prox, vm.status.stop.post())
    wait_task(prox, vm.status.start.post())
    after = take_probe(conn, GuestAccess(method="agent"), 100, quick=True)
    assert _cells(after) == {"OK"}
