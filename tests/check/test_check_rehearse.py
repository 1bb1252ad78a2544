"""`pvefix check --rehearse`: each checked VM's next start rehearsed on its node (the simulator's
node runs the rehearsal for real on this machine, with its QEMU; tests with a firmware set are
conformance tests and need ../shared/fw-lab). A failing verdict is drift (exit 2), a rehearsal
that cannot run is UNKNOWN (exit 1), never a pass; in the text, JSON, JUnit and annotations."""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
import time
import xml.etree.ElementTree as ET
from itertools import pairwise
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pvefix.check.junit import render_junit
from pvefix.check.render import github_annotations, render_json
from pvefix.check.report import CheckItem, CheckReport
from pvefix.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK
from pvefix.flow.check_rehearsal import (
    NothingToPlace,
    passes_devices,
    rehearsal_item,
    rehearse_each,
    rehearse_nodes,
)
from pvefix.main import main
from pvefix.rehearse.build import RehearseRefused
from pvefix.rehearse.verdict import BarVerdict, Verdict
from pvefix.schemas import shipped
from pvefix.sim.serve import write_ready_file
from tests.shared import fwlab_edk2_and_qemu, fwlab_module

G = 1 << 30
# fw-lab's options for the story VM's phase 1. Each card's 128 GiB BAR1 and 32 MiB BAR3 share
# its root port's window (128 GiB + 32 MiB, aligned to 128 GiB); fw-lab's stand-ins have one
# BAR each, so a card is the 256 GiB block the planner counts for it (the power of two of its
# BARs' sum): the rehearsal's BAR1 addresses must be the blocks' addresses
STORY_PHASE_1 = {"firmware_set": "edk2-2025.02", "cpu": "x86-64-v2-AES", "phys_bits": "52",
                 "pdpe1gb": True, "vendor": "amd", "ram": "1536G", "bars": "8x256G"}
SMALL_WINDOW = 524288  # MiB of X-PciMmio64Mb: 512 GiB, too small for eight 128 GiB BARs


def _verdict(outcome: str, bars: list[BarVerdict] | None = None) -> Verdict:
    return Verdict(vmid=100, node="kpro6", config="next start", outcome=outcome,  # type: ignore[arg-type]
                   message=f"{outcome} message", accel="tcg", qemu="QEMU 7.2", machine="q35",
                   cpu="qemu64", ram_mb=2048, firmware="ovmf", bars=bars or [], boot_s=2.5,
                   peak_rss_mb=250)


def _compared(vmid: int = 100) -> CheckReport:
    return CheckReport(source="test", items=[
        CheckItem(target="node", node="kpro6", property="cmdline iommu=pt (required)",
                  status="ok"),
        CheckItem(target="vm", vmid=vmid, node="kpro6", property="machine", status="ok"),
        CheckItem(target="vm", vmid=vmid, node="kpro6", property="cpu", status="ok"),
        CheckItem(target="vm", vmid=101, node="kpro6", property="desired state",
                  status="unknown", detail="no desired state"),
    ])


@pytest.mark.parametrize(("outcome", "status", "exit_code"), [
    ("placed", "ok", EXIT_OK), ("not-placed", "drift", EXIT_CHANGES),
    ("no-boot", "drift", EXIT_CHANGES), ("qemu-refused", "drift", EXIT_CHANGES),
    ("error", "unknown", EXIT_ERROR)])
def test_each_verdict_is_a_finding_of_its_severity(outcome: str, status: str,
                                                   exit_code: int) -> None:
    item = rehearsal_item(_verdict(outcome))
    assert (item.status, item.key, item.want, item.got, item.where) == (
        status, "rehearsal", "placed", outcome, "rehearsal")
    assert CheckReport(items=[item]).exit_code == exit_code


def test_a_verdict_not_established_is_unknown_never_ok_nor_drift() -> None:
    for outcome in ("placed", "not-placed"):
        verdict = _verdict(outcome)
        verdict.not_established = ["config-key ivshmem (ivshmem: size=64): its BAR"]
        item = rehearsal_item(verdict)
        assert item.status == "unknown" and item.actual.startswith("not established")
        assert "not booted: config-key ivshmem" in item.detail
        assert CheckReport(items=[item]).exit_code == EXIT_ERROR


