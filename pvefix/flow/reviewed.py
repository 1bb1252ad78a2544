"""Reviewed plans across phases: a plan file saved before phase 1 still applies its later
phases, because pvefix recognises its own earlier writes of that plan (docs/apply.md, "A
reviewed plan across phases").

The target moved since the file was made; the move is accepted exactly when it is pvefix's own
applies of this plan's phases, read from the snapshots' journals: starting from the VM digest
the plan observed, each applied snapshot taken from the state the previous one reached, whose
phase is the saved file's phase to the letter (`plan_differences` finds nothing) or its
activation (a phase 2 applied without `--reboot-host`, activated later), and the last one's
recorded state (`apply-end`: VM digest, run state, host file hashes) is the target's now.
Anything else (an admin's edit, a reboot onto another cmdline, a phase rolled back and
changed) is still refused as stale, naming what moved. And `apply FILE --phase 2
--reboot-host` after `apply FILE --phase 2`: what is left of the saved phase is its activation
(`activates_saved_phase`), which applies."""

from __future__ import annotations

from pathlib import Path

from pvefix.executor.console import Console
from pvefix.executor.reached import Reached, last_reached
from pvefix.executor.snapshot import Snapshot, list_snapshots
from pvefix.flow.prepare import plan_differences, stale_reasons
from pvefix.planner.model import Phase, Plan
from pvefix.state import HostState


def own_applies(saved: Plan, state_dir: Path, cluster: str | None,
                number: int) -> tuple[list[Snapshot], Reached | None]:
    """The chain of pvefix's own applies of `saved`'s other phases, oldest first, and the
    state the last one reached (None: no chain)."""
    expect, chain, reached = saved.observed.vm_digest, [], None
    for snap in list_snapshots(state_dir, saved.observed.vmid, cluster):
        meta = snap.meta
        if meta.vm.digest != expect or snap.status() != "applied":
            continue
        if meta.node != saved.observed.node or saved.phase(meta.phase) is None:
            continue
        if not _same_phase(saved, snap, meta.phase):
            continue  # another plan's phase, or this phase planned otherwise
        got = last_reached(snap.records())
        if got is None:
            continue
        chain.append(snap)
        expect, reached = got.digest, got
    return chain, reached


def _same_phase(saved: Plan, snap: Snapshot, number: int) -> bool:
    """The snapshot's apply ran the saved plan's phase `number`: to the letter, or as its
    activation (the phase's host files as the saved plan writes them, then the reboot)."""
    followed = snap.plan()
    if not plan_differences(saved, followed, number):
        return True
    phase = followed.phase(number)
    return phase is not None and phase.activation_only and _activates(
        saved, number, {c.file: snap.file_text(c.file) for c in phase.changes if c.file})


def _activates(saved: Plan, number: int, texts: dict[str, str | None]) -> bool:
    """Are these host file texts exactly what the saved phase `number` writes, a phase that
    a host reboot activates?"""
    phase = saved.phase(number)
    return phase is not None and phase.reboot_activates and bool(texts) and all(
        saved.host_files_after.get(path) == text for path, text in texts.items())


def activates_saved_phase(saved: Plan, fresh: Plan, number: int, live: HostState,
                          state_dir: Path, cluster: str | None, console: Console) -> bool:
    """`apply FILE --phase N --reboot-host` after `apply FILE --phase N` without it: what is
    left of the saved phase is its activation (the fresh phase is activation only, its files
    hold the saved plan's text), and pvefix's own apply of that phase wrote them."""
    phase = fresh.phase(number)
    if phase is None or not phase.activation_only:
        return False
    if not _activates(saved, number, {c.file: live.file(c.file).text for c in phase.changes
                                      if c.file}):
        return False
    chain, _ = own_applies(saved, state_dir, cluster, number)
    wrote = [s for s in chain if s.meta.phase == number and _writes(s.plan().phase(number))]
    if wrote:
        console.progress(f"phase {number} of the saved plan was applied by pvefix"
                         f" ({wrote[-1].id}) and waits for its host reboot: activating it")
    return bool(wrote)


def _writes(phase: Phase | None) -> bool:
    return phase is not None and not phase.activation_only


def rebased(saved: Plan, reached: Reached) -> Plan:
    """The saved plan as if made from the state pvefix's own applies reached."""
    files = {**saved.observed.files, **reached.files}
    observed = saved.observed.model_copy(update={"vm_digest": reached.digest,
                                                 "vm_status": reached.status, "files": files})
    return saved.model_copy(update={"observed": observed})


def stale_after_own_applies(saved: Plan, live: HostState, number: int, stale: list[str],
                            state_dir: Path, cluster: str | None,
                            console: Console) -> list[str]:
    """`stale` (what moved since `saved` was made) less what pvefix's own applies of its
    other phases explain: [] when they explain all of it (said on the console); otherwise
    the reasons, with a line saying what pvefix's own applies left."""
    chain, reached = own_applies(saved, state_dir, cluster, number)
    if reached is None:
        return stale
    phases = ", ".join(f"phase {s.meta.phase} ({s.id})" for s in chain)
    left = stale_reasons(rebased(saved, reached), live, saved.phase(number))
    if not left:
        console.progress(f"the target moved since the plan was made, by pvefix's own apply of"
                         f" this plan's {phases} (its journal): the saved phase {number}"
                         " still applies")
        return []
    return [*left, f"(not pvefix's own: its apply of this plan's {phases} left VM"
                   f" {saved.observed.vmid} at digest {reached.digest[:12]}, {reached.status})"]
