"""`--p2p/--no-p2p` and `--clique-map`: ask the planner for the P2P clique phase (phase 3).

    @p2p_options
    def plan(vmid: int, *, p2p: P2PAsk) -> int:
        options = plan_options(p2p, opts, vmid)

The flags are one of three places the request comes from; `resolve_plan_options` takes each
setting from the first that gives it: the flag, else the VM's recorded desired state
(`[vms.VMID.p2p]`), else the connection profile (`p2p`, `clique_map`). Without any of them the
planner only reports whether the VM is eligible and how to ask.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pvefix.commands.optgroup import P2P, option_group, unset

if TYPE_CHECKING:
    from pvefix.commands.options import ConnectionOptions
    from pvefix.desired import P2PRule
    from pvefix.planner.model import PlanOptions
    from pvefix.target.settings import PlanDefaults

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class P2PAsk:
    """The P2P flags as given on the command line (None: not given)."""

    p2p: bool | None = None
    clique_map: str | None = None


def build_ask(p2p: bool | None = None, clique_map: str | None = None) -> P2PAsk:
    from pvefix.errors import PvefixError
    from pvefix.planner.rules.p2p import parse_clique_map

    if clique_map is not None and p2p is False:
        raise PvefixError("--clique-map with --no-p2p: the map says which GPUs share a P2P"
                          " clique, so it needs P2P on")
    parse_clique_map(clique_map or "")  # refused here, before anything is read
    return P2PAsk(p2p=p2p, clique_map=clique_map)


def resolve_plan_options(ask: P2PAsk, *, desired: P2PRule | None = None,
                         desired_file: Path | None = None,
                         profile: PlanDefaults | None = None) -> PlanOptions:
    """Each setting from the first place that gives it: flag > desired state > profile."""
    from pvefix.errors import PvefixError
    from pvefix.planner.model import PlanOptions
    from pvefix.planner.rules.p2p import parse_clique_map

    p2p_layers: list[tuple[bool | None, str]] = [
        (ask.p2p, "flag --p2p" if ask.p2p else "flag --no-p2p")]
    map_layers: list[tuple[str | None, str]] = [(ask.clique_map, "flag --clique-map")]
    if desired is not None:
        where = f"desired state {desired_file}" if desired_file else "desired state"
        p2p_layers.append((desired.wanted, where))
        map_layers.append((desired.clique_map, where))
    if profile is not None and profile.profile is not None:
        where = f"profile {profile.profile} ({profile.source})"
        p2p_layers.append((profile.p2p, where))
        map_layers.append((profile.clique_map, where))
    p2p, p2p_from = next(((v, w) for v, w in p2p_layers if v is not None), (False, None))
    text, map_from = next(((v, w) for v, w in map_layers if v is not None), (None, None))
    if not p2p:
        if ask.clique_map is not None:
            raise PvefixError(f"--clique-map needs --p2p (P2P is off: {p2p_from or 'not asked'})")
        text = map_from = None
    return PlanOptions(p2p=p2p, clique_map=parse_clique_map(text or ""), p2p_from=p2p_from,
                       clique_map_from=map_from)


def plan_options(ask: P2PAsk, opts: ConnectionOptions, vmid: int,
                 state_dir: Path | None = None) -> PlanOptions:
    """The PlanOptions for VM `vmid`: the flags, its recorded desired state (in `state_dir`,
    the cluster's folder) and the connection profile (not read for a bundle unless --profile
    names one)."""
    from pvefix.desired.paths import may_have_recorded
    from pvefix.store.statedir import open_state_dir

    folder = open_state_dir(state_dir)
    rule, path = None, None
    if may_have_recorded(folder, vmid):  # the desired-state machinery only when it is needed
        from pvefix.commands.check_cmd import _cluster
        from pvefix.desired.store import recorded_p2p

        rule, path = recorded_p2p(folder, vmid, lambda: _cluster(opts))
    profile = None
    if opts.bundle is None or opts.profile is not None:
        from pvefix.target.settings import plan_defaults

        profile = plan_defaults(opts.config, opts.profile)
    return resolve_plan_options(ask, desired=rule, desired_file=path, profile=profile)


_OPTIONS: dict[str, tuple[str, Any, Any]] = {
    "p2p": ("p2p_phase", bool | None, unset(
        "--p2p/--no-p2p", "Plan the P2P phase 3 (root@pam's `args`; docs/p2p.md) or not"
        " (default: the desired state's, the profile's, off).")),
    "clique_map": ("clique_map", str | None, unset(
        "--clique-map", "Cliques, e.g. hostpci0=0,hostpci1=0 (named: compute GPUs;"
        " default: desired state, profile, host).")),
}


def p2p_options(func: F) -> F:
    """Add --p2p/--no-p2p/--clique-map to a typer command that takes `p2p: P2PAsk`."""
    return option_group("p2p", build_ask, _OPTIONS, P2P)(func)
