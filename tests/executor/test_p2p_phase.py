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
from pvefix.executor.options import ApplyOptions
from pvefix.executor.transaction import ApplyFailed
from pvefix.flow.apply import apply_phase
from pvefix.main import main
from pvefix.planner import plan as make_plan
from pvefix.planner.model import PlanOptions
from pvefix.sim.qemu_cmdline import qemu_pid
from pvefix.sources.live import read_live
from pvefix.target.guest.access import GuestAccess
from pvefix.target.sessions import Sessions
from pvefix.target.tasks import run_task, write
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
    args = VMConfig.parse(n.conf(100).decode()).main.get("args") or ""
    kept = args.replace(" -set device.hostpci3.x-nv-gpudirect-clique=0", "")
    with Sessions(n.conn()) as sessions:
        write(sessions.api(), n.info.node, "POST", f"/nodes/{n.info.node}/qemu/100/config",
              {"args": kept})
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["check", "100", "--connection", str(n.ready_file), "--state-dir",
                     str(n.state_dir), "--format", "json"])
    assert code == 2
    drifted = {i["property"]: i for i in json.loads(out.getvalue())["items"]
               if i["status"] == "drift"}
    assert drifted["P2P clique of hostpci3"]["actual"] == "0 (pending: (none))"  # still running
    assert "P2P clique of hostpci0" not in drifted


def _with_agent(n: Node) -> None:
    """VM 100 gets `agent: 1` (cold start), then phase 1 (q35, pcie=1, ...)."""
    name = n.info.node
    with Sessions(n.conn()) as sessions:
        api = sessions.api()
        run_task(api, name, f"/nodes/{name}/qemu/100/status/stop", {}, 10)
        write(api, name, "POST", f"/nodes/{name}/qemu/100/config", {"agent": "1"})
        run_task(api, name, f"/nodes/{name}/qemu/100/status/start", {}, 10)
    _phase1_done(n)


def test_verify_proves_ns_to_ok_in_the_guest(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    _with_agent(n)
    cap = Captured()
    result = apply_phase(n.conn(), 100, ApplyOptions(
        phase=3, state_dir=n.state_dir, yes=True, restart=True, verify=True, task_timeout=10,
        guest_wait=30, plan_options=P2P), cap.console(), guest=GuestAccess(method="agent"))
    out = cap.out.getvalue()
    assert "P2P phase proven in the guest: every granted pair reports OK" in out
    assert "not measured (not counted as a pass): data movement" in out  # no torch here
    assert not result.verify_worse


def test_a_host_that_cannot_p2p_fails_the_phase_and_auto_rollback_reverts_it_alone(
    node: Callable[..., Node],
) -> None:
    n = node("kpro6")
    _with_agent(n)
    before = n.fingerprint(100)
    n.sim.faults.update(p2p_blocked=[100])
    cap = Captured()
    with pytest.raises(ApplyFailed, match=r"(?s)0 GPU pair\(s\) report OK, the cliques grant"
                       r" 56.*rolled back \(--auto-rollback\)"):
        apply_phase(n.conn(), 100, ApplyOptions(
            phase=3, state_dir=n.state_dir, yes=True, restart=True, verify=True,
            auto_rollback=True, task_timeout=10, guest_wait=30, plan_options=P2P),
            cap.console(), guest=GuestAccess(method="agent"))
    assert n.fingerprint(100) == before  # phase 1 stays, phase 3 is gone
    assert n.sim.state.run_state(100).status == "running"
