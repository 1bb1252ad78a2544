"""From answers to the fields a reader fills: the same projection for every read path.

A reader hands in how it answers a fact (the live reader: its SSH results by argv; the tree
reader: the tree's files and pvefix-host.json); the facts with a `field` become NodeFacts
updates here, so a new host fact reaches every read path without a reader's edit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pvefix.facts.model import Answer, Command, Fact, Output

META = "meta:"
# How a reader answers one fact, given the values of the facts it needs.
Answers = Callable[[Fact[Any], Mapping[str, str]], Output | None]


def node_fields(facts: Iterable[Fact[Any]], answer: Answers,
                known: Mapping[str, str]) -> dict[str, Any]:
    """{field: value} for every fact with a field: parsed from its answer, or its default
    when a fact it needs is unknown (not read)."""
    out: dict[str, Any] = {}
    for fact in facts:
        if fact.field is None:
            continue
        if any(n not in known for n in fact.needs):
            out[fact.field] = fact.default
        else:
            out[fact.field] = fact.parse(answer(fact, known))
    return out


def needed(facts: Iterable[Fact[Any]]) -> set[str]:
    """The names of the facts another fact's command or tree path names."""
    return {n for f in facts for n in f.needs}


def known_from(facts: Iterable[Fact[Any]], answer: Callable[[Fact[Any]], Output | None]
               ) -> dict[str, str]:
    """The values later rounds need, parsed from the first round's answers (text only)."""
    facts = list(facts)
    wanted = needed(facts)
    out: dict[str, str] = {}
    for fact in facts:
        if fact.name in wanted:
            value = fact.parse(answer(fact))
            if isinstance(value, str) and value:
                out[fact.name] = value
    return out


def meta_value(meta: Any, key: str) -> Any:
    """`meta:versions.kernel` of a tree's metadata (attribute by attribute)."""
    value = meta
    for part in key.removeprefix(META).split("."):
        value = getattr(value, part, None)
    return value


GLOB = frozenset("*?[")


def tree_answer(fact: Fact[Any], known: Mapping[str, str], read_text: Callable[[str], str | None],
                listing: Callable[[str], list[str]] | None = None, meta: Any = None
                ) -> Output | None:
    """How a host tree answers `fact`'s command, by the fact's declaration alone: the text of
    its tree path (`read_text`: a host path's text, None when absent), the files a glob
    path matches (`listing`: host paths, sorted), or `shown` of its `meta:` key. None: the
    tree cannot say (a `meta:` key without `shown`, or no `listing` / `meta` given)."""
    if not isinstance(fact.read, Command):
        return None
    if fact.tree.startswith(META):
        if fact.shown is None or meta is None:
            return None
        return fact.shown(meta_value(meta, fact.tree))
    path = "/" + fact.tree_path(known).lstrip("/")
    if GLOB & set(path):
        if listing is None:
            return None
        return Answer(0, "".join(p + "\n" for p in listing(path)))
    return Answer.of_file(read_text(path))


def tree_answers(read_text: Callable[[str], str | None]) -> Answers:
    """How a host tree answers a fact kept as a file: `cat` of its tree path (the same
    answer the simulator gives over SSH, which answers through `tree_answer` too)."""

    def answer(fact: Fact[Any], known: Mapping[str, str]) -> Output | None:
        return tree_answer(fact, known, read_text)

    return answer


def tree_known(facts: Iterable[Fact[Any]], meta: Any) -> dict[str, str]:
    """The needed facts' values as a tree's metadata keeps them."""
    facts = list(facts)
    wanted = needed(facts)
    out: dict[str, str] = {}
    for fact in facts:
        if fact.name in wanted and fact.tree.startswith(META):
            value = meta_value(meta, fact.tree)
            if isinstance(value, str) and value:
                out[fact.name] = value
    return out
