"""P2P as a setting, end to end against the simulator (real HTTPS and SSH): a connection
profile's `p2p = true` makes `apply` plan and apply phase 3 without the flag; the recorded
desired state then wants P2P, `check` guards each clique, rollback puts the bytes back, and the
next plan asks for P2P again because the desired state does."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.main import main
from pvefix.sim.qemu_cmdline import qemu_pid
from pvefix.vmconfig import VMConfig
from pvefix.vmconfig.args import clique_map
from tests.executor.conftest import Node
from tests.simkit import state_key

PER_SOCKET = {"hostpci0": 0, "hostpci1": 0, "hostpci2": 1, "hostpci3": 1}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def _args(n: Node, vmid: int) -> str:
    return VMConfig.parse(n.conf(vmid).decode()).main.get("args") or ""


def test_a_profile_p2p_setting_applies_phase_3_and_check_and_rollback_follow(
    node: Callable[..., Node], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    n = node("sapphire-2s")
    before = n.fingerprint(500)
    config = tmp_path / "config.toml"
    config.write_text("[profiles.lab]\np2p = true\n")
    target = ["--connection", str(n.ready_file), "--config", str(config), "--profile", "lab",
              "--state-dir", str(n.state_dir)]

    code, out = _run(capsys, "plan", "500", *target, "-f", "json")
    plan = json.loads(out[: out.rindex("}") + 1])["plans"][0]
    assert code == 2 and [p["number"] for p in plan["phases"]] == [3]
    assert plan["options"]["p2p_from"] == f"profile lab ({config})"

    code, out = _run(capsys, "apply", "500", "--phase", "3", "--restart", "--yes", "--qm-set",
                     *target)  # the ready file gives a token: args goes through qm set
    assert code == 0, out
    assert f"/proc/{qemu_pid(500)}/cmdline on spr2: every clique is there" in out
    args = _args(n, 500)
    assert clique_map(args) == PER_SOCKET
    assert args.startswith("-set device.net0.rombar=0 -set device.hostpci0.")  # kept in place
    recorded = n.state_dir / "desired" / state_key(n.info, "node-spr2") / "500.toml"
    assert "[vms.500.p2p]\nwanted = true\n" in recorded.read_text()

    code, out = _run(capsys, "check", "500", *target, "--format", "json")
    assert code == 0, out
    items = json.loads(out[: out.rindex("}") + 1])["items"]
    cliques = {i["property"]: i["status"] for i in items if i["property"].startswith("P2P")}
    assert cliques == {f"P2P clique of {k}": "ok" for k in PER_SOCKET}

    code, out = _run(capsys, "rollback", "500", "--yes", *target)
    assert code == 0, out
    assert n.fingerprint(500)["conf"] == before["conf"]

    # The desired state still wants the cliques: each lost one is drift.
    code, out = _run(capsys, "check", "500", *target, "--format", "json")
    assert code == 2
    drifted = {i["property"] for i in json.loads(out[: out.rindex("}") + 1])["items"]
               if i["status"] == "drift"}
    assert {f"P2P clique of {k}" for k in PER_SOCKET} <= drifted

    # Without the profile, the recorded desired state asks for P2P; --no-p2p overrides it.
    plain = ["--connection", str(n.ready_file), "--state-dir", str(n.state_dir)]
    code, out = _run(capsys, "plan", "500", *plain, "-f", "json")
    plan = json.loads(out[: out.rindex("}") + 1])["plans"][0]
    assert [p["number"] for p in plan["phases"]] == [3]
    assert plan["options"]["p2p_from"] == f"desired state {recorded}"
    code, out = _run(capsys, "plan", "500", *plain, "--no-p2p")
    assert code == 0 and "P2P phase not asked for: flag --no-p2p" in out
