"""One projection from answers to NodeFacts fields, whatever the read path; the collect
script's copies and the plan's SSH rounds come from the same declarations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pvefix.facts import Command, Fact, rounds
from pvefix.facts.model import Answer, Output
from pvefix.facts.node import NODE_FACTS, collect_copies, facts_for
from pvefix.facts.parse import first_line
from pvefix.facts.project import known_from, node_fields, tree_answers, tree_known

RELEASE: Fact[str | None] = Fact("release", Command(("uname", "-r")), first_line,
                                 "meta:versions.kernel", None, frozenset({"plan"}))
BANNER: Fact[str | None] = Fact(
    "banner", Command(("cat", "/boot/banner-{release}")), first_line, "boot/banner-{release}",
    None, frozenset({"plan", "collect"}), ("release",), field="banner")
FACTS = (RELEASE, BANNER)


class _Meta:
    class versions:  # the shape of HostMeta.versions
        kernel = "6.8.12-4-pve"


def test_a_fact_that_names_another_is_read_with_its_value_and_projected_to_its_field() -> None:
    answers: dict[tuple[str, ...], Answer] = {("uname", "-r"): Answer(0, "6.8.12-4-pve\n"),
                                              ("cat", "/boot/banner-6.8.12-4-pve"):
                                              Answer(0, "hello\n")}

    def answer(f: Fact[Any], k: Mapping[str, str] | None = None) -> Output | None:
        return answers.get(f.argv(k))

    known = known_from(FACTS, answer)
    assert known == {"release": "6.8.12-4-pve"}
    assert node_fields(FACTS, answer, known) == {"banner": "hello"}


def test_an_unknown_need_leaves_the_default() -> None:
    assert node_fields(FACTS, lambda f, k: None, {}) == {"banner": None}


def test_a_tree_answers_from_its_file_at_the_tree_path(tmp_path: Any) -> None:
    files: dict[str, str] = {"/boot/banner-6.8.12-4-pve": "from the tree\n"}
    none: dict[str, str] = {}
    known = tree_known(FACTS, _Meta)
    assert known == {"release": "6.8.12-4-pve"}
    assert node_fields(FACTS, tree_answers(lambda p: files.get(p)), known) == {
        "banner": "from the tree"}
    assert node_fields(FACTS, tree_answers(lambda p: none.get(p)), known) == {"banner": None}


def test_the_collect_script_copies_every_file_fact_with_the_needed_value_read_there() -> None:
    copies = collect_copies()
    cat_paths = [f.read.argv[1] for f in NODE_FACTS if isinstance(f.read, Command)
                 and f.read.argv[0] == "cat" and "collect" in f.used_by]
    assert len(copies) == len(cat_paths) and "/etc/kernel/cmdline" in copies
    for path, copy in zip(cat_paths, copies, strict=True):
        assert "{" not in copy, copy  # every needed value is a command substitution
        assert copy == path or "$(" in copy


def test_a_plan_reads_the_node_in_at_most_two_ssh_rounds() -> None:
    # Round A (with the VM configs) and round B (with the PCI functions' paths): a fact that
    # would need a third round breaks the plan's two-wave budget (DESIGN.md, Budgets).
    assert len(rounds(facts_for("plan"))) <= 2
