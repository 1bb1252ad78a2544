"""A template's start and snapshot are refused by Proxmox VE's own API daemons
(../shared/pve-api) and by the simulator alike: the same task exit texts, and the VM stays
stopped on both."""

from __future__ import annotations

from typing import Any

import pytest

from tests.realapi import RealNode

pytestmark = pytest.mark.conformance


def _api(ready: dict[str, Any], *, password: bool) -> Any:
    from proxmoxer import ProxmoxAPI

    host = ready["api_url"].removeprefix("https://")
    if password:
        return ProxmoxAPI(host, user=ready["user"], password=ready["password"],
                          verify_ssl=ready["ca_cert"], timeout=60)
    user, _, token = ready["token_id"].partition("!")
    return ProxmoxAPI(host, user=user, token_name=token, token_value=ready["token_secret"],
                      verify_ssl=ready["ca_cert"], timeout=60)


def _refusals(prox: Any, node: str) -> list[str]:
    from proxmoxer.tools import Tasks

    vm = prox.nodes(node).qemu(101)
    vm.config.put(template=1)
    out = []
    for upid in (vm.status.start.post(), vm.snapshot.post(snapname="before")):
        status = Tasks.blocking_status(prox, upid, timeout=60, polling_interval=0.1)
        assert status is not None
        out.append(str(status.get("exitstatus")))
    out.append(str(vm.status.current.get()["status"]))
    return out


def test_proxmox_and_the_simulator_refuse_a_templates_start_and_snapshot(
        pve_api: Any, sim_launcher: Any) -> None:
    real: RealNode = pve_api.fresh("kpro6")
    got_real = _refusals(_api(real.ready, password=True), real.ready["node"])
    info = sim_launcher.start("kpro6")
    got_sim = _refusals(_api(info.model_dump(), password=False), info.node)
    assert got_real == ["you can't start a vm if it's a template",
                        "you can't take a snapshot if it's a template", "stopped"]
    assert got_sim == got_real
