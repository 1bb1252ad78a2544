"""The fact registry: every node fact pvefix reads, declared once (floor 1, pure).

A `Fact` says how a fact is read (a command's argv on the node, or an API path), how its
answer is parsed, where a host tree keeps it, its default when it cannot be read, and which
commands need it. The live reader, `check`'s cluster read, the collect script and the bundle
reader take their lists from here (`pvefix.facts.node`); `pvefix.facts.rounds` batches the
reads into round trips, a pure function. No I/O: tests/architecture says so.
"""

from __future__ import annotations

from pvefix.facts.model import Api, Command, Fact, Output
from pvefix.facts.rounds import rounds

__all__ = ["Api", "Command", "Fact", "Output", "rounds"]
