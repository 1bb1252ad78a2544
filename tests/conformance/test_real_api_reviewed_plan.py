"""A reviewed plan file across phases, judged by Proxmox VE's own API daemons (../shared/pve-api):
phase 1 (with its restart) and then phase 3 from the same saved file apply on a real node as on
the simulator, because pvefix recognises its own write by the digest Proxmox itself computes
after the restart; an admin's edit through the API between the phases is still refused as
stale (exit 3) on both. (Phase 2 reboots the host: the harness's SSH is pvefix's simulator.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pvefix.sim.serve import write_ready_file
from tests.realapi import at_once, run_pvefix

pytestmark = pytest.mark.conformance

AUTH = ["--auth", "password"]  # phase 3 writes args: root@pam with a password


def _admin_edits(ready: dict[str, Any], vmid: int) -> None:
    """Another admin changes the VM's description through the API (their own login)."""
    from proxmoxer import ProxmoxAPI

    prox = ProxmoxAPI(ready["api_url"].removeprefix("https://"), user=ready["user"],
                      password=ready["password"], verify_ssl=ready["ca_cert"], timeout=60)
    prox.nodes(ready["node"]).qemu(vmid).config.put(description="edited by another admin")


def _flow(ready: Path, home: Path, settle: Any, edit_between: bool) -> list[int]:
    plan_file = str(home / "reviewed.json")
    codes = []
    for args in (["plan", "100", "--p2p", *AUTH, "--format", "json", "--out", plan_file],
                 ["apply", plan_file, "--phase", "1", "--restart", "--yes", *AUTH]):
        codes.append(run_pvefix([*args, "--connection", str(ready)], home).rc)
    settle()
    if edit_between:
        _admin_edits(json.loads(ready.read_text()), 100)
    run = run_pvefix(["apply", plan_file, "--phase", "3", "--yes", *AUTH,
                      "--connection", str(ready)], home)
    said = "pvefix's own apply of this plan's phase 1" if not edit_between else "not pvefix's own"
    assert said in run.err, run
    return [*codes, run.rc]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("edit_between", [False, True], ids=["own-writes", "admin-edit"])
def test_a_reviewed_plan_reaches_phase_3_on_proxmox_as_on_the_simulator(
    edit_between: bool, pve_api: Any, sim_launcher: Any, tmp_path: Path,
) -> None:
    real = pve_api.fresh("kpro6")
    info = sim_launcher.start("kpro6")
    sim_ready = tmp_path / "sim.json"
    write_ready_file(info, sim_ready)
    (tmp_path / "proxmox").mkdir()
    (tmp_path / "simulator").mkdir()
    codes = at_once({
        "proxmox": lambda: _flow(real.ready_file, tmp_path / "proxmox",
                                 lambda: real.settle(100), edit_between),
        "simulator": lambda: _flow(sim_ready, tmp_path / "simulator", lambda: None,
                                   edit_between)})
    want = [2, 0, 3 if edit_between else 0]
    assert codes == {"proxmox": want, "simulator": want}, codes
