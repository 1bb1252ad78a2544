"""`pvefix rehearse` end to end against the simulator, whose node runs the rehearsal's script
for real on this machine (its QEMU where installed: tests with a firmware set are conformance
tests and need ../shared/fw-lab).

Done means: for the story VM (kpro6, VM 100, eight 128 GiB BARs), `pvefix rehearse 100 --phase
1` says before any restart whether all eight BARs will be placed, and that answer is what the
firmware does (fw-lab's run of the same configuration)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pvefix.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, EXIT_REFUSED
from pvefix.main import main
from pvefix.sim.serve import write_ready_file
from tests.shared import FWLAB_EDK2 as EDK2
from tests.shared import NEEDS_SHARED, SHARED, fwlab_edk2_and_qemu, fwlab_module


@pytest.fixture
def ready(kpro6_ready: Path) -> Path:
    return kpro6_ready


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["rehearse", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_no_time_for_tcg_is_refused_with_the_reason(
        ready: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("timeout") is None:
        pytest.skip("timeout(1) is not installed")
    code, _, err = _run(capsys, "100", "--phase", "1", "--connection", str(ready),
                        "--accel", "tcg", "--boot-timeout", "5")
    assert code == EXIT_REFUSED
    # a node without QEMU refuses first, and says so
    assert "leaves no time for TCG" in err or "has no QEMU" in err


def test_a_bundle_has_no_node_to_rehearse_on(capsys: pytest.CaptureFixture[str]) -> None:
    from pvefix.hosttree import resolve_scenario

    code, _, err = _run(capsys, "100", "--bundle", str(resolve_scenario("kpro6")))
    assert code == EXIT_ERROR and "a bundle (--bundle) has no node" in err


@pytest.mark.conformance
def test_story_vm_phase_1_places_all_eight_bars_where_the_firmware_does(
        ready: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fwlab_edk2_and_qemu()
    code, out, _ = _run(capsys, "100", "--phase", "1", "--connection", str(ready),
                        "--firmware-dir", str(EDK2), "--accel", "tcg", "--format", "json")
    verdict = json.loads(out)
    assert code == EXIT_OK, json.dumps(verdict)
    import jsonschema

    from pvefix.schemas import shipped

    jsonschema.Draft202012Validator(shipped("rehearse")).validate(verdict)
    assert verdict["outcome"] == "placed" and verdict["config"] == "phase 1"
    # each GPU's 128 GiB BAR1 and its 32 MiB BAR3 (a second function of its stand-in)
    assert [b["status"] for b in verdict["bars"]] == ["placed"] * 16
    assert sorted(b["size"] >> 20 for b in verdict["bars"]) == [32] * 8 + [131072] * 8
    assert verdict["phys_bits"] == 52 and verdict["vendor"] == "AuthenticAMD"
    assert verdict["ram_mb"] == 1572864 and verdict["machine"] == "q35"
    # each card's 128 GiB BAR1 and 32 MiB BAR3 share its root port's window (128 GiB +
    # 32 MiB, aligned to 128 GiB); fw-lab's stand-ins have one BAR each, so a card is the
    # 256 GiB block the planner counts: the BAR1 addresses must be the blocks' addresses
    lab = _fwlab().run({"firmware_set": "edk2-2025.02", "cpu": "x86-64-v2-AES",
                        "phys_bits": "52", "pdpe1gb": True, "vendor": "amd",
                        "ram": "1536G", "bars": "8x256G"})
    assert lab["outcome"] == "placed"
    assert sorted(b["address"] for b in verdict["bars"] if b["size"] == 128 << 30) == sorted(
        lab["bar_addrs"])


@pytest.mark.conformance
def test_story_vm_today_qemu_refuses_its_ram_beyond_40_bits(
        ready: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fwlab_edk2_and_qemu()
    code, out, _ = _run(capsys, "100", "--connection", str(ready), "--firmware-dir", str(EDK2),
                        "--accel", "tcg")
    assert code == EXIT_CHANGES
    assert "QEMU REFUSES" in out and "phys-bits too low (40)" in out


def _fwlab() -> Any:
    return fwlab_module(check=False)


@pytest.mark.conformance
def test_plan_rehearse_shows_the_verdict_after_the_plan(
        ready: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fwlab_edk2_and_qemu()
    code = main(["plan", "100", "--connection", str(ready), "--rehearse", "--rehearse-accel",
                 "tcg", "--rehearse-firmware-dir", str(EDK2)])
    out = capsys.readouterr().out
    assert code == EXIT_CHANGES  # the plan's own exit code
    assert out.index("Phase 1") < out.index("Rehearsal (pvefix rehearse")
    assert "VM 100 on kpro6, the plan's end" in out and "ALL PLACED: all 16 BARs" in out


@pytest.mark.conformance
def test_apply_rehearse_refuses_a_failing_phase_before_any_write_and_applies_a_good_one(
        fresh_sim: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    fwlab_edk2_and_qemu()
    from tests.simkit import api

    info = fresh_sim("kpro6")
    path = tmp_path / "ready.json"
    write_ready_file(info, path)
    monkeypatch.setenv("PVEFIX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    common = ["apply", "100", "--phase", "1", "--yes", "--connection", str(path), "--rehearse",
              "--rehearse-accel", "tcg"]
    vm = api(info, "ticket").nodes(info.node).qemu(100)
    before = vm.config.get()
    # edk2 2022.11 at 52 bits and 1.5 TiB does not reach its boot manager in 30 s under TCG
    old = SHARED / "fw-lab" / "firmware" / "edk2-2022.11"
    code = main([*common, "--rehearse-timeout", "30", "--rehearse-firmware-dir", str(old)])
    out, err = capsys.readouterr()
    assert code == EXIT_REFUSED, err
    assert "the rehearsal of phase 1 fails: no-boot" in err and "nothing was written" in err
    assert "WOULD NOT BOOT" in out
    assert vm.config.get()["digest"] == before["digest"]
    code = main([*common, "--rehearse-firmware-dir", str(EDK2)])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert "ALL PLACED: all 16 BARs" in out and "applied phase 1" in out + err
    assert vm.config.get()["digest"] != before["digest"]


@pytest.mark.conformance
def test_kvm_is_used_when_usable_and_the_verdict_says_so(
        ready: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--accel auto on a node with a usable /dev/kvm runs QEMU with `-accel kvm` and says
    KVM (VM 101: SeaBIOS, QEMU's own; its outcome is the node's, see docs/rehearse.md)."""
    import os

    fwlab_edk2_and_qemu()
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        pytest.skip(f"{NEEDS_SHARED}: no usable /dev/kvm here (KVM)")
    code, out, _ = _run(capsys, "101", "--connection", str(ready), "--boot-timeout", "60",
                        "--format", "json", "--show-command")
    verdict = json.loads(out)
    assert verdict["accel"] == "kvm" and " -accel kvm " in verdict["command"]
    assert code in (EXIT_OK, EXIT_CHANGES) and verdict["outcome"] != "error"
    code, out, _ = _run(capsys, "101", "--connection", str(ready), "--boot-timeout", "60")
    assert "(KVM)" in out.splitlines()[1]


