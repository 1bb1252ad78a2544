"""The checks apply and rollback make after writing and before restoring: verification of the
result, and whether the live state has moved in ways pvefix did not make. Pure functions over
HostState, Plan and the journal. (The refusals before anything is written are the prepare
stage's: pvefix.flow.prepare.)"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from pvefix.digest import short_sha
from pvefix.executor.journal import Record
from pvefix.executor.snapshot import Snapshot
from pvefix.planner.model import Phase, Plan
from pvefix.state import HostState
from pvefix.vmconfig.config import VMConfig
from pvefix.vmconfig.nextstart import NextStart


def verify_live(phase: Phase, plan: Plan, live: HostState, *, restarted: bool) -> list[str]:
    """Re-read target against what the plan expects after this phase."""
    problems: list[str] = []
    ns = NextStart.from_text(live.vm.config_text, "live")
    for change in phase.changes:
        if change.target == "vm-config":
            if ns.value(change.key) != change.after:
                problems.append(f"VM {live.vm.vmid} {change.key} is "
                                f"{ns.value(change.key)!r}, expected {change.after!r}")
            elif restarted and ns.current.get(change.key) != change.after:
                problems.append(f"VM {live.vm.vmid} {change.key} still waits in [PENDING]")
        elif change.target == "host-cmdline" and change.file:
            want = plan.host_files_after.get(change.file)
            if live.file(change.file).text != want:
                problems.append(f"{change.file} does not hold the planned text")
    return problems


def _sections(cfg: VMConfig) -> dict[str, dict[str, str]]:
    out = {name: sec.as_dict() for name, sec in cfg.snapshots.items()}
    out.update({name: sec.as_dict() for name, sec in cfg.specials.items()})
    return out


def same_content(a: str, b: str) -> bool:
    """Two config texts that hold the same values (they may differ in order or form)."""
    ca, cb = VMConfig.parse(a, "a"), VMConfig.parse(b, "b")
    ns, nxt = NextStart.from_config(ca), NextStart.from_config(cb)
    return (
        ns.current == nxt.current
        and ns.values == nxt.values
        and ns.has_pending == nxt.has_pending
        and _sections(ca) == _sections(cb))


def config_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    return "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=before_name, tofile=after_name))


def written_by_apply(records: Iterable[Record]) -> tuple[dict[str, set[str | None]],
                                                         dict[str, set[str | None]]]:
    """From the journal: VM keys and the values pvefix may have left them with, and host
    files and the hashes pvefix may have left them with (every step that began counts)."""
    keys: dict[str, set[str | None]] = {}
    files: dict[str, set[str | None]] = {}
    for record in records:
        if record.get("event") != "step-begin":
            continue
        # One key per step, or every key of a phase in one write (no SSH).
        batch = record.get("kind") == "vm-config-batch"
        for change in record.get("changes", []) if batch else [record]:
            if change.get("kind") == "vm-config":
                keys.setdefault(str(change["key"]), set()).update({change.get("before"),
                                                                   change.get("after")})
        if record.get("kind") == "host-file":
            files.setdefault(str(record["path"]), set()).update(
                {record.get("sha_before"), record.get("sha_after")})
    return keys, files


def moved_since(snapshot: Snapshot, live: HostState) -> list[str]:
    """What differs from the snapshot and was not written by the apply it belongs to."""
    keys, files = written_by_apply(snapshot.records())
    moved: list[str] = []
    snap_cfg = VMConfig.parse(snapshot.vm_config_text(), "snapshot")
    live_cfg = VMConfig.parse(live.vm.config_text, "live")
    old = NextStart.from_config(snap_cfg).values
    new = NextStart.from_config(live_cfg).values
    for key in sorted(set(old) | set(new)):
        if old.get(key) == new.get(key) or key == "description":  # said below, not as a value
            continue
        if key in keys and new.get(key) in keys[key]:
            continue
        moved.append(f"VM {live.vm.vmid} {key}: {old.get(key)!r} -> {new.get(key)!r}")
    if snap_cfg.description != live_cfg.description:
        moved.append(f"VM {live.vm.vmid} description changed")
    if _sections(snap_cfg) != _sections(live_cfg):
        moved.append(f"VM {live.vm.vmid} snapshots or special sections changed")
    for record in snapshot.meta.files if live.host_files_read else []:
        if not record.restorable or record.path not in live.files:
            continue
        now = live.file(record.path).sha256
        if now == record.sha256:
            continue
        if record.path in files and now in files[record.path]:
            continue
        moved.append(f"{record.path} sha256 {short_sha(record.sha256)} -> {short_sha(now)}")
    return moved


# What a change says it will do: the fields apply acts on. Everything else (reason, risk,
# evidence) is words, shown but not executed.
