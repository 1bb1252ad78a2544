"""Which config is rehearsed (the next start, phases 1..N over it, a plan's end) and the
stand-ins' BAR sizes from the node's sysfs facts (pure, from the built-in scenarios)."""

from __future__ import annotations

import pytest

from pvefix.errors import PvefixError
from pvefix.hosttree import resolve_scenario
from pvefix.planner import plan as make_plan
from pvefix.rehearse.build import RehearseRefused
from pvefix.rehearse.flow import bar_functions, planned_config, sections
from pvefix.sources.bundle import read_bundle


def test_today_a_phase_and_the_plans_end() -> None:
    state = read_bundle(resolve_scenario("kpro6"), 100)
    plan = make_plan(state)
    today, label = planned_config(state, None, None)
    assert label == "next start" and "machine" not in today
    assert today["cpu"] == "x86-64-v2-AES"
    one, label = planned_config(state, plan, 1)
    assert label == "phase 1" and one["machine"] == "q35"
    assert one["cpu"] == "x86-64-v2-AES,phys-bits=host,flags=+pdpe1gb"
    assert all(one[f"hostpci{i}"] == "mapping=pro6000,pcie=1" for i in range(8))
    end, label = planned_config(state, plan, None)
    assert label == "the plan's end" and end == sections(plan.config_after, "x")[1]
    with pytest.raises(PvefixError, match="no phase 9"):
        planned_config(state, plan, 9)


def test_pending_counts_as_what_the_next_start_runs() -> None:
    main, started = sections("cpu: host\nmemory: 4096\nnuma: 1\n\n[PENDING]\nmemory: 8192\n"
                             "delete: numa,!cpu\n", "t.conf")
    assert main == {"cpu": "host", "memory": "4096", "numa": "1"}
    assert started == {"memory": "8192"}


def test_a_pool_entry_is_sized_by_its_largest_candidate() -> None:
    state = read_bundle(resolve_scenario("kpro6"), 100)
    config, _ = planned_config(state, make_plan(state), 1)
    functions = bar_functions(state, config)
    assert sorted(functions) == [f"hostpci{i}" for i in range(8)]
    for key, pairs in functions.items():
        assert len(pairs) == 1 and pairs[0][1] == 128 << 30, key
        assert pairs[0][0].startswith("pool pro6000, largest: 0000:")


def test_devices_not_in_the_facts_are_refused_not_guessed() -> None:
    state = read_bundle(resolve_scenario("kpro6"), 100)
    with pytest.raises(RehearseRefused, match="hostpci0: cannot size its BARs"):
        bar_functions(state, {"hostpci0": "0000:fe:00.0,pcie=1", "machine": "q35"})


def test_the_next_start_is_main_with_pending_applied() -> None:
    """check --rehearse rehearses what the next cold start runs, [PENDING] included."""
    from pvefix.rehearse.flow import next_start_config

    state = read_bundle(resolve_scenario("kpro6"), 100)
    text = state.vm.config_text + ("\n[PENDING]\nmachine: q35\ndelete: numa\n"
                                   "cpu: x86-64-v2-AES,phys-bits=host\n")
    pending = state.model_copy(update={"vm": state.vm.model_copy(update={"config_text": text})})
    started = next_start_config(pending)
    assert started["machine"] == "q35" and started["cpu"] == "x86-64-v2-AES,phys-bits=host"
    assert "numa" not in started and started["memory"] == "1572864"
    assert next_start_config(state) == planned_config(state, None, None)[0]  # no [PENDING]
    # plain `rehearse VMID`, --phase and the plan's end: each the next start, [PENDING] in
    assert planned_config(pending, None, None) == (started, "next start")
    plan = make_plan(pending)
    one, _ = planned_config(pending, plan, 1)
    assert one["machine"] == "q35" and "numa" not in one


@pytest.mark.parametrize(("kvm", "wanted", "timeout", "accel"), [
    (True, "auto", 120.0, "kvm"), (False, "auto", 120.0, "tcg"), (True, "tcg", 120.0, "tcg"),
    (True, "auto", 5.0, "kvm"),  # KVM needs no TCG-sized time limit
    (False, "kvm", 120.0, "refused: /dev/kvm is not usable"),
    (False, "auto", 5.0, "refused: no KVM access"),
])
def test_kvm_when_usable_else_tcg_else_refused(kvm: bool, wanted: str, timeout: float,
                                               accel: str) -> None:
    from pvefix.rehearse.build import NodeFacts
    from pvefix.rehearse.runner import choose_accel

    node = NodeFacts(qemu="/usr/bin/kvm", kvm=kvm, mem_available=8 << 30)
    if accel.startswith("refused: "):
        with pytest.raises(RehearseRefused, match=accel.removeprefix("refused: ")):
            choose_accel(node, wanted, timeout, "node x")
    else:
        assert choose_accel(node, wanted, timeout, "node x") == accel
    with pytest.raises(RehearseRefused, match="MiB of memory available"):
        choose_accel(NodeFacts(qemu="/usr/bin/kvm", kvm=kvm, mem_available=512 << 20),
                     wanted, timeout, "node x")
