"""The registry's node facts gathered over one Node (SSH or --local): its rounds, each as one
batch (`Node.run_many`), then the same projection every read path uses. The reads the first
round's answers call for (the GRUB drop-ins it listed) go with the next round, or in one more
batch when there is none."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pvefix.facts.model import Fact, User
from pvefix.facts.node import facts_for, follow_ups
from pvefix.facts.project import known_from, node_fields
from pvefix.facts.rounds import rounds
from pvefix.target.result import CommandResult

Results = dict[tuple[str, ...], CommandResult]


class Batch(Protocol):
    """What gathering needs of a node (pvefix.target.node.Node is one)."""

    def run_many(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]: ...


def gather(node: Batch, user: User = "plan") -> tuple[dict[str, Any], Results]:
    """`user`'s node facts read over `node`, round by round: the NodeFacts fields of the
    facts that have one, and every command's result by argument list (for the readers that
    build the rest by hand)."""
    facts = facts_for(user)
    planned = rounds(facts)
    results: Results = {}
    known: dict[str, str] = {}
    extra: list[tuple[str, ...]] = []
    step = 0
    while step < len(planned) or extra:
        batch = planned[step] if step < len(planned) else []
        asked = [f.argv(known) for f in batch if all(n in known for n in f.needs)] + extra
        for result in node.run_many(asked) if asked else []:
            results[result.argv] = result
        known = known_from(facts, lambda f: results.get(f.argv()) if not f.needs else None)
        extra = [a for a in follow_ups(facts, results.get) if a not in results] \
            if step == 0 else []
        step += 1

    def answer(fact: Fact[Any], values: Mapping[str, str]) -> CommandResult | None:
        return results.get(fact.argv(values))

    return node_fields(facts, answer, known), results
