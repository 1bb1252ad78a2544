"""Batch fact reads into round trips: a pure function, so the plan's wave budget is tested."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pvefix.facts.model import Fact


def rounds(facts: Sequence[Fact[Any]], known: Iterable[str] = ()) -> list[list[Fact[Any]]]:
    """The facts in rounds: a fact goes out in the first round after every fact it needs
    (those in `known` are there already). Order within a round is the declaration order.
    A need that no fact of `facts` nor `known` gives is an error (a broken declaration)."""
    done = set(known)
    names = {f.name for f in facts} | done
    for fact in facts:
        unknown = [n for n in fact.needs if n not in names]
        if unknown:
            raise ValueError(f"fact {fact.name} needs {', '.join(unknown)}: declared nowhere")
    left = list(facts)
    out: list[list[Fact[Any]]] = []
    while left:
        ready = [f for f in left if all(n in done for n in f.needs)]
        if not ready:
            raise ValueError("facts need each other: " + ", ".join(f.name for f in left))
        out.append(ready)
        done.update(f.name for f in ready)
        left = [f for f in left if f not in ready]
    return out
