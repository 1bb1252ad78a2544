"""The plan held to the closed world (pvefix/planner/closed.py) beyond the case files: what a
case shows next to the same VM without the input, the next-start config (not the main section)
classified, the template refused by apply's prepare stage, args' -cpu read back."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pvefix.errors import RefusedError
from pvefix.flow.prepare import Asked, prepare
from pvefix.planner import plan
from pvefix.planner.closed import claim_of
from pvefix.planner.effective_cpu import args_hide_kvm, as_cpu_line
from pvefix.planner.model import Plan, PlanOptions

from .loader import CASES, build_state, load_case


def _plan(case: dict[str, Any]) -> Plan:
    return plan(build_state(case), PlanOptions(**case.get("options", {})))


def _case(name: str) -> dict[str, Any]:
    return load_case(CASES / f"{name}.json")


def _changes(p: Plan) -> list[str]:
    return [c.id for ph in p.phases for c in ph.changes]


def test_args_cpu_keeps_a_cpu_change_that_would_never_take_effect_out_of_the_plan() -> None:
    case = _case("round4-args-cpu-kvm-off")
    without = copy.deepcopy(case)
    del without["edit"]["config_set"]["args"]
    assert "vm.cpu.phys-bits" in _changes(_plan(without))  # the cpu line alone needs it
    got = _plan(case)
    assert not any(c.key == "cpu" for ph in got.phases for c in ph.changes)
    cpu = next(f for f in got.findings if f.id == "closed-world.args-cpu")
    assert "host,hidden=1,flags=+pdpe1gb" in cpu.detail


def test_memory_hotplug_only_in_pending_counts_and_a_pending_delete_lifts_it() -> None:
    case = _case("round4-memory-hotplug")
    text = build_state(case).vm.config_text
    staged = copy.deepcopy(case)
    staged["edit"] = {k: v for k, v in case["edit"].items() if k != "config_set"}
    main = {k: v for k, v in case["edit"]["config_set"].items() if k != "hotplug"}
    lines = [ln for ln in text.splitlines() if not ln.startswith("hotplug:")]
    staged["edit"]["config_text"] = "\n".join(lines) + "\n\n[PENDING]\nhotplug: memory\n"
    staged["edit"]["config_set"] = main
    ids = {f.id for f in _plan(staged).findings}
    assert "not-established.bar-space.config-key.hotplug" in ids
    deleted = copy.deepcopy(case)
    deleted["edit"]["config_text"] = text + "\n[PENDING]\ndelete: hotplug\n"
    del deleted["edit"]["config_set"]
    assert "not-established.bar-space.config-key.hotplug" not in {
        f.id for f in _plan(deleted).findings}


def test_a_template_is_never_started_by_apply() -> None:
    live = build_state(_case("round4-template"))
    said: list[str] = []
    got = plan(live)
    assert all("when it starts" not in ph.activation for ph in got.phases)
    assert "is a template" in got.phases[0].activation
    for asked in (Asked(phase=1, restart=True), Asked(phase=1, start=True, restart=True),
                  Asked(phase=1, pve_snapshot=True)):
        with pytest.raises(RefusedError, match="is a template"):
            prepare(live, None, asked, said.append)
    assert prepare(live, None, Asked(phase=1), said.append).phase.number == 1


_WORDS = st.from_regex(r"-x-[a-z]{1,8}", fullmatch=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(word=_WORDS, value=st.from_regex(r"[a-z0-9=,]{1,10}", fullmatch=True))
def test_nothing_planned_rests_on_a_claim_an_unknown_args_word_touches(word: str,
                                                                       value: str) -> None:
    case = _case("kpro6")
    case["edit"] = {**case.get("edit", {}), "config_set": {"args": f"{word} {value}"}}
    got = _plan(case)
    touched = {f.id.split(".")[1] for f in got.findings if f.id.startswith("not-established.")}
    assert {"start", "machine", "bar-space"} <= touched
    planned = [c for ph in got.phases for c in ph.changes]
    assert [c.id for c in planned if claim_of(c) in touched] == []


@pytest.mark.parametrize(("qemu", "line"), [
    ("host,kvm=off", "host,hidden=1"),
    ("host,kvm=on,kvm=off,+pdpe1gb", "host,hidden=1,flags=+pdpe1gb"),
    ("EPYC-Genoa,host-phys-bits=on,pdpe1gb=on", "EPYC-Genoa,phys-bits=host,flags=+pdpe1gb"),
    ("qemu64,phys-bits=46,hv-vendor-id=proxmox", "qemu64,phys-bits=46"),
    ("host,host-phys-bits-limit=39", None),  # a property pvefix does not read: not established
])
def test_args_cpu_read_back_as_a_cpu_line(qemu: str, line: str | None) -> None:
    assert as_cpu_line(qemu) == line


def test_the_last_kvm_property_decides_whether_kvm_is_hidden() -> None:
    assert args_hide_kvm("host,kvm=off") and not args_hide_kvm("host,kvm=off,kvm=on")
    assert not args_hide_kvm(None) and not args_hide_kvm("host")


def test_every_round4_case_cites_its_source() -> None:
    for path in sorted(Path(CASES).glob("round4-*.json")):
        doc = load_case(path)["doc"]
        assert any(s in doc for s in (".pm", ".c", "documentation", "pvefix.closedworld")), path


def test_under_args_cpu_the_cpu_lines_hidden_neither_blocks_nor_is_edited() -> None:
    case = _case("round4-args-cpu-kvm-off-p2p")
    case["edit"]["config_set"].update(args="-cpu host", cpu="host,hidden=1")
    got = _plan(case)
    assert _changes(got) == ["p2p.args"]  # no p2p.cpu.hidden: QEMU never sees that hidden=1
    assert "p2p.args-cpu-kvm-off" not in {f.id for f in got.findings}


def test_a_plan_emptied_by_gaps_never_reads_as_all_right() -> None:
    from pvefix.commands.plan_cmd import plans_exit_code
    from pvefix.errors import EXIT_CHANGES, EXIT_ERROR
    from pvefix.render.plan_text import render_plan_text

    emptied = _plan(_case("round4-args-unknown-word"))
    text = render_plan_text(emptied)
    assert "already follow every rule" not in text
    assert "not because all is right" in text
    assert not emptied.has_changes and plans_exit_code([emptied]) == EXIT_ERROR, \
        "a script reads exit 0 as nothing to do: never said while a claim is not established"
    changes = _plan(_case("kpro6"))
    assert changes.has_changes and not changes.unsettled
    assert plans_exit_code([emptied, changes]) == EXIT_CHANGES


def test_a_templates_plan_never_says_it_takes_effect_at_a_start() -> None:
    from pvefix.render.plan_text import render_plan_text

    text = " ".join(render_plan_text(_plan(_case("round4-template"))).split())
    assert "takes effect at its next start" not in text and "when it starts" not in text
    assert "--phase 1 --restart" not in text and "--phase 1 --start" not in text
    assert "apply refuses --restart, --start and --pve-snapshot here" in text
    assert "is a template, which Proxmox never starts" in text


@pytest.mark.parametrize(("key", "value", "claims"), [
    ("kvm", "0", {"start", "bar-space", "p2p"}),
    ("acpi", "0", {"bar-space", "guest-cmdline"}),
    ("ivshmem", "size=64,name=x", {"bar-space"}),
])
def test_an_unmodelled_key_in_the_next_start_leaves_its_claims_not_established(
        key: str, value: str, claims: set[str]) -> None:
    case = _case("kpro6")
    case["edit"] = {**case.get("edit", {}), "config_set": {key: value}}
    got = {f.id for f in _plan(case).findings if f.id.startswith("not-established.")}
    assert got == {f"not-established.{c}.config-key.{key}" for c in claims}
    quiet = copy.deepcopy(case)
    quiet["edit"]["config_set"] = {"kvm": "1", "acpi": "1"}  # the defaults touch nothing
    assert not [f.id for f in _plan(quiet).findings if f.id.startswith("not-established.")]
