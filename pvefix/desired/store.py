"""Desired states recorded in the state directory: `STATE_DIR/desired/CLUSTER/VMID.toml`, one
per VM of each cluster (CLUSTER: `cluster-NAME@KEY`, or `node-NAME@KEY` for a standalone host,
pvefix.target.identity), so two clusters' VM 100 never collide, nor two hosts both named
`pve`. Files of earlier versions (`desired/VMID.toml`, `desired/node-NAME/VMID.toml`) are
read once by the first host of that name that asks, and moved under its identity.
An offline read (a bundle) knows the name only: it reads the one host's of that name, and
refuses to guess between two.

`pvefix apply` records the state it reached (`record(state_dir, state)`); `pvefix check`
reads them when no `--desired` file is given.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pydantic

from pvefix.desired.derive import desired_from_state
from pvefix.desired.model import CmdlineRules, DesiredState, NodeDesired, P2PRule, VmDesired
from pvefix.desired.parse import loads_desired
from pvefix.desired.paths import DESIRED_DIR, may_have_recorded
from pvefix.desired.writer import dumps_desired
from pvefix.errors import ParseError, PvefixError, plain_words
from pvefix.state import HostState
from pvefix.store.statedir import ensure_private_dir, read_private_text, write_private
from pvefix.target.identity import SEPARATOR, name_of


def recorded_path(state_dir: Path, vmid: int, cluster: str | None = None) -> Path:
    """Where VM `vmid`'s recorded state is for `cluster` (an identity; see the module doc).
    An older file of the same name is moved under the identity here, once."""
    root = state_dir / DESIRED_DIR
    legacy = root / f"{vmid}.toml"
    if cluster is None:
        return legacy
    keyed = root / cluster / f"{vmid}.toml"
    if keyed.is_file():
        return keyed
    if SEPARATOR not in cluster:  # a name only: the one keyed host of that name, if one
        return _only_host(root, cluster, vmid) or (keyed if not legacy.is_file() else legacy)
    for old in (root / name_of(cluster) / f"{vmid}.toml", legacy):
        if old.is_file():
            ensure_private_dir(keyed.parent)
            old.replace(keyed)  # read once, then kept under the identity
            return keyed
    return keyed


def _only_host(root: Path, name: str, vmid: int) -> Path | None:
    """The file of the one host named `name` that recorded VM `vmid`; an error when two
    hosts of that name did (an offline read cannot tell which one it is)."""
    found = sorted(root.glob(f"{name}{SEPARATOR}*/{vmid}.toml"))
    if len(found) > 1:
        raise PvefixError(
            f"two hosts named {name.split('-', 1)[-1]} recorded VM {vmid} "
            f"({', '.join(p.parent.name for p in found)}): this read cannot tell which one it "
            "is; check it live, or pass --desired FILE", source=str(root))
    return found[0] if found else None


def write_desired(path: Path, desired: DesiredState, header: str | None = None) -> Path:
    """Write a desired-state file (0600, atomically), creating its folder."""
    ensure_private_dir(path.parent)
    write_private(path, dumps_desired(desired, header=header).encode("utf-8"))
    return path


def record(state_dir: Path, state: HostState, *, note: str | None = None,
           cluster: str | None = None, p2p: P2PRule | None = None) -> Path:
    """Record the desired state `state` reached (apply calls this, with the cluster's identity
    and the P2P request it planned with); returns the file's path."""
    desired = desired_from_state(state, p2p)
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    header = (
        f"Desired state of VM {state.vm.vmid} on node {state.vm.node}, recorded {stamp}"
        + (f" ({note})" if note else "")
        + ".\nChecked by `pvefix check " + str(state.vm.vmid) + "`; edit freely (docs/check.md)."
    )
    folder = state_dir / DESIRED_DIR / cluster if cluster else state_dir / DESIRED_DIR
    return write_desired(folder / f"{state.vm.vmid}.toml", desired, header)


def recorded_p2p(state_dir: Path, vmid: int,
                 cluster: Callable[[], str | None]) -> tuple[P2PRule | None, Path | None]:
    """The P2P request of VM `vmid`'s recorded desired state, and its file. `cluster` is asked
    only when some cluster's folder holds a file for this VMID (it may cost an API call)."""
    if not may_have_recorded(state_dir, vmid):
        return None, None
    path = recorded_path(state_dir, vmid, cluster())
    if not path.is_file():
        return None, None
    vm = _load_private(path).vms.get(vmid)
    return (vm.p2p if vm is not None else None), path


def recorded_vmids(state_dir: Path, cluster: str | None = None) -> list[int]:
    """VMs with a recorded state: the cluster's own, and the older ones it may claim."""
    root = state_dir / DESIRED_DIR
    folders = [root]
    if cluster is not None:
        folders += [root / cluster, root / name_of(cluster)]
        if SEPARATOR not in cluster:
            folders += sorted(root.glob(f"{cluster}{SEPARATOR}*"))
    found = {int(p.stem) for folder in folders if folder.is_dir()
             for p in folder.glob("*.toml") if p.stem.isdigit()}
    return sorted(found)


def merge(states: list[tuple[str, DesiredState]]) -> DesiredState:
    """One desired state from several files; a node's rules are the union of the files'."""
    nodes: dict[str, tuple[list[str], list[str]]] = {}
    vms: dict[int, VmDesired] = {}
    for _, state in states:
        vms.update(state.vms)
        for name, node in state.nodes.items():
            required, forbidden = nodes.setdefault(name, ([], []))
            required.extend(p for p in node.cmdline.required if p not in required)
            forbidden.extend(p for p in node.cmdline.forbidden if p not in forbidden)
    try:
        return DesiredState(
            nodes={
                name: NodeDesired(cmdline=CmdlineRules(required=tuple(r), forbidden=tuple(f)))
                for name, (r, f) in nodes.items()
            },
            vms=vms,
        )
    except pydantic.ValidationError as exc:
        problem = plain_words(exc.errors(include_url=False, include_input=False)[0])
        where = ", ".join(source for source, _ in states)
        raise ParseError(f"the files contradict each other: {problem}", source=where) from None


def load_recorded(state_dir: Path, vmids: list[int] | None = None,
                  cluster: str | None = None) -> DesiredState:
    """The recorded desired states of `vmids` (all recorded ones when None) of `cluster`.

    A named VM without a recorded state is an error that says how to make one.
    """
    wanted = recorded_vmids(state_dir, cluster) if vmids is None else vmids
    loaded: list[tuple[str, DesiredState]] = []
    for vmid in wanted:
        path = recorded_path(state_dir, vmid, cluster)
        if not path.is_file():
            raise PvefixError(
                f"no desired state recorded for VM {vmid} (run `pvefix apply`, or write one "
                f"with `pvefix desired {vmid} -o {path}`, or pass --desired FILE)",
                source=str(path),
            )
        loaded.append((str(path), _load_private(path)))
    return merge(loaded)


def _load_private(path: Path) -> DesiredState:
    """A recorded desired state: a file of the state dir, never read through a symlink."""
    try:
        text = read_private_text(path)
    except UnicodeDecodeError as exc:
        raise PvefixError(f"not UTF-8 (byte {exc.start})", source=str(path)) from None
    return loads_desired(text, str(path))
