"""The prepare stage of `pvefix apply`: every refusal that needs only the plan, the target as
read and what the command line asks, before anything is written. Pure, like the planner: it
imports no package that does I/O (tests/architecture checks it), so each refusal is a fast test.

A stale plan (or, with --replan, a fresh one), a saved plan that differs from what the planner
derives now, an empty plan, a missing phase, a prerequisite phase not in effect, a root@pam-only
change this connection cannot make, a locked VM, host files without SSH, a guest change without
a way into the guest, a host reboot of the host pvefix runs on. What it returns (`Prepared`) is
what the later stages use: the plan, the phase, how VM keys are written, what activation does.
The refusals that need the node (HA, privileges, neighbours) and the rehearsal stay in the flow
(pvefix.flow.apply), after this stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pvefix.cmdline.running import cmdline_problems
from pvefix.digest import short_sha
from pvefix.errors import PvefixError, RefusedError
from pvefix.hints import Context, next_line, next_phase
from pvefix.paths import GRUB_DEFAULT, PROC_CMDLINE
from pvefix.planner import plan as make_plan
from pvefix.planner.model import (
    HOST_BOOT_TARGETS,
    MAX_PHASE,
    Change,
    Phase,
    Plan,
    PlanOptions,
)
from pvefix.planner.rules.p2p import PHASE as P2P_PHASE
from pvefix.state import HostState
from pvefix.vmconfig.nextstart import NextStart
from pvefix.vmconfig.qmset import qm_set_command


class NothingToDo(PvefixError):
    """The phase asked for has nothing left to do (applied, or never needed): exit 0."""

    exit_code = 0


@dataclass(frozen=True)
class Asked:
    """What the command line asks that the refusals depend on (from ApplyOptions)."""

    phase: int
    replan: bool = False
    qm_set: bool = False
    restart: bool = False
    start: bool = False
    reboot_host: bool = False
    pve_snapshot: bool = False
    plan_options: PlanOptions = field(default_factory=PlanOptions)
    guest: bool = False  # a way into the guest was given
    on_this_host: bool = False  # --local: pvefix runs on the node it changes
    context: Context = field(default_factory=Context)  # what printed commands carry

    def keep_plan_file(self, keep_file: bool) -> Asked:
        """These asks, the printed commands naming the plan file only if `keep_file`."""
        return self if keep_file else replace(
            self, context=self.context._replace(plan_file=None))


@dataclass(frozen=True)
class Reviewed:
    """How a saved plan's later phase is told from a stale one: pvefix's own earlier applies of
    that plan (their journals: pvefix.flow.reviewed, which the flow hands in, so this stage
    stays pure). `explain_stale(saved, live, number, stale)` returns what pvefix's own applies
    do not explain; `activates(saved, fresh, number, live)` says whether what is left of the
    saved phase is its activation, after pvefix's own apply of it without --reboot-host."""

    explain_stale: Callable[[Plan, HostState, int, list[str]], list[str]]
    activates: Callable[[Plan, Plan, int, HostState], bool]


@dataclass(frozen=True)
class Prepared:
    """What the prepare stage decided: the plan derived now, its phase, whether VM keys go
    through `qm set` over SSH, and what activation will do."""

    plan: Plan
    phase: Phase
    use_qm: bool
    reboots: bool  # --reboot-host, and the phase changes the host cmdline
    starts: bool  # the VM is (re)started: --start, or --restart of a running VM's config
    context: Context = field(default_factory=Context)  # no plan file once replanned


