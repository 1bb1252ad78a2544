"""The facts issue 26's host items take, read the same on every path: live (API + SSH), --local,
a bundle, and the collect script's tarball, each served or built from one host tree of our own:
GRUB on the ESPs with a stale /etc/kernel/cmdline that lacks root= (proxmox-boot-tool refresh
would abort), and a host booted with amd_iommu=off and no IOMMU group (the IOMMU is off)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pvefix.collect import import_bundle, render_script
from pvefix.planner.plan import plan
from pvefix.sources.bundle import read_bundle
from pvefix.sources.live import read_live
from pvefix.state import HostState
from tests.collect.fakehost import make_fake_host
from tests.executor.test_local_backend import _cli, _on_the_node
from tests.planner.loader import build_tree
from tests.sources.test_live import connection

GRUB = json.loads((Path(__file__).parents[1] / "planner/cases/grub-esp.json").read_text())
SITUATIONS = {
    "grub-esp-stale-kernel-cmdline": (
        {"scenario": "windows-igd", "tree": {"write": {
            "/etc/kernel/cmdline": "quiet intel_iommu=on\n",
            "/etc/default/grub": GRUB["edit"]["files"]["/etc/default/grub"]}}},
        300, "host.boot-tool.kernel-cmdline-no-root",
    ),
    "amd-iommu-off-booted": (
        {"scenario": "kpro6", "tree": {
            "write": {"/etc/kernel/cmdline": "root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_iommu=off\n",
                      "/proc/cmdline": "root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_iommu=off\n"},
            "remove": ["/sys/devices/**/iommu_group"]}},
        100, "iommu.groups-absent",
    ),
}


def _ids(state: HostState) -> set[str]:
    result = plan(state)
    return {f.id for f in result.findings} | {c.id for p in result.phases for c in p.changes}


@pytest.fixture(params=sorted(SITUATIONS))
def situation(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, int, str]:
    case, vmid, finding = SITUATIONS[request.param]
    return build_tree(case, tmp_path), vmid, finding


def test_the_bundle_and_the_live_read_agree_and_plan_it(
    situation: tuple[Path, int, str], fresh_sim: Callable[..., Any], tmp_path: Path
) -> None:
    tree, vmid, finding = situation
    info = fresh_sim(str(tree))
    live = read_live(connection(info, tmp_path), vmid)
    bundle = read_bundle(tree, vmid)
    assert live.files == bundle.files
    assert [d.iommu_group for d in live.pci_devices] == [
        d.iommu_group for d in bundle.pci_devices
    ]
    assert finding in _ids(live)
    assert _ids(live) == _ids(bundle)


def _collected(tree: Path, tmp_path: Path) -> Path:
    """`tree` as the collect script gathers it on a host (a fake one) and imports it."""
    host = make_fake_host(tmp_path / "collect", str(tree))
    done = subprocess.run(["sh", "-s"], input=render_script(), env=host.env(),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    dest = tmp_path / "imported"
    import_bundle(next((host.root / "root").glob("pvefix-bundle-*.tar.gz")), dest)
    return dest


def test_the_collect_script_takes_it(situation: tuple[Path, int, str], tmp_path: Path) -> None:
    tree, vmid, finding = situation
    dest = _collected(tree, tmp_path)
    got = read_bundle(dest, vmid)
    assert got.files == read_bundle(tree, vmid).files
    assert finding in _ids(got)


def test_local_on_the_node_itself_says_it(
    situation: tuple[Path, int, str], node: Any, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    tree, vmid, finding = situation
    n = node(str(tree))
    _on_the_node(n, tmp_path, monkeypatch)
    capsys.readouterr()
    _cli(n, "plan", str(vmid), "--format", "json")
    out = capsys.readouterr().out
    assert finding in out


@pytest.mark.parametrize(("write", "entries"), [
    ({"/sys/class/iommu/ivhd0/.keep": ""}, ["ivhd0"]),
    ({"/sys/class/iommu/.keep": ""}, []),  # the folder, with no IOMMU in it
])
def test_the_collect_script_takes_the_iommus_by_name(
    tmp_path: Path, write: dict[str, str], entries: list[str]
) -> None:
    tree = build_tree({"scenario": "kpro6", "tree": {"write": write}}, tmp_path)
    dest = _collected(tree, tmp_path)
    folder = dest / "sys/class/iommu"
    assert folder.is_dir()
    assert sorted(p.name for p in folder.iterdir()) == entries
    assert all(not any(p.iterdir()) for p in folder.iterdir())  # names only, nothing inside


@pytest.mark.parametrize("off", ["amd_iommu=off", "iommu=off"])
def test_apply_removes_amd_iommu_off_and_the_vm_starts_after_the_reboot(
    node: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], off: str
) -> None:
    """End to end on the simulator: the configured amd_iommu=off goes with the host phase, the
    host reboots into a line with the IOMMU on, and the passthrough VM starts again (it would
    be refused 'IOMMU not present' with amd_iommu=off booted: tests/sim/test_truth_host.py).
    The generic iommu=off too (issue 33): kept with iommu=pt appended, the host came back
    without an IOMMU while apply said `activated`."""
    from pvefix.cli import build_command
    from pvefix.commands.run import run_app
    from tests.simkit import api

    tree = build_tree({"scenario": "kpro6", "tree": {"write": {
        "/etc/kernel/cmdline": f"root=ZFS=rpool/ROOT/pve-1 boot=zfs {off}\n"}}}, tmp_path)
    n = node(str(tree))
    target = ["--connection", str(n.ready_file), "--state-dir", str(n.state_dir)]
    assert run_app(build_command(), ["apply", "100", "--phase", "1", "--restart", "--yes",
                                     *target]) == 0
    assert run_app(build_command(), ["apply", "100", "--phase", "2", "--reboot-host",
                                     "--stop-others", "--yes", *target]) == 0
    capsys.readouterr()
    proc = (n.sim.state.tree.root / "proc/cmdline").read_text()
    assert off not in proc.split() and "iommu=pt" in proc.split()
    ticket = api(n.info, "ticket")
    vm = ticket.nodes(n.info.node).qemu(100)
    if vm.status.current.get()["status"] != "running":
        from tests.simkit import wait_task

        assert wait_task(ticket, vm.status.start.post())["exitstatus"] == "OK"
    assert vm.status.current.get()["status"] == "running"
