"""The simulator refuses what Proxmox refuses for a template (`template: 1`): a start (QemuServer.pm
vm_start), a snapshot and a rollback (AbstractConfig.pm), before any lock check; a VM that is
no template starts as before."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pvefix.sim import vmops
from pvefix.sim.serve import ReadyInfo, Simulator
from tests.sim.test_api_parity import Sim, call, wait_task


def vm_status(info: ReadyInfo, vmid: int) -> str:
    path = f"/nodes/{{node}}/qemu/{vmid}/status/current"
    return str(call(info, "GET", path).json()["data"]["status"])


def _make_template(info: ReadyInfo, vmid: int) -> None:
    r = call(info, "PUT", f"/nodes/{{node}}/qemu/{vmid}/config", {"template": "1"})
    assert r.status_code == 200, r.reason


@pytest.mark.parametrize(("path", "params", "message"), [
    ("status/start", None, "you can't start a vm if it's a template"),
    ("snapshot", {"snapname": "before"}, "you can't take a snapshot if it's a template"),
])
def test_a_template_is_not_started_nor_snapshotted(
        fresh_sim: Sim, path: str, params: dict[str, str] | None, message: str) -> None:
    info = fresh_sim("kpro6")
    _make_template(info, 101)
    upid = call(info, "POST", f"/nodes/{{node}}/qemu/101/{path}", params).json()["data"]
    assert wait_task(info, upid)[0] == message
    assert vm_status(info, 101) == "stopped"


def test_a_vm_that_is_no_template_starts(fresh_sim: Sim) -> None:
    info = fresh_sim("kpro6")
    call(info, "PUT", "/nodes/{node}/qemu/101/config", {"template": "0"})
    upid = call(info, "POST", "/nodes/{node}/qemu/101/status/start").json()["data"]
    assert wait_task(info, upid)[0] == "OK"
    assert vm_status(info, 101) == "running"


def test_start_on_boot_skips_a_template_and_starts_the_others(tmp_path: Path) -> None:
    """pve-manager's startall (PVE/API2/Nodes.pm get_filtered_vmlist) leaves every template out
    of the start-on-boot list whatever its `onboot` says; a VM with `onboot: 1` that is no
    template starts."""
    sim = Simulator("kpro6", tmp_path / "node", task_seconds=0.02)
    info = sim.start()
    try:
        for vmid, template in ((100, "0"), (101, "1")):
            r = call(info, "PUT", f"/nodes/{{node}}/qemu/{vmid}/config",
                     {"onboot": "1", "template": template})
            assert r.status_code == 200, r.reason
        vmops.start_on_boot(sim.state)
        for _ in range(200):
            if vm_status(info, 100) == "running":
                break
            time.sleep(0.05)
        assert vm_status(info, 100) == "running", "onboot and no template: started"
        assert vm_status(info, 101) == "stopped", "a template is never started on boot"
        started = [t.upid.split(":")[6] for t in sim.state.tasks.all() if ":qmstart:" in t.upid]
        assert started == ["100"], f"start tasks on boot: {started} (no attempt on the template)"
    finally:
        sim.stop()


def test_start_on_boot_leaves_ha_managed_vms_to_the_ha_stack(tmp_path: Path) -> None:
    """startall skips every VM PVE::HA::Config::vm_is_ha_managed names (`ignored` ones behave
    as unmanaged); the HA stack starts those whose requested state is `started`, onboot or not,
    and leaves a `stopped` one stopped though it says onboot: 1."""
    sim = Simulator("kpro6", tmp_path / "node", task_seconds=0.02)
    info = sim.start()
    try:
        r = call(info, "PUT", "/nodes/{node}/qemu/100/config", {"onboot": "1"})
        assert r.status_code == 200, r.reason
        sim.state.set_ha_state(100, "stopped")
        sim.state.set_ha_state(101, "started")
        vmops.start_on_boot(sim.state)
        deadline = time.monotonic() + vmops.HA_DELAY_S + 10
        while vm_status(info, 101) != "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert vm_status(info, 101) == "running", "HA state started: the HA stack starts it"
        assert vm_status(info, 100) == "stopped", "HA state stopped: onboot does not start it"
        started = [t.upid.split(":")[6] for t in sim.state.tasks.all() if ":qmstart:" in t.upid]
        assert started == ["101"], f"start tasks on boot: {started}"
    finally:
        sim.stop()