def test_one_rehearsal_per_compared_vm_after_its_items_and_a_refusal_is_never_a_pass() -> None:
    asked: list[int] = []

    def refuse(vmid: int) -> Verdict:
        asked.append(vmid)
        raise RehearseRefused("node kpro6 has no QEMU")

    report = rehearse_each(_compared(), refuse)
    assert asked == [100]  # VM 101 was not compared (no desired state): not rehearsed
    props = [(i.vmid, i.property) for i in report.items]
    assert props[1:4] == [(100, "machine"), (100, "cpu"), (100, "rehearsal")]
    item = report.items[3]
    assert item.status == "unknown" and item.got == "refused" and "no QEMU" in item.detail
    assert report.exit_code == EXIT_ERROR and report.rehearsals == []


def test_a_failing_verdict_in_junit_annotations_and_the_json_schema() -> None:
    bars = [BarVerdict("hostpci0", "0000:e1:00.0", 128 * G, "placed", 0x380000000000),
            BarVerdict("hostpci1", "0000:e2:00.0", 128 * G, "not-placed")]
    verdict = _verdict("not-placed", bars)
    verdict.notes.append("args: -foo left out")
    report = rehearse_each(_compared(), lambda vmid: verdict)
    root = ET.fromstring(render_junit(report).encode("utf-8"))  # noqa: S314 (our own output)
    failure = root.find(".//testcase[@name='rehearsal']/failure")
    assert failure is not None and failure.get("type") == "rehearsal"
    assert "hostpci1 (0000:e2:00.0, 128 GiB): NOT placed" in (failure.text or "")
    assert "hostpci0" not in (failure.text or "")  # the failing BARs only
    assert "note: args: -foo left out" in (failure.text or "")
    notes = github_annotations(report)
    assert "title=pvefix rehearsal failed%3A VM 100 rehearsal::BARs not placed" in notes
    data = json.loads(render_json(report))
    jsonschema.Draft202012Validator(shipped("check")).validate(data)
    assert data["summary"]["drift"] == 1 and data["rehearsals"][0]["outcome"] == "not-placed"
    assert "rehearsals" not in json.loads(render_json(_compared()))  # only with --rehearse


# -- against the simulator ---------------------------------------------------------------------


@pytest.fixture
def ready(kpro6_ready: Path) -> Path:
    return kpro6_ready


