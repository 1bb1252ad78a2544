"""The simulator refuses what Proxmox refuses for a template (`template: 1`): a start (QemuServer.pm
vm_start), a snapshot and a rollback (AbstractConfig.pm), before any lock check; a VM that is
no template starts as before."""

from __future__ import annotations

import pytest

from pvefix.sim.serve import ReadyInfo
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
