"""Every classified input, from each kind's module: the one list the planner, the tests and
docs/why-each-change.md read."""

from __future__ import annotations

from functools import lru_cache

from pvefix.closedworld import args_words, config_keys, kernel_params, vendors, vm_states
from pvefix.closedworld.model import Input, InputKind

REGISTRY: tuple[Input, ...] = (
    *config_keys.INPUTS,
    *args_words.INPUTS,
    *vm_states.INPUTS,
    *kernel_params.INPUTS,
    *vendors.INPUTS,
)


def inputs_of(kind: InputKind) -> tuple[Input, ...]:
    """The classified inputs of one kind, in registry order."""
    return tuple(i for i in REGISTRY if i.kind == kind)


@lru_cache(maxsize=4096)  # check asks for every key of every VM of a cluster
def lookup(kind: InputKind, name: str) -> Input | None:
    """The classification of one input, or None when it is not classified (an unknown input:
    callers treat it as unmodelled)."""
    return next((i for i in REGISTRY if i.kind == kind and i.name == name), None)
