"""`pvefix plan` end to end: the CLI against the simulator (real HTTPS + SSH) and a bundle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pvefix.main import main
from pvefix.sim.serve import ReadyInfo, write_ready_file
from tests.simkit import api, wait_task

BUNDLE = Path(__file__).resolve().parents[2] / "pvefix" / "scenarios" / "kpro6"


def _plan_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, dict[str, Any]]:
    code = main(["plan", *args, "--format", "json"])
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "pvefix.plans/v1" and len(document["plans"]) == 1
    return code, document["plans"][0]


def _without_observed_access(plan: dict[str, Any]) -> dict[str, Any]:
    plan = dict(plan)
    observed = dict(plan.pop("observed"))
    observed.pop("access")
    observed.pop("ssh")
    observed.pop("config_source")
    plan["observed"] = observed
    return plan


def test_live_plan_equals_the_bundle_plan_and_exits_2(
    kpro6_sim: ReadyInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ready = tmp_path / "ready.json"
    write_ready_file(kpro6_sim, ready)
    live_code, live = _plan_json(capsys, ["100", "--connection", str(ready)])
    bundle_code, bundle = _plan_json(capsys, ["100", "--bundle", str(BUNDLE)])
    assert live_code == bundle_code == 2
    assert live["schema"] == "pvefix.plan/v1"
    assert live["observed"]["access"].startswith("api:root@pam!pvefix:token")
    assert _without_observed_access(live) == _without_observed_access(bundle)
    first = live["phases"][0]
    assert first["number"] == 1 and first["disruption"] == "vm-restart"
    keys = [c["key"] for c in first["changes"]]
    assert keys[0] == "machine" and keys.count("machine") == 1
    assert {f"hostpci{i}" for i in range(8)} <= set(keys)
    assert [p["disruption"] for p in live["phases"]] == ["vm-restart", "host-reboot"]
    host = live["phases"][1]["changes"][0]
    assert (host["target"], host["key"], host["file"]) == (
        "host-cmdline", "iommu", "/etc/kernel/cmdline"
    )
    # The plan file records what it relied on, and no secret.
    assert live["observed"]["files"]["/etc/kernel/cmdline"]
    text = json.dumps(live)
    assert kpro6_sim.token_secret not in text and kpro6_sim.password not in text


def test_a_fixed_vm_and_host_plan_to_nothing_and_exit_0(
    fresh_sim: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = fresh_sim("kpro6")
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    prox = api(info, "ticket")
    vm = prox.nodes(info.node).qemu(100)
    wait_task(prox, vm.status.stop.post())
    digest = vm.config.get()["digest"]
    vm.config.put(
        digest=digest,
        machine="q35",
        cpu="x86-64-v2-AES,phys-bits=host,flags=+pdpe1gb",
        **{f"hostpci{i}": "mapping=pro6000,pcie=1" for i in range(8)},
    )
    root = Path(info.root)
    (root / "etc/kernel/cmdline").write_text("root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n")
    proc = root / "proc/cmdline"
    proc.write_text(proc.read_text().rstrip("\n") + " iommu=pt\n")  # as after a host reboot
    code, plan = _plan_json(capsys, ["100", "--connection", str(ready)])
    assert code == 0
    assert plan["phases"] == []
    assert "bar.guest-unknown" in [f["id"] for f in plan["findings"]]
    assert {n["rule"] for n in plan["noops"]} >= {"q35", "pcie", "host-iommu", "bar-space"}
    main(["plan", "100", "--connection", str(ready)])
    assert "Nothing to change" in capsys.readouterr().out


def test_markdown_and_saved_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["plan", "100", "--bundle", str(BUNDLE), "--format", "markdown", "--out", "k.json"])
    out = capsys.readouterr().out
    assert code == 2
    assert out.startswith("# Change: GPU passthrough fix for VM 100 on node kpro6")
    # A change ticket: the impact first, the changes grouped, the way back.
    impact = out.split("## Impact\n", 1)[1].split("\n## ", 1)[0]
    assert "VM 100 stops (phase 1): a clean ACPI shutdown (up to 120 s" in impact
    assert "Host reboot: YES (phase 2). Every VM on node kpro6 stops" in impact
    assert "### Phase 1: the VM stops and starts" in out and "```diff" in out
    assert "#### VM config\n" in out
    assert "#### Host kernel command line (/etc/kernel/cmdline)" in out
    rollback = out.split("## Rollback\n", 1)[1]
    assert "pvefix rollback 100 --snapshot ID" in rollback
    assert "  - `iommu`: remove iommu=pt from /etc/kernel/cmdline" in rollback
    saved = json.loads((tmp_path / "plans" / "k.json").read_text())
    assert saved["schema"] == "pvefix.plan/v1" and "created_at" in saved


def test_a_vm_without_gpus_gets_a_reason_from_every_idle_rule(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["plan", "101", "--bundle", str(BUNDLE)])
    out = capsys.readouterr().out
    # VM 101 has no hostpci entry: only the host rule has work; the VM rules say why they idle
    assert "q35: no hostpci entries: i440fx is left alone" in out
    assert code == 2


def test_unknown_vm_is_an_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "999", "--bundle", str(BUNDLE)])
    assert code == 1
    assert "999" in capsys.readouterr().err


def test_the_ticket_of_a_stopped_vm_says_no_vm_stops(capsys: pytest.CaptureFixture[str]) -> None:
    main(["plan", "101", "--bundle", str(BUNDLE), "--format", "markdown"])
    out = capsys.readouterr().out
    assert "VM 101 stops" not in out and "Host reboot: YES" in out
