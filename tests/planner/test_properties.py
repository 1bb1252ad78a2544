"""Properties over many generated VMs: pcie=1 never activates before q35, configs stay valid."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pvefix.hosttree import resolve_scenario
from pvefix.planner import plan
from pvefix.sources.bundle import read_bundle
from pvefix.state import HostState
from pvefix.vmconfig import HostPci, Machine, VMConfig
from pvefix.vmconfig.values import validate

BASE = read_bundle(resolve_scenario("kpro6"), 100)
GPUS = ["0000:01:00.0", "0000:21:00.0", "0000:41:00.0", "0000:61:00.0"]

entry = st.tuples(
    st.sampled_from(["mapping=pro6000", *GPUS, "0000:01:00", "0000:c1:00.0;0000:e1:00.0"]),
    st.sampled_from(["", ",pcie=1", ",pcie=0", ",x-vga=1", ",rombar=0", ",legacy-igd=1"]),
)


@st.composite
def states(draw: st.DrawFn) -> HostState:
    cfg = VMConfig.parse(BASE.vm.config_text)
    for i in range(8):
        cfg.main.delete(f"hostpci{i}")
    for i, (head, tail) in enumerate(draw(st.lists(entry, max_size=5))):
        cfg.main.set(f"hostpci{draw(st.integers(0, 15)) if i else 0}", head + tail)
    machine = draw(
        st.sampled_from(
            [
                None,
                "pc",
                "q35",
                "pc-i440fx-9.2+pve1",
                "pc-q35-8.1",
                "pc-i440fx-8.1.pxe,viommu=virtio",
            ]
        )
    )
    if machine:
        cfg.main.set("machine", machine)
    status = draw(st.sampled_from(["running", "stopped"]))
    vm = BASE.vm.model_copy(
        update={
            "config_text": cfg.render(),
            "digest": cfg.digest,
            "status": status,
            "running_machine": "pc-i440fx-10.1+pve0" if status == "running" else None,
        }
    )
    return BASE.model_copy(update={"vm": vm})


def _effective(text: str) -> dict[str, str]:
    cfg = VMConfig.parse(text)
    values = cfg.main.as_dict()
    values.update(cfg.pending.as_dict())
    return values


@given(states())
def test_no_phase_ever_activates_pcie_without_q35(state: HostState) -> None:
    result = plan(state)
    before = _effective(state.vm.config_text)
    had_trap = (
        any(k.startswith("hostpci") and HostPci.parse(v, k).pcie for k, v in before.items())
        and Machine.parse(before.get("machine")).family != "q35"
    )
    values = dict(before)
    for phase in result.phases:
        for c in phase.changes:
            if c.target == "vm-config":
                assert c.after is not None
                values[c.key] = c.after
        family = Machine.parse(values.get("machine")).family
        added_pcie = [
            k
            for k, v in values.items()
            if k.startswith("hostpci") and HostPci.parse(v, k).pcie and before.get(k) != v
        ]
        if added_pcie:
            assert family == "q35", (phase.number, added_pcie, values.get("machine"))
        if had_trap and any(c.key == "machine" for c in phase.changes):
            assert family == "q35"


@given(states())
def test_every_config_a_plan_produces_is_valid_for_proxmox(state: HostState) -> None:
    result = plan(state)
    after = VMConfig.parse(result.config_after, "after.conf", strict=True)
    for key, value in {**after.main.as_dict(), **after.pending.as_dict()}.items():
        validate(key, value)
    for phase in result.phases:
        for c in phase.changes:
            if c.target == "vm-config" and c.after is not None:
                validate(c.key, c.after)
    # Nothing but the planned keys moved.
    changed = {c.key for p in result.phases for c in p.changes if c.target == "vm-config"}
    before = VMConfig.parse(state.vm.config_text)
    for key, value in before.main.as_dict().items():
        if key not in changed:
            assert after.main.get(key) == value
