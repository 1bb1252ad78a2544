"""The fact registry: one declaration per node fact, and the rounds its reads go out in."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.facts import Command, Fact, rounds
from pvefix.facts.node import NODE_FACTS, facts_for, round_zero
from pvefix.facts.parse import first_line
from pvefix.target.result import CommandResult


def _fact(name: str, needs: tuple[str, ...] = ()) -> Fact[str | None]:
    return Fact(name, Command(("echo", name)), first_line, f"meta:{name}", None,
                frozenset({"plan"}), needs)


def test_every_node_fact_is_declared_once_with_its_own_command() -> None:
    names = [f.name for f in NODE_FACTS]
    commands = [f.read for f in NODE_FACTS]
    assert len(set(names)) == len(names), names
    assert len(set(commands)) == len(commands), commands


def test_check_reads_hostname_first_and_the_cmdline_facts_only() -> None:
    got = round_zero("check")
    assert got[0] == ("hostname",)
    assert ("cat", "/etc/kernel/cmdline") in got and ("proxmox-boot-tool", "status") in got
    assert ("lspci", "-D", "-vv") not in got  # a plan's fact, not check's


def test_a_plan_reads_every_fact_that_needs_none_in_its_first_round() -> None:
    first = round_zero("plan")
    assert ("hostname",) not in first  # the session checks it when it opens
    later = [f for f in facts_for("plan") if f.needs]
    assert all(f.argv({n: "x" for n in f.needs}) not in first for f in later)
    assert len(first) + len(later) == len(facts_for("plan"))


def test_a_fact_that_names_another_goes_out_in_the_round_after_it() -> None:
    a, b, c = _fact("a"), _fact("b", ("a",)), _fact("c", ("b",))
    assert rounds([c, b, a]) == [[a], [b], [c]]
    assert rounds([c, b], known={"a"}) == [[b], [c]]
    assert b.argv({"a": "1"}) == ("echo", "b")


def test_an_argument_is_filled_from_the_fact_it_needs() -> None:
    f = Fact("cfg", Command(("cat", "/boot/config-{kernel_version}")), first_line,
             "boot/config-{kernel_version}", None, frozenset({"plan"}), ("kernel_version",))
    assert f.argv({"kernel_version": "6.8.12-4-pve"}) == ("cat", "/boot/config-6.8.12-4-pve")
    assert f.tree_path({"kernel_version": "6.8.12-4-pve"}) == "boot/config-6.8.12-4-pve"
    with pytest.raises(KeyError, match="needs kernel_version"):
        f.argv({})


def test_a_need_declared_nowhere_or_a_cycle_is_refused() -> None:
    with pytest.raises(ValueError, match="declared nowhere"):
        rounds([_fact("a", ("zzz",))])
    with pytest.raises(ValueError, match="need each other"):
        rounds([_fact("a", ("b",)), _fact("b", ("a",))])


@st.composite
def _dags(draw: st.DrawFn) -> list[Fact[Any]]:
    n = draw(st.integers(1, 12))
    facts: list[Fact[Any]] = []
    for i in range(n):
        needs = draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else set()
        facts.append(_fact(f"f{i}", tuple(f"f{j}" for j in sorted(needs))))
    return draw(st.permutations(facts))


@given(_dags())
def test_rounds_put_every_fact_after_its_needs_and_are_as_few_as_the_longest_chain(
        facts: list[Fact[Any]]) -> None:
    got = rounds(facts)
    where = {f.name: i for i, batch in enumerate(got) for f in batch}
    assert sorted(where) == sorted(f.name for f in facts)
    depth: dict[str, int] = {}

    def chain(f: Fact[Any]) -> int:
        if f.name not in depth:
            by_name = {g.name: g for g in facts}
            depth[f.name] = 1 + max((chain(by_name[n]) for n in f.needs), default=0)
        return depth[f.name]

    for f in facts:
        assert all(where[n] < where[f.name] for n in f.needs)
    assert len(got) == max(chain(f) for f in facts)


def test_the_parsers_take_any_command_result() -> None:
    ok = CommandResult(("uname", "-r"), 0, "6.8.12-4-pve\n", "")
    assert first_line(ok) == "6.8.12-4-pve"
    assert first_line(CommandResult(("uname", "-r"), 127, "", "not found")) is None


def test_an_api_read_is_filled_per_node_and_vm_and_refuses_a_hole() -> None:
    from pvefix.facts.api import NODE_PCI, VM_STATUS

    assert VM_STATUS.at("kpro6", 100) == ("/nodes/kpro6/qemu/100/status/current", None)
    assert NODE_PCI.at("kpro6") == ("/nodes/kpro6/hardware/pci", {"pci-class-blacklist": ""})
    with pytest.raises(KeyError, match="missing"):
        VM_STATUS.at("kpro6")
