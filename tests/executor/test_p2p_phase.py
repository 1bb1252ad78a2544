"""The P2P phase (3) against the simulator: args written (root@pam ticket, or `qm set` over SSH
for a token), the running QEMU's /proc/PID/cmdline proven after the cold start, rolled back to
the very same bytes."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable

import pytest

from pvefix.errors import RefusedError
from pvefix.executor.remote import Remote
from pvefix.main import main
from pvefix.planner import plan as make_plan
from pvefix.planner.model import PlanOptions
from pvefix.sim.qemu_cmdline import qemu_pid
from pvefix.sources.live import read_live
from pvefix.vmconfig import VMConfig
from pvefix.vmconfig.args import clique_map
from tests.executor.conftest import Captured, Node

P2P = PlanOptions(p2p=True)


def _phase1_done(n: Node) -> None:
    n.apply(100, 1, restart=True)


def test_phase3_sets_every_clique_proves_the_running_cmdline_and_rolls_back(
    node: Callable[..., Node],
) -> None:
    n = node("kpro6")
    _phase1_done(n)
    before = n.fingerprint(100)
    plan = make_plan(read_live(n.conn(), 100), P2P)
    assert [p.number for p in plan.phases] == [2, 3]
    args = next(c for c in plan.phases[1].changes if c.key == "args")
    assert args.needs_root_pam and args.disruption == "vm-restart"
    cap = Captured()
    result = n.apply(100, 3, restart=True, plan_options=P2P, captured=cap)
    assert result.activated == ["VM 100 restarted"]
    assert f"/proc/{qemu_pid(100)}/cmdline on" in cap.err.getvalue() + cap.out.getvalue()
    cfg = VMConfig.parse(n.conf(100).decode())
    assert clique_map(cfg.main.get("args")) == {f"hostpci{i}": 0 for i in range(8)}
    # Idempotent: a fresh plan with --p2p has nothing left for phase 3.
    assert make_plan(read_live(n.conn(), 100), P2P).phase(3) is None
    n.rollback(100)
    assert n.fingerprint(100) == before


def test_a_token_needs_qm_set_and_then_it_works_over_ssh(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    _phase1_done(n)
    token = n.conn("token")
    with pytest.raises(RefusedError, match="qm set 100 --args"):
        n.apply(100, 3, restart=True, plan_options=P2P, conn=token)
    n.apply(100, 3, restart=True, plan_options=P2P, conn=token, qm_set=True)
    assert "x-nv-gpudirect-clique=0" in (VMConfig.parse(n.conf(100).decode()).main.get("args")
                                         or "")


def test_a_clique_lost_from_the_running_qemu_fails_the_phase() -> None:
    """Simulate a host whose QEMU drops the -set (e.g. args edited behind pvefix's back between
    write and start): the proof reads the real process, not the config."""
    from pvefix.verify.qemu_proof import check_words

    words = ["/usr/bin/kvm", "-cpu", "host,kvm=off", "-device",
             "vfio-pci,host=0000:01:00.0,id=hostpci0.0", "-set",
             "device.hostpci0.x-nv-gpudirect-clique=0"]
    problems = check_words(words, {"hostpci0": 0, "hostpci1": 0})
    assert any("kvm=off" in p for p in problems)
    assert any("no vfio-pci device with that id" in p for p in problems)
    assert any("device.hostpci1" in p for p in problems)
    assert check_words(["-cpu", "host", "-device", "vfio-pci,host=x,id=hostpci0", "-set",
                        "device.hostpci0.x-nv-gpudirect-clique=0"], {"hostpci0": 0}) == []


def test_losing_a_clique_is_drift(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    _phase1_done(n)
    n.apply(100, 3, restart=True, plan_options=P2P)
    remote = Remote(n.conn(), n.info.node)
    args = VMConfig.parse(n.conf(100).decode()).main.get("args") or ""
    kept = args.replace(" -set device.hostpci3.x-nv-gpudirect-clique=0", "")
    remote.write("POST", f"/nodes/{n.info.node}/qemu/100/config", {"args": kept})
    remote.close()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["check", "100", "--connection", str(n.ready_file), "--state-dir",
                     str(n.state_dir), "--format", "json"])
    assert code == 2
    drifted = {i["property"]: i for i in json.loads(out.getvalue())["items"]
               if i["status"] == "drift"}
    assert drifted["P2P clique of hostpci3"]["actual"] == "0 (pending: (none))"  # still running
    assert "P2P clique of hostpci0" not in drifted