def prepare(live: HostState, saved: Plan | None, asked: Asked,
            say: Callable[[str], None], reviewed: Reviewed | None = None) -> Prepared:
    """Refuse what cannot be applied, before anything is written; `saved`: the plan file, if
    any (data, never authority: the phase applied is derived here from `live`)."""
    plan, phase, replanned = _plan_now(live, saved, asked, say, reviewed)
    vmid = live.vm.vmid
    missing = missing_prerequisites(plan, phase, live)
    if missing:
        raise RefusedError(
            "a prerequisite phase is not in effect:\n  " + "\n  ".join(missing)
            + "\napply (and activate) the earlier phase first; nothing was written",
            source=f"VM {vmid}")
    use_qm = _refuse_root_only(phase, live, asked)
    if live.vm.lock:
        raise RefusedError(f"VM {vmid} is locked ({live.vm.lock}); nothing was written")
    if (asked.restart or asked.start or asked.pve_snapshot) and is_template_vm(live.vm.config_text):
        raise RefusedError(
            f"VM {vmid} is a template: Proxmox never starts nor snapshots a template"
            " (qemu-server vm_start, AbstractConfig.pm), so --restart/--start/--pve-snapshot"
            " cannot be done; nothing was written. Apply without them: the config change"
            " reaches the clones made from it afterwards.",
            source=f"VM {vmid}")
    refuse_activation_without_reboot(phase, asked.reboot_host, vmid, asked.context)
    wants_host = phase.reboot_activates
    if wants_host and not live.access.ssh:
        raise RefusedError("this phase changes host files, which needs SSH to the node")
    _refuse_guest_without_access(phase, live, asked.guest)
    reboots = asked.reboot_host and wants_host
    starts = asked.start or (asked.restart and live.vm.status == "running" and any(
        c.target == "vm-config" for c in phase.changes))
    if reboots and asked.on_this_host:
        raise RefusedError(
            "--reboot-host with --local would reboot the host pvefix runs on, in the middle of"
            " its own run; nothing was written. Apply without --reboot-host, reboot the node"
            " yourself, then check it: " + asked.context.command(
                ["check", str(vmid), *(["--local"] if "--local" not in asked.context.target
                                       else [])], guest=False),
            source=f"node {live.vm.node}")
    context = asked.context._replace(plan_file=None) if replanned else asked.context
    return Prepared(plan=plan, phase=phase, use_qm=use_qm, reboots=reboots, starts=starts,
                    context=context)


def is_template_vm(config_text: str) -> bool:
    """Whether a VM config (its main section) is a template (`template: 1`)."""
    from pvefix.closedworld.vm_states import is_template
    from pvefix.vmconfig import VMConfig

    return is_template(VMConfig.parse(config_text).main.get("template"))


def refuse_activation_without_reboot(phase: Phase, reboot_host: bool, vmid: int,
                                     context: Context = Context()) -> None:
    """A phase that only activates what is configured (host-boot: the host cmdline is right in
    its file, not yet booted) writes nothing; without --reboot-host it would do nothing."""
    if not phase.activation_only or reboot_host:
        return
    names = ", ".join(c.file or c.key for c in phase.changes)
    raise PvefixError(
        f"phase {phase.number} has nothing to write: {names} is configured, not yet booted;"
        " a host reboot activates it: " + context.command(
            ["apply", str(vmid), "--phase", str(phase.number), "--reboot-host"])
        + " (the same checks of the node's other VMs apply); nothing was written",
        source=f"VM {vmid}")


