"""Plans from the next start keep the admin's staged changes: a planned write never revives a
pending delete or drops a staged value unless the plan says so as a risk naming it."""

from __future__ import annotations

from pvefix.planner import plan
from pvefix.planner.context import build_context
from pvefix.planner.model import Risk, VmConfigChange
from pvefix.planner.staged import keep_staged
from pvefix.state import HostState
from pvefix.vmconfig.nextstart import NextStart

from .loader import CASES, build_state, load_case


def _staged_state() -> HostState:
    return build_state(load_case(CASES / "pending-staged.json"))


def test_the_plan_keeps_every_staged_change_and_names_them() -> None:
    state = _staged_state()
    result = plan(state)
    after = NextStart.from_text(result.config_after)
    assert after.value("hostpci2") is None, "the pending delete stays"
    assert after.deletes == {"hostpci2": False}
    assert after.value("cpu") == "host"
    assert after.value("hostpci1") == "0000:9b:00.0,x-vga=1,pcie=1", "builds on the swap"
    assert after.value("hostpci3") == "0000:31:00.0,pcie=1"
    pending = next(f for f in result.findings if f.id == "vm.pending")
    assert pending.evidence == ["cpu: host", "hostpci1: 0000:9b:00.0,x-vga=1",
                                "hostpci3: 0000:31:00.0", "delete: hostpci2"]
    assert "will be applied by the same cold start" not in pending.detail
    written = {c.key for p in result.phases for c in p.changes if c.target == "vm-config"}
    assert "hostpci2" not in written and "cpu" not in written


def _change(key: str, before: str | None, after: str | None) -> VmConfigChange:
    return VmConfigChange(id=f"vm.{key}.x", rule="test", key=key, before=before, after=after,
                          reason="r", risk=Risk(level="low", text="t."), inverse="i",
                          disruption="vm-restart")


def test_reviving_a_pending_delete_or_dropping_a_staged_value_is_a_named_risk() -> None:
    ctx = build_context(_staged_state())
    revive, drop, plain = keep_staged(ctx, [
        _change("hostpci2", None, "0000:9a:00.0,pcie=1"),
        _change("cpu", "host", None),
        _change("memory", "524288", "1048576"),
    ])
    assert revive.risk.level == "medium" and "`delete: hostpci2`" in revive.risk.text
    assert "next start has hostpci2 again" in revive.risk.text
    assert drop.risk.level == "medium" and "`cpu: host`" in drop.risk.text
    assert plain.risk == Risk(level="low", text="t.") and plain.evidence == []
