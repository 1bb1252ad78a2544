"""pvefix refuses (exit 3) rather than write blind: a stale plan, another user's edit between
the snapshot and the write, a prerequisite not in effect, credentials that cannot make the
change. Each refusal leaves the target exactly as it was."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from pvefix.errors import EXIT_REFUSED, RefusedError
from pvefix.executor.journal import Record
from pvefix.executor.snapshot import list_snapshots
from pvefix.flow.planfile import load_plan_file
from pvefix.planner import plan as make_plan
from pvefix.planner.model import Plan
from pvefix.sources.live import read_live
from tests.executor.conftest import Captured, Node
from tests.simkit import api, grant


def _other_admin_edits(n: Node, vmid: int, text: str = "edited by another admin") -> None:
    """Another admin changes the VM's description through the API (their own login)."""
    prox = api(n.info, "ticket")
    prox.nodes(n.info.node).qemu(vmid).config.put(description=text)


def test_a_stale_plan_is_refused_naming_what_moved(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    plan = make_plan(read_live(n.conn(), 100))
    _other_admin_edits(n, 100)
    before = n.fingerprint(100)
    with pytest.raises(RefusedError) as caught:
        n.apply(100, 1, plan=plan)
    assert caught.value.exit_code == EXIT_REFUSED
    assert "the plan is stale" in str(caught.value)
    assert f"VM 100 config digest {plan.observed.vm_digest[:12]}" in str(caught.value)
    assert "--replan" in str(caught.value)
    assert n.fingerprint(100) == before
    assert list_snapshots(n.state_dir) == []


def test_a_stale_host_file_hash_is_named_too(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    plan = make_plan(read_live(n.conn(), 100))
    n.sim.state.write_host("/etc/kernel/cmdline", "root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet\n")
    with pytest.raises(RefusedError, match=r"/etc/kernel/cmdline sha256 1d0edefd5676 -> "):
        n.apply(100, 2, plan=plan)


def test_replan_plans_afresh_from_the_live_target(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    plan = make_plan(read_live(n.conn(), 100))
    _other_admin_edits(n, 100)
    cap = Captured()
    n.apply(100, 1, plan=plan, replan=True, captured=cap)
    assert "the plan was stale" in cap.err.getvalue()
    text = n.conf(100).decode()
    assert "machine: q35" in text and "edited by another admin" in text


def test_another_users_edit_between_snapshot_and_write_is_refused_by_digest(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")

    def edit_after_snapshot(record: Record) -> None:
        if record["event"] == "apply-start":
            _other_admin_edits(n, 100, "their change")

    with pytest.raises(RefusedError, match="checksum mismatch") as caught:
        n.apply(100, 1, hook=edit_after_snapshot)
    assert "nothing had been written" in str(caught.value)
    text = n.conf(100).decode()
    assert text.startswith("#their change\n"), "their edit stands"
    assert "q35" not in text and "pcie" not in text, "nothing of pvefix's was written"
    (snap,) = list_snapshots(n.state_dir)
    assert snap.status() == "undone"


def test_a_token_is_refused_before_any_write_for_raw_host_devices(
    node: Callable[..., Node]
) -> None:
    n = node("intel-grub")
    grant(n.info.root, n.info.token_id)  # its token is privilege-separated
    before = n.fingerprint(200)
    with pytest.raises(RefusedError) as caught:
        n.apply(200, 1, conn=n.conn("token"))
    message = str(caught.value)
    assert "only root@pam with a password ticket" in message
    assert "nothing was written" in message
    assert "--user root@pam --auth password" in message
    assert "qm set 200 --hostpci1 0000:31:00.0,x-vga=1,pcie=1" in message
    assert "--hostpci0" not in message, "hostpci0 has pcie=1 staged: nothing to write"
    assert n.fingerprint(200) == before
    assert list_snapshots(n.state_dir) == []


def test_with_qm_set_a_token_connection_applies_raw_devices_as_root_over_ssh(
    node: Callable[..., Node]
) -> None:
    n = node("intel-grub")
    grant(n.info.root, n.info.token_id)  # its token is privilege-separated
    before = n.fingerprint(200)
    result = n.apply(200, 1, conn=n.conn("token"), qm_set=True, restart=True)
    text = n.conf(200).decode()
    assert "hostpci0: 0000:17:00,pcie=1" in text and "machine: pc-q35-8.1" in text
    (snap,) = list_snapshots(n.state_dir)
    writers = {r.get("writer") for r in snap.records() if r["event"] == "step-begin"}
    assert writers == {"qm set over SSH"}
    assert result.activated == ["VM 200 restarted"]
    n.rollback(200, conn=n.conn("token"))
    assert n.fingerprint(200)["conf"] == before["conf"]


def _plan_dict(plan: Plan) -> dict[str, Any]:
    return json.loads(json.dumps(plan.to_json_dict()))


def test_a_prerequisite_the_planner_does_not_derive_is_refused_as_a_tampered_plan(
    node: Callable[..., Node], tmp_path: Any
) -> None:
    n = node("kpro6")
    data = _plan_dict(make_plan(read_live(n.conn(), 100)))
    # Say the host change of phase 2 needs q35 from phase 1 (as a future rule could).
    data["phases"][1]["changes"][0]["requires"] = ["vm.machine.q35"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    before = n.fingerprint(100)
    # A plan file is data: a prerequisite the planner does not derive is a tampered plan.
    with pytest.raises(RefusedError, match=r"host.cmdline.iommu_pt: requires is \['vm.machine"
                       r".q35'\] in the saved plan, \[\] derived now"):
        n.apply(100, 2, plan=load_plan_file(path))
    assert n.fingerprint(100) == before


def test_a_locked_vm_is_refused(node: Callable[..., Node]) -> None:
    n = node("kpro6", inject=["lock=100:backup"])
    with pytest.raises(RefusedError, match=r"VM 100 is locked \(backup\)"):
        n.apply(100, 1)


def test_rollback_refuses_with_a_diff_when_someone_else_changed_the_vm_since(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    before = n.fingerprint(100)
    n.apply(100, 1)
    _other_admin_edits(n, 100, "later edit")
    moved = n.fingerprint(100)
    with pytest.raises(RefusedError) as caught:
        n.rollback(100)
    message = str(caught.value)
    assert "description changed" in message
    assert "+machine: q35" not in message and "-machine: q35" in message, message
    assert "--force" in message
    assert n.fingerprint(100) == moved
    n.rollback(100, force=True)
    assert n.fingerprint(100) == before