def _plan_now(live: HostState, saved: Plan | None, asked: Asked,
              say: Callable[[str], None],
              reviewed: Reviewed | None) -> tuple[Plan, Phase, bool]:
    """The plan derived from `live` (with the saved plan's options, when given), its phase
    asked for, and whether a stale saved plan was dropped (--replan); after the saved plan was
    refused if stale (or dropped) or different. A phase the plan derived now lacks is nothing
    to do (or an error)."""
    vmid = live.vm.vmid
    fresh = make_plan(live, saved.options if saved is not None else asked.plan_options)
    phase = fresh.phase(asked.phase)
    if phase is None:
        raise no_phase(fresh, saved, live, asked.keep_plan_file(
            _file_applies_next(fresh, saved, live, reviewed)))
    plan = saved
    if plan is not None:
        stale = stale_reasons(plan, live, plan.phase(asked.phase))
        if stale and reviewed is not None:
            stale = reviewed.explain_stale(plan, live, asked.phase, stale)
        if stale and not asked.replan:
            raise RefusedError(
                "the plan is stale: the target changed since it was made:\n  "
                + "\n  ".join(stale)
                + "\nnothing was written; re-run with --replan to plan afresh (and review it)",
                source=f"VM {vmid}")
        if stale:
            say("the plan was stale (" + "; ".join(stale) + "): planning afresh")
            plan = None
    saved_phase = plan.phase(asked.phase) if plan is not None else None
    if saved_phase is not None:
        # A guest change needs the way into the guest it was planned with: say that first.
        _refuse_guest_without_access(saved_phase, live, asked.guest)
    if plan is not None:
        # A plan file is data, never authority: what runs is derived here from the live
        # target, and the file must say exactly that.
        differs = plan_differences(plan, fresh, asked.phase)
        if differs and reviewed is not None and reviewed.activates(plan, fresh, asked.phase,
                                                                   live):
            differs = []
        if differs:
            raise RefusedError(
                "the saved plan does not match what pvefix derives from the target now:\n  "
                + "\n  ".join(differs)
                + "\nnothing was written; plan again (pvefix plan) and review it",
                source=f"VM {vmid}")
    return fresh, phase, saved is not None and plan is None


def _file_applies_next(fresh: Plan, saved: Plan | None, live: HostState,
                       reviewed: Reviewed | None) -> bool:
    """Would the saved plan file apply the next phase left (neither stale, after pvefix's own
    applies of it, nor different from what is derived now)? Then `Next:` names the file."""
    number = next_phase(fresh, 0)
    if saved is None or number is None or saved.phase(number) is None:
        return False
    stale = stale_reasons(saved, live, saved.phase(number))
    if stale and reviewed is not None:
        stale = reviewed.explain_stale(saved, live, number, stale)
    return not stale and not plan_differences(saved, fresh, number)


def no_phase(fresh: Plan, saved: Plan | None, live: HostState, asked: Asked) -> PvefixError:
    """Phase N is not in the plan derived from the target now. For a phase such a plan can
    have (and the saved plan has), that is nothing left to do: applied, by pvefix or by hand,
    or never needed; exit 0 with "phase N: nothing to do", as a re-run must be safe. A phase
    no such plan has (7, or the P2P phase without --p2p) is an error."""
    number, vmid = asked.phase, live.vm.vmid
    have = ", ".join(str(p.number) for p in fresh.phases) or "none"
    if saved is not None and saved.phase(number) is None:
        numbers = ", ".join(str(p.number) for p in saved.phases) or "none"
        return PvefixError(f"the saved plan has no phase {number} (its phases: {numbers})",
                           source=f"VM {vmid}")
    if number == P2P_PHASE and not fresh.options.p2p:
        return PvefixError(
            f"phase {number} is the P2P clique phase, planned only with --p2p (or a desired"
            f" state or profile that asks for P2P); the plan has phases: {have}",
            source=f"VM {vmid}")
    if not 1 <= number <= MAX_PHASE:
        return PvefixError(f"the plan has no phase {number} (phases: {have})",
                           source=f"VM {vmid}")
    left = f" (phases left: {have})" if fresh.has_changes else ""
    why = (f"what it changes is in place{left}" if fresh.has_changes
           else "the plan has nothing to change")
    old = saved.phase(number) if saved is not None else None
    if old is not None:
        moved = [c.id for c in old.changes if not _in_place(c, live)]
        why = (f"the saved plan's phase {number} is in place{left}" if not moved else
               f"the plan derived from the target now has no phase {number}{left}, although"
               f" {', '.join(moved)} of the saved phase are not as it writes them (pvefix plan"
               f" {vmid} shows what holds)")
    text = f"phase {number}: nothing to do on VM {vmid}: {why}; nothing was written"
    waiting = NextStart.from_text(live.vm.config_text, "live").staged()
    if waiting and live.vm.status == "running":
        text += (f"\nVM {vmid}'s [PENDING] changes ({', '.join(w.key for w in waiting)}) wait"
                 f" for its next cold start: qm shutdown {vmid} && qm start {vmid}")
    if fresh.has_changes:
        text += "\n" + next_line(fresh, 0, asked.context)
    return NothingToDo(text)


