"""The unmodelled inputs a VM config holds, read from its values alone (pure).

Every key (its numbered family), `hostpciN` sub-option and `args` word of the config is looked up
in the registry; an unmodelled one (or one the registry does not know) whose value can change a
claim is a `Gap`. The planner (pvefix.planner.closed) adds what only its context knows (an args
-cpu it cannot read, vGPU BARs) and drops what rests on a gap; `check` (pvefix.check.compare)
reports the "ok" verdicts resting on one as not established. Per-value results are cached: a
check reads every VM of a cluster, and their hostpci and args values repeat.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache

from pvefix.closedworld.args_words import classify, options
from pvefix.closedworld.config_keys import family, touched
from pvefix.closedworld.model import Claim, Input
from pvefix.closedworld.registry import lookup
from pvefix.errors import PvefixError
from pvefix.vmconfig.args import qemu_words
from pvefix.vmconfig.hostpci import HOSTPCI_KEY
from pvefix.vmconfig.propstring import PropertyString

#: What a key qemu-server's schema (as pvefix knows it) does not hold touches: every claim a
#: start can change.
ALL_START: tuple[Claim, ...] = ("start", "machine", "bar-space", "p2p", "iommu-groups")


@dataclass(frozen=True)
class Gap:
    """One input of this VM pvefix does not model, and where it was found."""

    item: Input
    where: str


def config_gaps(values: Mapping[str, str]) -> list[Gap]:
    """Every unmodelled input the config holds that can change a claim."""
    out = _key_gaps(values) + list(_machine_gaps(values.get("machine")))
    for key, value in sorted(values.items()):
        if HOSTPCI_KEY.match(key):
            out += _hostpci_gaps(key, value)
    return [*out, *_args_gaps(values.get("args"))]


def _key_gaps(values: Mapping[str, str]) -> list[Gap]:
    out: list[Gap] = []
    for key, value in sorted(values.items()):
        entry = _key_input(key)
        if entry is None:
            continue
        item, by_value = entry
        if by_value:
            claims = touched(item, value, values)
            if not claims:
                continue
            item = replace(item, claims=claims)
        out.append(Gap(item, f"{key}: {value}"))
    return out


@lru_cache(maxsize=4096)
def _key_input(key: str) -> tuple[Input, bool] | None:
    """What a config key is to the closed world, whatever its value: None where it is modelled
    or inert (no gap); else the input and whether its value decides the claims it touches (a
    registered unmodelled key) or not (a key the registry does not know: every start claim)."""
    item = lookup("config-key", family(key))
    if item is None:
        return Input("config-key", key, "unmodelled", ALL_START,
                     "a key qemu-server's schema as pvefix knows it does not hold"), False
    return (item, True) if item.status == "unmodelled" else None


@lru_cache(maxsize=1024)
def _machine_gaps(machine: str | None) -> tuple[Gap, ...]:
    """Sub-options of a modelled `machine` that are not modelled (`viommu=`)."""
    item = lookup("config-key", "machine:viommu")
    parts = [p.strip() for p in (machine or "").split(",")]
    if item is None or not any(p.startswith("viommu=") for p in parts):
        return ()
    return (Gap(item, f"machine: {machine}"),)


@lru_cache(maxsize=4096)
def _hostpci_gaps(key: str, value: str) -> tuple[Gap, ...]:
    try:
        props = dict(PropertyString.parse(value, default_key="host").items())
    except PvefixError:
        return ()  # the planner's vm-state rule reports an entry it cannot read
    out = []
    for name, option in sorted(props.items()):
        item = lookup("hostpci-option", name)
        if item is None or item.status != "unmodelled":
            continue
        if name == "driver" and option == "vfio":
            continue
        out.append(Gap(item, f"{key}: {value}"))
    return tuple(out)


@lru_cache(maxsize=1024)
def _args_gaps(args: str | None) -> tuple[Gap, ...]:
    out = [Gap(classify(o), f"args: {args}") for o in options(qemu_words(args))]
    return tuple(g for g in out if g.item.status == "unmodelled")