# The kill test's VM has a VMID no other test rehearses: other rehearsals (of VM 100) may run
# beside it (xdist workers), and their folders must not be taken for this run's.
OWN_VMID = 4244


def _kpro6_with_vm(vmid: int, where: Path) -> Path:
    """kpro6's host tree with its VM 100 renumbered `vmid`."""
    from pvefix.hosttree import materialize_scenario

    materialize_scenario("kpro6", where)
    meta_path = where / "pvefix-host.json"
    meta = json.loads(meta_path.read_text())
    meta["vms"][str(vmid)] = meta["vms"].pop("100")
    meta_path.write_text(json.dumps(meta, indent=2))
    configs = where / "etc" / "pve" / "qemu-server"
    (configs / "100.conf").rename(configs / f"{vmid}.conf")
    return where


def _runs_of(vmid: int) -> set[Path]:
    import tempfile

    return set(Path(tempfile.gettempdir()).glob(f"pvefix-rehearse-{vmid}-*"))


def _processes_in(folders: set[Path]) -> list[int]:
    """The processes whose working folder is one of `folders` (the run's QEMU)."""
    import os

    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")) in folders:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.conformance
def test_killing_pvefix_rehearse_leaves_no_qemu_and_no_folder(
        fresh_sim: Any, tmp_path: Path) -> None:
    """kill -9 of `pvefix rehearse`: the simulator's sshd closes the node script's stdin, as
    sshd does when a connection drops, and the script kills QEMU and removes its folder."""
    import os
    import signal
    import subprocess
    import sys
    import time

    fwlab_edk2_and_qemu()
    from tests.simkit import api

    info = fresh_sim(str(_kpro6_with_vm(OWN_VMID, tmp_path / "tree")))
    path = tmp_path / "ready.json"
    write_ready_file(info, path)
    vm = api(info, "ticket").nodes(info.node).qemu(OWN_VMID)
    # the next start: a 1 TiB X-PciMmio64Mb window at 40 bits, where OVMF hangs
    vm.config.post(machine="q35", cpu="qemu64", memory="2048",
                   args="-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=1048576")
    before = _runs_of(OWN_VMID)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pvefix", "rehearse", str(OWN_VMID), "--connection", str(path),
         "--accel", "tcg", "--firmware-dir", str(EDK2), "--boot-timeout", "300"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while not (_runs_of(OWN_VMID) - before) and time.monotonic() < deadline:
        time.sleep(0.3)
    ours = _runs_of(OWN_VMID) - before
    assert ours, "the run's folder never appeared"
    while not _processes_in(ours) and time.monotonic() < deadline:
        time.sleep(0.3)
    qemu = _processes_in(ours)
    assert qemu, "QEMU never started in the run's folder"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while (_runs_of(OWN_VMID) & ours or any(Path(f"/proc/{p}").exists() for p in qemu)) and \
            time.monotonic() < deadline:
        time.sleep(0.3)
    assert not (_runs_of(OWN_VMID) & ours), "the run's folder was left behind"
    assert not any(Path(f"/proc/{p}").exists() for p in qemu), "QEMU was left running"


@pytest.mark.conformance
def test_an_args_device_makes_the_rehearsal_not_established(
        fresh_sim: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """VM 101 with an `args` -device (another PCI device: its BAR is in no stand-in): the
    firmware is booted without it, and the verdict says so instead of passing (exit 1)."""
    fwlab_edk2_and_qemu()
    from tests.simkit import api

    info = fresh_sim("kpro6")
    path = tmp_path / "ready.json"
    write_ready_file(info, path)
    vm = api(info, "ticket").nodes(info.node).qemu(101)
    vm.config.post(args="-object memory-backend-ram,id=shm,size=64M "
                        "-device ivshmem-plain,memdev=shm,id=shm0")
    code, out, _ = _run(capsys, "101", "--connection", str(path), "--accel", "tcg",
                        "--firmware-dir", str(EDK2), "--boot-timeout", "120")
    assert code == EXIT_ERROR, out
    assert "NOT ESTABLISHED: without what the rehearsal left out (below), the firmware says" in out
    assert "not booted: args-word -device (args: -device ivshmem-plain,memdev=shm,id=shm0)" in out
    assert "not booted: args-word -object" in out
