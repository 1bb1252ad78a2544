"""`--p2p` and `--clique-map`: ask the planner for the P2P clique phase (phase 3).

    @p2p_options
    def plan(vmid: int, *, p2p: PlanOptions) -> int: ...

Without `--p2p` the planner only reports whether the VM is eligible and how to ask.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from pvefix.commands.optgroup import option_group

if TYPE_CHECKING:
    from pvefix.planner.model import PlanOptions

F = TypeVar("F", bound=Callable[..., Any])


def build_plan_options(p2p: bool | None = None, clique_map: str | None = None) -> PlanOptions:
    from pvefix.errors import PvefixError
    from pvefix.planner.model import PlanOptions
    from pvefix.planner.rules.p2p import parse_clique_map

    if clique_map and not p2p:
        raise PvefixError("--clique-map needs --p2p (it says which GPUs share a P2P clique)")
    return PlanOptions(p2p=bool(p2p), clique_map=parse_clique_map(clique_map or ""))


_OPTIONS: dict[str, tuple[str, Any, Any]] = {
    "p2p": ("p2p_phase", bool | None, typer.Option(
        None, "--p2p", help="Also plan the P2P phase (phase 3): the guards (hidden=1, x-vga=1 on"
        " compute GPUs, multi-function split) and `args: -set device.hostpciN."
        "x-nv-gpudirect-clique=C` (root@pam only). See docs/p2p.md.", show_default=False)),
    "clique_map": ("clique_map", str | None, typer.Option(
        None, "--clique-map", help="With --p2p: the cliques yourself, e.g. "
        "hostpci0=0,hostpci1=0,hostpci2=1 (entries left out get no clique; an entry named here"
        " is a compute GPU, so x-vga=1 is removed from it).", show_default=False)),
}


def p2p_options(func: F) -> F:
    """Add --p2p/--clique-map to a typer command that takes `p2p: PlanOptions`."""
    return option_group("p2p", build_plan_options, _OPTIONS)(func)
