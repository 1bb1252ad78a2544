"""The simulator's issue-26 answers against Proxmox VE's own API daemons (../shared/pve-api):
the same host tree served by both, the same requests, the same texts. A host whose devices
have no IOMMU group (mapped start), then one whose /sys/class/iommu is emptied (raw start), and
what an API token may not write (romfile on a mapped entry, old and new value; affinity,
hugepages). Starting a real node takes seconds, so one node serves the whole module."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from proxmoxer import ProxmoxAPI
from proxmoxer.core import ResourceException

from pvefix.sim.serve import ReadyInfo
from tests.planner.loader import build_tree
from tests.realapi import PVE_API, harness_missing
from tests.shared import NEEDS_SHARED
from tests.simkit import api, wait_task

pytestmark = pytest.mark.conformance

SPEC = {"scenario": "kpro6", "tree": {"remove": ["/sys/devices/**/iommu_group"]}}


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], Path]]:
    """A real node serving kpro6 without IOMMU groups: (ready dict, its state folder)."""
    if (why := harness_missing()) is not None:
        pytest.skip(why)
    base = tmp_path_factory.mktemp("pve-api")
    tree = build_tree(SPEC, base)
    state, ready, log = base / "state", base / "ready.json", base / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen([str(PVE_API), "serve", "--scenario", str(tree), "--state",
                                 str(state), "--ready-file", str(ready)],
                                stdout=subprocess.DEVNULL, stderr=err)
    t0 = time.monotonic()
    while not ready.exists():
        if proc.poll() is not None:
            why = (log.read_text().strip().splitlines() or ["?"])[-1]
            if proc.returncode == 3:
                pytest.skip(f"{NEEDS_SHARED}: {why}")
            pytest.fail(f"pve-api serve failed: {why}")
        if time.monotonic() - t0 > 180:
            proc.terminate()
            pytest.fail(f"pve-api serve: not ready in 180 s ({log})")
        time.sleep(0.2)
    yield json.loads(ready.read_text()), state
    subprocess.run([str(PVE_API), "stop", "--state", str(state)], check=False)
    proc.wait(timeout=60)


@pytest.fixture(scope="module")
def sim(sim_launcher: Any, tmp_path_factory: pytest.TempPathFactory) -> ReadyInfo:
    info: ReadyInfo = sim_launcher.start(str(build_tree(SPEC, tmp_path_factory.mktemp("sim"))))
    return info


def _clients(real: dict[str, Any]) -> tuple[Any, Any]:
    host = real["api_url"].removeprefix("https://")
    user, _, name = real["token_id"].partition("!")
    token = ProxmoxAPI(host, user=user, token_name=name, token_value=real["token_secret"],
                       verify_ssl=real["ca_cert"], timeout=30)
    ticket = ProxmoxAPI(host, user=real["user"], password=real["password"],
                        verify_ssl=real["ca_cert"], timeout=30)
    return token, ticket


def _answer(call: Callable[[], Any]) -> tuple[int, Any]:
    try:
        call()
    except ResourceException as exc:
        return exc.status_code, exc.errors or exc.content
    return 200, None


def _writes(token: Any, ticket: Any, node: str) -> list[tuple[int, Any]]:
    vm = token.nodes(node).qemu(101).config
    out = [_answer(lambda: vm.put(hostpci0="mapping=pro6000,romfile=a.rom"))]
    ticket.nodes(node).qemu(101).config.put(hostpci0="mapping=pro6000,romfile=a.rom")
    out += [_answer(lambda v=v: vm.put(hostpci0=v))  # type: ignore[misc]
            for v in ("mapping=pro6000,romfile=a.rom,pcie=1", "mapping=pro6000,pcie=1")]
    out.append(_answer(lambda: vm.put(delete="hostpci0")))
    out += [_answer(lambda k=k, v=v: vm.put(**{k: v}))  # type: ignore[misc]
            for k, v in (("affinity", "0-3"), ("hugepages", "1024"))]
    ticket.nodes(node).qemu(101).config.put(delete="hostpci0")
    return out


def _start(ticket: Any, node: str, value: str) -> str:
    vm = ticket.nodes(node).qemu(101)
    vm.config.put(hostpci0=value)
    status = _exit_status(ticket, vm.status.start.post())
    if vm.status.current.get()["status"] == "running":
        _exit_status(ticket, vm.status.stop.post())
    return status


def _exit_status(prox: Any, upid: str) -> str:
    return str(wait_task(prox, upid)["exitstatus"])


def test_token_writes_answer_alike(real: tuple[dict[str, Any], Path], sim: ReadyInfo) -> None:
    ready, _ = real
    got = _writes(api(sim, "token"), api(sim, "ticket"), sim.node)
    want = _writes(*_clients(ready), ready["node"])
    assert got == want
    assert want[0] == (400, {"hostpci0": "only root@pam can set 'romfile' option"})


def test_starts_without_an_iommu_answer_alike(
    real: tuple[dict[str, Any], Path], sim: ReadyInfo
) -> None:
    ready, state = real
    _, ticket = _clients(ready)
    sim_ticket = api(sim, "ticket")
    for prox, node in ((ticket, ready["node"]), (sim_ticket, sim.node)):  # free the devices
        if prox.nodes(node).qemu(100).status.current.get()["status"] == "running":
            _exit_status(prox, prox.nodes(node).qemu(100).status.stop.post())
    mapped = _start(ticket, ready["node"], "mapping=pro6000")
    assert mapped == _start(sim_ticket, sim.node, "mapping=pro6000")
    assert mapped.startswith("PCI device mapping invalid (hardware probably changed)")
    # the real node's /sys/class/iommu is the harness's stand-in: empty it, as a host without
    # an IOMMU has it (the simulator's tree has no IOMMU group at all, which reads the same)
    subprocess.run([str(PVE_API), "exec", "--state", str(state), "--", "sh", "-c",
                    "rmdir /sys/class/iommu/*"], check=True, timeout=60)
    raw = _start(ticket, ready["node"], "0000:01:00.0")
    assert raw == _start(sim_ticket, sim.node, "0000:01:00.0")
    assert raw == "cannot prepare PCI pass-through, IOMMU not present"
