"""The checks apply and rollback make before and after writing: a stale plan, prerequisites
in effect, permissions, verification of the result, and whether the live state has moved in
ways pvefix did not make. Pure functions over HostState, Plan and the journal."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from pvefix.executor.journal import Record
from pvefix.executor.snapshot import Snapshot
from pvefix.paths import PROC_CMDLINE
from pvefix.planner.model import HOST_BOOT_TARGETS, Change, Phase, Plan
from pvefix.state import HostState
from pvefix.vmconfig.config import VMConfig
from pvefix.vmconfig.nextstart import NextStart


def stale_reasons(plan: Plan, live: HostState, phase: Phase | None = None) -> list[str]:
    """What moved since the plan was made that `phase` (or, without one, the whole plan)
    relies on: the VM digest and run state for VM changes, the hash of each file it edits."""
    reasons: list[str] = []
    obs = plan.observed
    if obs.vmid != live.vm.vmid or obs.node != live.vm.node:
        reasons.append(f"the plan is for VM {obs.vmid} on {obs.node}, not VM {live.vm.vmid} on "
                       f"{live.vm.node}")
    changes = phase.changes if phase is not None else [c for p in plan.phases for c in p.changes]
    touches_vm = phase is None or any(c.target not in HOST_BOOT_TARGETS for c in changes)
    files = (
        set(obs.files)
        if phase is None
        else {c.file for c in changes if c.target in HOST_BOOT_TARGETS and c.file}
    )
    if any(c.target == "host-boot" for c in changes):
        files.add(PROC_CMDLINE)  # an activation relies on what is booted too
    if touches_vm and obs.vm_digest != live.vm.digest:
        reasons.append(f"VM {obs.vmid} config digest {obs.vm_digest[:12]} -> "
                       f"{live.vm.digest[:12]}")
    if touches_vm and obs.vm_status != live.vm.status:
        reasons.append(f"VM {obs.vmid} was {obs.vm_status}, is now {live.vm.status}")
    for path, sha in sorted(obs.files.items()):
        now = live.file(path).sha256
        if path in files and path in live.files and now != sha:
            reasons.append(f"{path} sha256 {_short(sha)} -> {_short(now)}")
    for change in changes:
        # The guest's running cmdline is what its change was planned from.
        if change.target == "guest-cmdline" and live.guest is not None and (
            live.guest.cmdline != change.before
        ):
            reasons.append(f"the guest's /proc/cmdline {change.before!r} -> "
                           f"{live.guest.cmdline!r}")
    return reasons


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "(absent)"


def change_in_effect(change: Change, live: HostState) -> bool:
    """Is this (earlier phase's) change really active on the target?"""
    if change.target == "vm-config":
        ns = NextStart.from_text(live.vm.config_text, "live")
        return ns.current.get(change.key) == change.after and not ns.is_staged(change.key)
    if change.target in HOST_BOOT_TARGETS:
        proc = live.file(PROC_CMDLINE).text or ""
        from pvefix.executor.activation import cmdline_problems

        return not cmdline_problems(proc, [(change.before, change.after)])
    return True  # manual and guest steps: pvefix cannot tell; the admin was told


def missing_prerequisites(plan: Plan, phase: Phase, live: HostState) -> list[str]:
    """Changes of other phases this phase requires that are not in effect on the target."""
    here = {c.id for c in phase.changes}
    by_id = {c.id: (p.number, c) for p in plan.phases for c in p.changes}
    missing: list[str] = []
    for change in phase.changes:
        for req in change.requires:
            if req in here or req not in by_id:
                continue  # same phase (ordered), or not planned: already in effect
            number, needed = by_id[req]
            if not change_in_effect(needed, live):
                missing.append(f"{change.id} requires {req} (phase {number}), which is not in "
                               "effect")
    return missing


def root_only(phase: Phase) -> list[Change]:
    return [c for c in phase.changes if c.needs_root_pam and c.target == "vm-config"]


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
        and _sections(ca) == _sections(cb)
    )


def config_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    return "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=before_name, tofile=after_name,
    ))


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
        moved.append(f"{record.path} sha256 {_short(record.sha256)} -> {_short(now)}")
    return moved


# What a change says it will do: the fields apply acts on. Everything else (reason, risk,
# evidence) is words, shown but not executed.
_ACTED_ON = ("target", "key", "before", "after", "file", "refresh_command", "needs_root_pam",
             "commands", "disruption", "requires")


def plan_differences(saved: Plan, fresh: Plan, number: int) -> list[str]:
    """How phase `number` of a saved plan differs from what the planner derives now from the
    live target. A plan file is data: apply runs what it derives, and only if the file says
    the same."""
    old, new = saved.phase(number), fresh.phase(number)
    if new is None:
        return [f"phase {number} is not in the plan derived from the target now"]
    if old is None:
        return [f"phase {number} is not in the saved plan"]
    out: list[str] = []
    old_changes = {c.id: c for c in old.changes}
    new_changes = {c.id: c for c in new.changes}
    for cid in sorted(old_changes.keys() - new_changes.keys()):
        out.append(f"{cid}: in the saved plan, not derived now")
    for cid in sorted(new_changes.keys() - old_changes.keys()):
        out.append(f"{cid}: derived now, not in the saved plan")
    # A change of an earlier phase that is in effect now is planned no more: requiring it
    # is no difference (apply checks the prerequisites in effect anyway).
    planned_now = {c.id for p in fresh.phases for c in p.changes}
    for cid in sorted(old_changes.keys() & new_changes.keys()):
        a, b = old_changes[cid], new_changes[cid]
        a = a.model_copy(update={"requires": [r for r in a.requires if r in planned_now]})
        for name in _ACTED_ON:
            if getattr(a, name) != getattr(b, name):
                out.append(f"{cid}: {name} is {getattr(a, name)!r} in the saved plan,"
                           f" {getattr(b, name)!r} derived now")
    files = {c.file for c in new.changes if c.file and c.target == "host-cmdline"}
    for path in sorted(files):
        if saved.host_files_after.get(path) != fresh.host_files_after.get(path):
            out.append(f"{path}: the saved plan writes other text than derived now")
    # A plan file from before guest file texts has none: nothing it says can differ.
    guest = {c.file for c in new.changes if c.target == "guest-cmdline"}
    for path in sorted(guest & saved.guest_files_after.keys()):
        if saved.guest_files_after[path] != fresh.guest_files_after.get(path):
            out.append(f"guest {path}: the saved plan writes other text than derived now")
    return out
