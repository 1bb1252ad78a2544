"""The registry's node facts gathered over one Node (SSH or --local): the one batching of a
node's reads into rounds, for every reader (`check --all` across the cluster, sources/
cluster.py; a plan's live and --local read, sources/node_read.py). Each round is one batch
(`Node.run_many`): the registry's facts of that round (`facts.rounds`), the reads the first
round's answers call for (the GRUB drop-ins it listed) with the next, and what the reader adds
to a round (`Extra`: a plan's VM configs with the first, the PCI functions' paths with the
second); then the same projection every read path uses."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pvefix.facts.model import Fact, User
from pvefix.facts.node import facts_for, follow_ups
from pvefix.facts.project import known_from, node_fields
from pvefix.facts.rounds import rounds
from pvefix.target.result import CommandResult

Results = dict[tuple[str, ...], CommandResult]
# The reader's own commands for round `step` (0 first), given the answers so far.
Extra = Callable[[int, Results], Sequence[tuple[str, ...]]]


class Batch(Protocol):
    """What gathering needs of a node (pvefix.target.node.Node is one)."""

    def run_many(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]: ...


def gather(node: Batch, user: User = "plan", extra: Extra | None = None
           ) -> tuple[dict[str, Any], Results]:
    """`user`'s node facts read over `node`, round by round (with `extra`'s commands): the
    NodeFacts fields of the facts that have one, and every command's result by argument
    list (for the readers that build the rest by hand). A command is sent once."""
    facts = facts_for(user)
    planned = rounds(facts)
    results: Results = {}
    known: dict[str, str] = {}
    follow: list[tuple[str, ...]] = []
    step = 0
    while True:
        batch = planned[step] if step < len(planned) else []
        asked = [f.argv(known) for f in batch if all(n in known for n in f.needs)] + follow
        asked += [tuple(c) for c in (extra(step, results) if extra is not None else [])]
        asked = [a for a in dict.fromkeys(asked) if a not in results]
        if not asked and step >= len(planned):
            break
        for result in node.run_many(asked) if asked else []:
            results[result.argv] = result
        known = known_from(facts, lambda f: results.get(f.argv()) if not f.needs else None)
        follow = follow_ups(facts, results.get) if step == 0 else []
        step += 1

    def answer(fact: Fact[Any], values: Mapping[str, str]) -> CommandResult | None:
        return results.get(fact.argv(values))

    return node_fields(facts, answer, known), results