def _in_place(change: Change, live: HostState) -> bool:
    """Is this change written (a VM key: as the next start has it, [PENDING] included)?"""
    if change.target == "vm-config":
        ns = NextStart.from_text(live.vm.config_text, "live")
        return ns.value(change.key) == change.after
    return change_in_effect(change, live)


def _refuse_root_only(phase: Phase, live: HostState, asked: Asked) -> bool:
    """True when `qm set` over SSH is to be used; raises before any write when nothing can."""
    needing = root_only(phase)
    access = live.access
    if not needing or access.method != "api" or access.is_root_pam_ticket:
        return False
    if asked.qm_set and access.ssh:
        return True
    commands = [qm_set_command(live.vm.vmid, {c.key: c.after} if c.after else
                               {"delete": c.key}) for c in needing]
    paths = ["log in as root@pam with a password (a ticket): --user root@pam --auth password"]
    if access.ssh:
        paths.append("or let pvefix run `qm set` as root over SSH: --qm-set; it runs:\n    "
                     + "\n    ".join(commands))
    else:
        paths.append("or, as root on the node:\n    " + "\n    ".join(commands))
    raise RefusedError(
        f"{', '.join(c.key for c in needing)}: only root@pam with a password ticket may make"
        " these changes (qemu-server keeps raw host devices, `romfile` and `args` to root@pam),"
        f" and this connection is {access.user} ({access.auth}); nothing was written. Ways"
        " that work: " + "; ".join(paths),
        source=f"VM {live.vm.vmid}")


def _refuse_guest_without_access(phase: Phase, live: HostState, guest: bool) -> None:
    """A guest-cmdline change is applied through the guest channel: refuse, before any write,
    when there is none or the guest has no GRUB defaults file to edit."""
    ids = ", ".join(c.id for c in phase.changes if c.target == "guest-cmdline")
    if not ids:
        return
    if not guest:
        raise RefusedError(
            f"phase {phase.number} changes the guest's kernel cmdline ({ids}), which pvefix "
            "does through a way into the guest: give --guest-agent or --guest-ssh-host HOST "
            "(the plan was made with one), or plan again without guest access to get the "
            "steps to run by hand; nothing was written", source=f"VM {live.vm.vmid}")
    grub = live.guest.files.get(GRUB_DEFAULT) if live.guest is not None else None
    if grub is None or grub.text is None:
        raise RefusedError(
            f"the guest has no {GRUB_DEFAULT}, so pvefix cannot change its kernel cmdline "
            f"({ids}); plan again without guest access to get the steps to run by hand; "
            "nothing was written", source=f"VM {live.vm.vmid}")


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
        else {c.file for c in changes if c.target in HOST_BOOT_TARGETS and c.file})
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
            reasons.append(f"{path} sha256 {short_sha(sha)} -> {short_sha(now)}")
    for change in changes:
        # The guest's running cmdline is what its change was planned from.
        if change.target == "guest-cmdline" and live.guest is not None and (
            live.guest.cmdline != change.before
        ):
            reasons.append(f"the guest's /proc/cmdline {change.before!r} -> "
                           f"{live.guest.cmdline!r}")
    return reasons


def change_in_effect(change: Change, live: HostState) -> bool:
    """Is this (earlier phase's) change really active on the target?"""
    if change.target == "vm-config":
        ns = NextStart.from_text(live.vm.config_text, "live")
        return ns.current.get(change.key) == change.after and not ns.is_staged(change.key)
    if change.target in HOST_BOOT_TARGETS:
        proc = live.file(PROC_CMDLINE).text or ""
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
