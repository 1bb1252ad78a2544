"""The simulator answers as Proxmox VE's own API daemons do (issue 24): RRD-lagged resource
status, privilege-separated tokens and ACLs, power-action semantics, WARNINGS, GET validation,
the auth forms. tests/conformance/test_sim_vs_api.py compares the same against the real code."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests

from pvefix.sim.serve import ReadyInfo

Sim = Callable[..., ReadyInfo]


def call(info: ReadyInfo, method: str, path: str, params: dict[str, str] | None = None,
         headers: dict[str, str] | None = None, *, cred: str = "token") -> requests.Response:
    """One request with the chosen credential (`token`, `privsep` or none with headers)."""
    if headers is None:
        tid, secret = ((info.token_id, info.token_secret) if cred == "token"
                       else (info.privsep_token_id, info.privsep_token_secret))
        headers = {"Authorization": f"PVEAPIToken={tid}={secret}"}
    url = f"{info.api_url}/api2/json{path.replace('{node}', info.node)}"
    key = "params" if method == "GET" else "data"
    return requests.request(method, url, headers=headers, verify=info.ca_cert, timeout=30,
                            **{key: params or {}})


def wait_task(info: ReadyInfo, upid: str) -> tuple[str, list[str]]:
    for _ in range(200):
        st = call(info, "GET", f"/nodes/{{node}}/tasks/{upid}/status").json()["data"]
        if st["status"] == "stopped":
            log = call(info, "GET", f"/nodes/{{node}}/tasks/{upid}/log").json()["data"]
            return st["exitstatus"], [line["t"] for line in log]
        time.sleep(0.05)
    raise AssertionError(f"task {upid} still runs")


def vm_status(info: ReadyInfo, vmid: int) -> str:
    items = call(info, "GET", "/cluster/resources", {"type": "vm"}).json()["data"]
    return str(next(i["status"] for i in items if i["vmid"] == vmid))


# -- /cluster/resources ------------------------------------------------------------------------


def test_resource_status_is_unknown_until_the_first_sample_then_lags(fresh_sim: Sim) -> None:
    info = fresh_sim("kpro6", status_lag=1.0)
    assert vm_status(info, 100) == "unknown"
    time.sleep(1.1)
    assert vm_status(info, 100) == "running"
    upid = call(info, "POST", "/nodes/{node}/qemu/100/status/stop").json()["data"]
    assert wait_task(info, upid)[0] == "OK"
    live = call(info, "GET", "/nodes/{node}/qemu/100/status/current").json()["data"]
    assert live["status"] == "stopped"
    assert vm_status(info, 100) == "running"  # the last sample was before the stop
    time.sleep(1.1)
    assert vm_status(info, 100) == "stopped"


def test_a_lag_of_zero_is_live(fresh_sim: Sim) -> None:
    assert vm_status(fresh_sim("kpro6", status_lag=0), 100) == "running"


def test_resources_have_maxcpu_template_and_the_boot_disks_size(fresh_sim: Sim) -> None:
    info = fresh_sim("kpro6", status_lag=0)
    items = {i["vmid"]: i for i in call(info, "GET", "/cluster/resources",
                                        {"type": "vm"}).json()["data"]}
    assert items[100]["maxdisk"] == 2 << 40  # scsi0 size=2T, first in boot order
    assert items[100]["maxcpu"] == 192 and items[100]["template"] == 0
    assert "cpus" not in items[100] and "pid" not in items[100]


# -- privilege separation ----------------------------------------------------------------------


def test_the_privsep_token_gets_only_its_acls(fresh_sim: Sim) -> None:
    info = fresh_sim("kpro6", status_lag=0)
    assert info.privsep_token_id == "root@pam!privsep"
    r = call(info, "GET", "/nodes/{node}/status", cred="privsep")
    assert (r.status_code, r.reason) == (403, f"Permission check failed (/nodes/{info.node}, "
                                              "Sys.Audit)")
    r = call(info, "GET", "/nodes/{node}/hardware/pci", cred="privsep")
    assert r.reason == "Permission check failed (/, Sys.Audit|Sys.Modify)"
    assert call(info, "GET", "/nodes/{node}/qemu/100/config", cred="privsep").ok
    r = call(info, "PUT", "/nodes/{node}/qemu/101/config", {"hostpci0": "mapping=pro6000"},
             cred="privsep")
    assert r.ok, r.reason  # PVEVMAdmin on /vms + PVEMappingUser on /mapping/pci
    vms = call(info, "GET", "/cluster/resources", {"type": "vm"}, cred="privsep").json()
    assert sorted(i["vmid"] for i in vms["data"]) == [100, 101]


def test_a_privsep_token_without_acls_sees_no_vms(fresh_sim: Sim) -> None:
    info = fresh_sim("intel-grub", status_lag=0)  # declares root@pam!pvefix with privsep
    data = call(info, "GET", "/cluster/resources", {"type": "vm"}).json()["data"]
    assert data == []
    r = call(info, "GET", "/nodes/{node}/qemu/200/config")
    assert r.reason == "Permission check failed (/vms/200, VM.Audit)"


def test_a_token_may_not_set_affinity_or_hugepages(fresh_sim: Sim) -> None:
    info = fresh_sim("kpro6")
    for key, value in (("affinity", "0-3"), ("hugepages", "1024")):
        r = call(info, "PUT", "/nodes/{node}/qemu/101/config", {key: value})
        assert (r.status_code, r.reason) == (500, f"only root can set '{key}' config")


# -- power actions and tasks -------------------------------------------------------------------


def test_power_actions_on_stopped_and_missing_vms(fresh_sim: Sim) -> None:
    info = fresh_sim("kpro6")
    upid = call(info, "POST", "/nodes/{node}/qemu/101/status/shutdown").json()["data"]
    assert wait_task(info, upid) == ("OK", ["TASK OK"])
    r = call(info, "POST", "/nodes/{node}/qemu/101/status/reboot")
    assert (r.status_code, r.reason) == (500, "VM 101 not running")
    upid = call(info, "POST", "/nodes/{node}/qemu/999/status/start").json()["data"]
    assert wait_task(info, upid)[0] == (
        f"Configuration file 'nodes/{info.node}/qemu-server/999.conf' does not exist")


def test_a_start_with_old_efi_certificates_ends_with_warnings(fresh_sim: Sim) -> None:
    info = fresh_sim("windows-igd")
    call(info, "POST", "/nodes/{node}/qemu/300/status/stop")
    time.sleep(0.3)
    upid = call(info, "POST", "/nodes/{node}/qemu/300/status/start").json()["data"]
    status, log = wait_task(info, upid)
    assert status == "WARNINGS: 1"
    assert "WARN: EFI disk without 'ms-cert=2023k' option, suggesting that not all UEFI 2023" in log


def test_the_task_list_has_exit_texts_endtime_and_total(fresh_sim: Sim) -> None:
    info = fresh_sim("kpro6")
    for _ in range(2):
        wait_task(info, call(info, "POST", "/nodes/{node}/qemu/100/status/start").json()["data"])
    body = call(info, "GET", "/nodes/{node}/tasks", {"limit": "1"}).json()
    assert body["total"] == 2 and len(body["data"]) == 1
    item = body["data"][0]
    assert item["status"] == "VM 100 already running" and "endtime" in item
    assert item["tokenid"] == "pvefix" and "exitstatus" not in item


def test_task_upids_are_validated(fresh_sim: Sim) -> None:
    info = fresh_sim("kpro6")
    r = call(info, "GET", "/nodes/{node}/tasks/UPID:bogus/status")
    assert r.status_code == 400
    assert r.json()["errors"] == {"upid": "unable to parse worker upid"}
    upid = f"UPID:{info.node}:00000001:00000001:00000001:qmstart:100:root@pam:"
    assert call(info, "GET", f"/nodes/{{node}}/tasks/{upid}/status").json()["errors"] == {
        "upid": "no such task"}


# -- GET validation and authentication ----------------------------------------------------------


def test_get_parameters_are_validated(fresh_sim: Sim) -> None:
    info = fresh_sim("kpro6")
    r = call(info, "GET", "/nodes/{node}/qemu/100/config", {"current": "yes"})
    assert r.status_code == 400
    assert r.json()["errors"] == {"current": "type check ('boolean') failed - got 'yes'"}
    r = call(info, "GET", "/nodes/{node}/qemu/100/config", {"foo": "1"})
    assert r.json()["errors"] == {"foo": "property is not defined in schema and the schema "
                                         "does not allow additional properties"}


def test_auth_forms_renewal_and_empty_401s(fresh_sim: Sim) -> None:
    info = fresh_sim("kpro6")
    space = {"Authorization": f"PVEAPIToken {info.token_id}={info.token_secret}"}
    assert call(info, "GET", "/version", headers=space).ok
    login = call(info, "POST", "/access/ticket", {"username": "root@pam",
                                                  "password": info.password}, headers={})
    ticket = login.json()["data"]["ticket"]
    assert call(info, "GET", "/version", headers={"Authorization": f"PVEAuthCookie={ticket}"}).ok
    renewed = call(info, "POST", "/access/ticket", {"username": "root@pam", "password": ticket},
                   headers={})
    assert renewed.ok and renewed.json()["data"]["cap"]["vms"]["VM.Audit"] == 1
    bad = call(info, "GET", "/version", headers={"Authorization": "PVEAPIToken=root@pam!x=y"})
    assert (bad.status_code, bad.reason, bad.content) == (401, "Authentication failed!", b"")
    wrong = call(info, "POST", "/access/ticket", {"username": "root@pam", "password": "no"},
                 headers={})
    assert wrong.json() == {"data": None, "message": "authentication failure\n"}


def test_the_401_delay_is_settable(fresh_sim: Sim) -> None:
    info = fresh_sim("kpro6", auth_fail_delay=0.5)
    t0 = time.monotonic()
    assert call(info, "GET", "/version", headers={}).status_code == 401
    assert time.monotonic() - t0 >= 0.5


def test_mappings_carry_digest_and_type(kpro6_sim: ReadyInfo) -> None:
    items: list[dict[str, Any]] = call(kpro6_sim, "GET", "/cluster/mapping/pci").json()["data"]
    assert {i["type"] for i in items} == {"pci"}
    assert all(len(i["digest"]) == 40 for i in items)
