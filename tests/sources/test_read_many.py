"""Several VMs read at once (`pvefix plan A B C`, `pvefix desired A B`): the same states as one
read per VM, with each node read once. Counted with the simulator's /_sim/stats."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pvefix.main import main
from pvefix.sim.serve import ReadyInfo, write_ready_file
from pvefix.sim.stats import fetch_stats
from pvefix.sources.live import read_live, read_live_many
from pvefix.target.settings import resolve_connection

Sim = Callable[..., ReadyInfo]
# cluster3: VM 300 on atlas, 310-313 on cygnus, 320 on borealis.
VMIDS = [320, 300, 310, 313]


def _stats(info: ReadyInfo, reset: bool = False) -> dict[str, Any]:
    return fetch_stats(info.api_url, info.ca_cert, info.user, info.password, reset=reset)


def _conn(info: ReadyInfo, tmp_path: Path) -> Any:
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    return resolve_connection(connection_file=ready, env={})


def test_several_vms_read_as_one_read_each_with_each_node_read_once(
    fresh_sim: Sim, tmp_path: Path
) -> None:
    info = fresh_sim("cluster3")
    conn = _conn(info, tmp_path)
    _stats(info, reset=True)
    one_each = [read_live(conn, vmid) for vmid in VMIDS]
    alone = _stats(info, reset=True)
    together = read_live_many(conn, VMIDS)
    cost = _stats(info, reset=True)

    assert [s.vm.vmid for s in together] == VMIDS
    for single, many in zip(one_each, together, strict=True):
        assert many.model_dump() == single.model_dump(), single.vm.vmid
    nodes = {s.vm.node for s in together}
    assert nodes == {"atlas", "cygnus", "borealis"}
    # One SSH session per node (one read per VM opens one each time), at most one login.
    assert alone["ssh_connections"] == len(VMIDS)
    assert cost["ssh_connections"] == len(nodes)
    assert cost["ticket_logins"] <= 1
    # What the VMs of a node share is asked once: node status and hardware/pci per node.
    shared = [p for p in cost["paths"] if p.endswith("/hardware/pci")]
    assert sorted(shared) == sorted(f"GET /nodes/{n}/hardware/pci" for n in nodes)
    assert all(cost["paths"][p] == 1 for p in shared)
    assert cost["requests_total"] < alone["requests_total"]


def test_a_vm_not_in_the_cluster_is_named(fresh_sim: Sim, tmp_path: Path) -> None:
    info = fresh_sim("cluster3")
    with pytest.raises(Exception, match="no QEMU VM 999"):
        read_live_many(_conn(info, tmp_path), [300, 999])


def test_plan_and_desired_take_several_vmids(
    fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    info = fresh_sim("cluster3")
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    monkeypatch.setenv("PVEFIX_STATE_DIR", str(tmp_path / "state"))
    conn = ["--connection", str(ready)]

    code = main(["plan", "300", "310", "300", *conn, "-f", "json"])
    seen = capsys.readouterr()
    assert ("read 2 VMs on 2 node(s) (atlas, cygnus) through one API session and one SSH "
            "session per node") in seen.err
    document = json.loads(seen.out)
    assert document["schema"] == "pvefix.plans/v1"  # the same shape as for one VM
    plans = document["plans"]
    assert [p["target"]["vmid"] for p in plans] == [300, 310]  # 300 named twice, planned once
    for plan in plans:
        main(["plan", str(plan["target"]["vmid"]), *conn, "-f", "json"])
        assert json.loads(capsys.readouterr().out)["plans"] == [plan]
    assert code == (2 if any(p["phases"] for p in plans) else 0)

    assert main(["plan", "300", "310", *conn, "--out", str(tmp_path / "p.json")]) == 1
    assert "for each of 300, 310" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()

    out = tmp_path / "desired.toml"
    assert main(["desired", "310", "320", *conn, "--from", "current", "-o", str(out)]) == 0
    text = out.read_text()
    assert "[vms.310]" in text and "[vms.320]" in text
    assert "pvefix check --desired THIS_FILE 310 320" in text
    assert main(["check", "--desired", str(out), "310", "320", *conn]) == 0, capsys.readouterr()