def _desired_now(ready: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                 *vmids: str) -> Path:
    """A desired state of what holds now: the check alone finds no drift."""
    path = tmp_path / "desired.toml"
    assert main(["desired", *vmids, "--from", "current", "--connection", str(ready),
                 "-o", str(path)]) == EXIT_OK
    capsys.readouterr()
    return path


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["check", *args, "--format", "json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    data = json.loads(out)
    jsonschema.Draft202012Validator(shipped("check")).validate(data)
    return code, data


def _rehearsals(data: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {i["vmid"]: i for i in data["items"] if i["key"] == "rehearsal"}


def test_off_by_default_and_a_rehearsal_that_cannot_run_fails_the_check(
        ready: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("timeout") is None:
        pytest.skip("timeout(1) is not installed")
    desired = _desired_now(ready, tmp_path, capsys, "100")
    common = ["100", "--connection", str(ready), "--desired", str(desired)]
    code, data = _check(capsys, *common)
    assert code == EXIT_OK and not _rehearsals(data) and "rehearsals" not in data
    code, data = _check(capsys, *common, "--rehearse", "--rehearse-accel", "tcg",
                        "--rehearse-timeout", "5")
    item = _rehearsals(data)[100]
    assert code == EXIT_ERROR and item["status"] == "unknown" and item["got"] == "refused"
    # a node without QEMU refuses first, and says so
    assert "leaves no time for TCG" in item["detail"] or "has no QEMU" in item["detail"]


def test_a_bundle_has_no_node_to_rehearse_on(capsys: pytest.CaptureFixture[str]) -> None:
    from pvefix.hosttree import resolve_scenario

    code = main(["check", "100", "--bundle", str(resolve_scenario("kpro6")), "--desired",
                 "plans/desired-kpro6.toml", "--rehearse"])
    assert code == EXIT_ERROR and "a bundle (--bundle) has no node" in capsys.readouterr().err


@pytest.mark.conformance
def test_today_qemu_refuses_the_story_vm_and_the_monitoring_vm_is_not_rehearsed(
        ready: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edk2 = fwlab_edk2_and_qemu()
    desired = _desired_now(ready, tmp_path, capsys, "100", "101")
    common = ["100", "101", "--connection", str(ready), "--desired", str(desired)]
    assert _check(capsys, *common)[0] == EXIT_OK  # no drift: the rehearsal alone fails it
    code, data = _check(capsys, *common, "--rehearse", "--rehearse-accel", "tcg",
                        "--rehearse-firmware-dir", str(edk2))
    items = _rehearsals(data)
    assert code == EXIT_CHANGES
    assert items[100]["status"] == "drift" and items[100]["got"] == "qemu-refused"
    assert "phys-bits too low (40)" in items[100]["actual"]
    assert 101 not in items  # the monitoring VM passes no device: nothing to place
    assert [v["config"] for v in data["rehearsals"]] == ["next start"]
    assert any(n.startswith("rehearsed the next start of 1 VM(s)")
               and "1 VM(s) pass no PCI device" in n for n in data["notes"])


@pytest.mark.conformance
def test_the_next_start_in_pending_is_rehearsed_and_equals_the_firmware(
        fresh_sim: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The running story VM with phase 1 in [PENDING] places all eight BARs; with a 512 GiB
    X-PciMmio64Mb window added to [PENDING] it does not. Both are what fw-lab's firmware
    does with the same configuration."""
    edk2 = fwlab_edk2_and_qemu()
    from tests.simkit import api

    info = fresh_sim("kpro6")
    path = tmp_path / "ready.json"
    write_ready_file(info, path)
    monkeypatch.setenv("PVEFIX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert main(["apply", "100", "--phase", "1", "--yes", "--connection", str(path)]) == 0
    capsys.readouterr()
    common = ["100", "--connection", str(path), "--rehearse", "--rehearse-accel", "tcg",
              "--rehearse-firmware-dir", str(edk2)]
    lab = fwlab_module()
    _, data = _check(capsys, *common)
    assert _rehearsals(data)[100]["status"] == "ok"
    verdict = data["rehearsals"][0]
    want = lab.run(STORY_PHASE_1)
    assert want["outcome"] == verdict["outcome"] == "placed"
    assert len(verdict["bars"]) == 16  # each card's BAR1 and BAR3
    assert sorted(b["address"] for b in verdict["bars"] if b["size"] == 128 * G) == sorted(
        want["bar_addrs"])

    vm = api(info, "ticket").nodes(info.node).qemu(100).config
    vm.put(args=f"-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string={SMALL_WINDOW}",
           digest=vm.get()["digest"])  # running: into [PENDING]
    code, data = _check(capsys, *common)
    item, verdict = _rehearsals(data)[100], data["rehearsals"][0]
    assert code == EXIT_CHANGES and item["status"] == "drift" and item["got"] == "not-placed"
    want = lab.run({**STORY_PHASE_1, "mmio64_mb": SMALL_WINDOW})
    assert want["outcome"] == "not-placed"
    placed = sorted(b["address"] for b in verdict["bars"]
                    if b["status"] == "placed" and b["size"] == 128 * G)
    # fw-lab's 256 GiB blocks leave no room for the bridges' padding where the cards' real
    # port windows (128 GiB + 32 MiB each) do: it places fewer, each where the rehearsal does
    assert 0 < len(placed) < 8 and set(a for a in want["bar_addrs"] if a) <= set(placed)


def test_a_vm_that_passes_no_device_is_not_rehearsed_and_the_note_says_so() -> None:
    """An --all over a cluster rehearses only what has BARs to place (each rehearsal is a
    firmware boot of seconds): a VM without hostpci entries is counted, not booted."""
    assert passes_devices({"hostpci0": "mapping=gpu", "memory": "4096"})
    assert not passes_devices({"memory": "4096", "net0": "virtio=AA:BB:CC:DD:EE:FF"})

    def empty(vmid: int) -> Verdict:
        raise NothingToPlace(f"VM {vmid} passes no PCI device")

    report = rehearse_each(_compared(), empty)
    assert not any(i.property == "rehearsal" for i in report.items)
    assert report.exit_code == _compared().exit_code and report.rehearsals == []
    assert "rehearsed the next start of 0 VM(s)" in report.notes[-1]
    assert "1 VM(s) pass no PCI device: nothing to place, not rehearsed" in report.notes[-1]


# -- a cluster: the nodes in parallel, each node one VM at a time ------------------------------

Span = tuple[str, float, float]  # node, start, end


def _overlap(a: Span, b: Span) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def _assert_parallel_nodes_serial_runs(spans: list[Span]) -> None:
    nodes = {s[0] for s in spans}
    assert len(nodes) >= 2
    assert any(_overlap(a, b) for a in spans for b in spans if a[0] != b[0])
    for node in nodes:
        own = sorted(s for s in spans if s[0] == node)
        assert len(own) >= 2
        assert all(x[2] <= y[1] for x, y in pairwise(own)), own


def test_nodes_rehearse_in_parallel_and_each_node_one_vm_at_a_time() -> None:
    """Three nodes of three VMs, each rehearsal a short sleep: the nodes' runs overlap in
    time, one node's never do; one node's error stays that VM's; the report keeps its order."""
    where = {100: "a", 101: "b", 102: "c", 103: "a", 104: "b", 105: "c", 106: "a", 107: "b",
             108: "c"}
    spans: list[Span] = []
    lock = threading.Lock()
    seen: list[tuple[int, int]] = []

    def rehearse(vmid: int) -> Verdict:
        start = time.monotonic()
        time.sleep(0.15)
        with lock:
            spans.append((where[vmid], start, time.monotonic()))
        if vmid == 104:
            raise RehearseRefused("node b has no QEMU")
        return dataclasses.replace(_verdict("placed"), vmid=vmid, node=where[vmid])

    started = time.monotonic()
    outcomes = rehearse_nodes(list(where.items()), rehearse,
                              lambda done, total: seen.append((done, total)))
    took = time.monotonic() - started
    _assert_parallel_nodes_serial_runs(spans)
    assert took < 9 * 0.15  # not one after another
    assert isinstance(outcomes[104], RehearseRefused)
    assert all(isinstance(outcomes[v], Verdict) and outcomes[v].vmid == v  # type: ignore[union-attr]
               for v in where if v != 104)
    assert sorted(seen) == [(n, 9) for n in range(1, 10)]

    report = CheckReport(source="test", items=[
        CheckItem(target="vm", vmid=v, node=n, property="machine", status="ok")
        for v, n in where.items()])
    done = rehearse_each(report, rehearse)
    assert [r["vmid"] for r in done.rehearsals] == [v for v in where if v != 104]
    assert "3 nodes in parallel" in done.notes[-1]
    assert [i.vmid for i in done.items if i.key == "rehearsal"] == list(where)


def test_one_worker_rehearses_the_nodes_one_after_another() -> None:
    spans: list[Span] = []

    def rehearse(vmid: int) -> Verdict:
        start = time.monotonic()
        time.sleep(0.05)
        spans.append((str(vmid % 2), start, time.monotonic()))
        return _verdict("placed")

    rehearse_nodes([(1, "b"), (2, "a"), (3, "b"), (4, "a")], rehearse, workers=1)
    spans.sort(key=lambda s: s[1])
    assert all(x[2] <= y[1] for x, y in pairwise(spans))


@pytest.mark.conformance
def test_a_simulated_cluster_rehearses_its_nodes_at_once_and_each_node_in_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """cluster3 with a second GPU VM on borealis and on cygnus: `check --all --rehearse`
    boots the firmware for real (this machine's QEMU, fw-lab's OVMF) through each simulated
    node's SSH; the simulator's record of the node script's runs shows the two nodes' runs
    overlapping and each node's runs one after another (each node has its lock)."""
    edk2 = fwlab_edk2_and_qemu()
    import pvefix.sim.commands as sim_commands
    from pvefix.sim.serve import Simulator

    monkeypatch.setenv("PVEFIX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    sim = Simulator("cluster3", tmp_path / "sim", task_seconds=0.05)
    confs = tmp_path / "sim" / "etc" / "pve" / "nodes"
    for node, source, new in (("borealis", 320, 321), ("cygnus", 313, 314)):
        folder = confs / node / "qemu-server"
        (folder / f"{new}.conf").write_text((folder / f"{source}.conf").read_text())
    spans: list[Span] = []
    real = sim_commands._COMMANDS["timeout"]

    def timed(sh: Any, argv: list[str]) -> Any:
        start = time.monotonic()
        result = real(sh, argv)
        if argv[7] == "run":
            spans.append((sh.state.node, start, time.monotonic()))
        return result

    monkeypatch.setitem(sim_commands._COMMANDS, "timeout", timed)
    ready = tmp_path / "ready.json"
    write_ready_file(sim.start(), ready)
    try:
        vms = ["300", "310", "311", "312", "313", "314", "320", "321"]
        assert main(["desired", *vms, "--from", "current", "--connection", str(ready),
                     "-o", str(tmp_path / "d.toml")]) == EXIT_OK
        capsys.readouterr()
        _, data = _check(capsys, "--all", "--connection", str(ready), "--desired",
                         str(tmp_path / "d.toml"), "--rehearse", "--rehearse-accel", "tcg",
                         "--rehearse-firmware-dir", str(edk2))
    finally:
        sim.stop()
    items = _rehearsals(data)
    assert {v: items[v]["got"] for v in (313, 314, 320, 321)} == dict.fromkeys(
        (313, 314, 320, 321), "placed")
    assert sorted(s[0] for s in spans) == ["borealis", "borealis", "cygnus", "cygnus"]
    _assert_parallel_nodes_serial_runs(spans)
