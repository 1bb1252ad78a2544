"""`pvefix apply`: one phase of a plan, as a transaction.

    read live -> refuse a stale plan, a missing prerequisite, a write the credentials cannot
    make -> show the phase -> confirm -> (Proxmox snapshot) -> pvefix snapshot -> steps, each
    journaled before and after -> verify -> activate (restart / host reboot) -> verify again

With a way into the guest (`guest`), guest-cmdline changes are steps too (the guest's
/etc/default/grub and update-grub, pvefix.executor.guest_steps), and `--verify` probes the
guest before the first write and after activation (pvefix.executor.guest_verify).

Any failure before activation undoes the steps already done, in reverse, through the same
guarded paths, and says what was undone. A VM that fails to start after the change is rolled
back and started again with --auto-rollback; otherwise the exact rollback command is printed.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import assert_never

from pydantic import BaseModel, ConfigDict

from pvefix.connection.settings import Connection
from pvefix.desired import record as record_desired
from pvefix.desired.derive import p2p_rule
from pvefix.digest import sha1_text
from pvefix.errors import PvefixError, RefusedError
from pvefix.executor import checks
from pvefix.executor.activation import (
    StartFailed,
    cmdline_problems,
    reboot_host,
    shutdown_vm,
    start_vm,
    vm_run,
)
from pvefix.executor.console import Console
from pvefix.executor.filetarget import GuestFiles, NodeFiles
from pvefix.executor.guest_verify import probe_after, probe_before
from pvefix.executor.journal import Hook, Journal
from pvefix.executor.locks import vm_lock
from pvefix.executor.neighbours import (
    NodeVm,
    check_after_boot,
    check_host_reboot,
    check_start,
    node_vms,
    startup_sorted,
)
from pvefix.executor.remote import Remote, vm_conf_path
from pvefix.executor.rollback import (
    RollbackOptions,
    backup_stamp,
    restore_files,
    restore_vm_config,
    rollback_context,
    run_rollback,
)
from pvefix.executor.snapshot import Snapshot, take_snapshot
from pvefix.executor.steps import ManualStep, Step, StepContext, UndoConflict, build_steps
from pvefix.executor.vmwrite import (
    ApiVmWriter,
    QmVmWriter,
    VmWriter,
    qm_set_command,
    read_vm,
)
from pvefix.planner.model import PLAN_SCHEMA, Phase, Plan, PlanOptions
from pvefix.probe.report import Report
from pvefix.state import GRUB_DEFAULT, PROC_CMDLINE, HostState
from pvefix.verify.channel import GuestChannel
from pvefix.verify.guest import GuestAccess
from pvefix.verify.p2p_verdict import judge as judge_p2p
from pvefix.verify.qemu_proof import prove as prove_cmdline
from pvefix.verify.take import open_channel
from pvefix.vmconfig.args import clique_map
from pvefix.vmconfig.config import VMConfig

StateReader = Callable[[Connection, int], HostState]


@dataclass(frozen=True)
class ApplyOptions:
    """What the admin asked for on the command line."""

    phase: int
    state_dir: Path
    yes: bool = False
    replan: bool = False
    restart: bool = False
    force_stop: bool = False
    reboot_host: bool = False
    stop_others: bool = False  # with reboot_host: shut other running VMs down cleanly first
    start: bool = False  # with restart: also start a VM that was stopped
    auto_rollback: bool = False
    pve_snapshot: bool = False
    qm_set: bool = False
    shutdown_timeout: float = 120.0
    task_timeout: float = 60.0
    reboot_timeout: float = 900.0
    rollback_hint: str = ""  # extra options for the printed rollback command
    verify: bool = False  # probe the guest before and after (needs guest access)
    verify_quick: bool = True  # the probe's quick mode
    guest_wait: float = 300.0  # how long the after-probe waits for a restarted guest
    plan_options: PlanOptions = field(default_factory=PlanOptions)  # --p2p, --clique-map


class NothingToDo(PvefixError):
    """The plan is empty: there is no phase to apply (exit 0)."""

    exit_code = 0


class ApplyResult(BaseModel):
    """What an apply did (frozen; rendered by the command)."""

    model_config = ConfigDict(frozen=True)

    vmid: int
    phase: int
    snapshot_id: str
    done: list[str]
    manual: list[str]
    activated: list[str]
    pending: list[str]
    rollback_command: str
    desired_path: str | None = None
    not_running: list[str] = []  # VMs that ran before a host reboot and are not up again
    verify_worse: bool | None = None  # --verify: P2P got worse (None: not verified)
    verify_reports: list[str] = []  # --verify: the kept reports, before then after


class ApplyFailed(PvefixError):
    """A step failed; the steps done were undone (the message lists them)."""


PLAN_FILE_MAX = 16 << 20  # a plan of a VM is kilobytes; anything this large is not one


def load_plan_file(path: Path) -> Plan:
    """A plan file (pvefix.plan/v1) as `pvefix plan --out` writes it."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(PLAN_FILE_MAX + 1)
    except FileNotFoundError:
        raise PvefixError("plan file not found", source=str(path)) from None
    except OSError as exc:
        raise PvefixError(f"cannot read the plan file: {exc.strerror}", source=str(path)) from None
    if len(raw) > PLAN_FILE_MAX:
        raise PvefixError(f"larger than {PLAN_FILE_MAX >> 20} MiB: not a plan file",
                          source=str(path))
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PvefixError(f"not UTF-8 text (byte {exc.start})", source=str(path)) from None
    except json.JSONDecodeError as exc:
        raise PvefixError(f"not JSON: {exc.msg}", source=str(path), line=exc.lineno) from None
    except RecursionError:
        raise PvefixError("not a plan file: JSON nested too deeply", source=str(path)) from None
    except ValueError as exc:  # e.g. an integer longer than Python converts
        raise PvefixError(f"not a plan file: {exc}", source=str(path)) from None
    if not isinstance(data, dict) or data.get("schema") != PLAN_SCHEMA:
        raise PvefixError(f"not a {PLAN_SCHEMA} plan file", source=str(path))
    data.pop("created_at", None)
    try:
        return Plan.model_validate(data)
    except ValueError as exc:
        raise PvefixError(f"invalid plan: {exc}", source=str(path)) from None


def render_phase(plan: Plan, phase: Phase) -> list[str]:
    lines = [f"Phase {phase.number} for VM {plan.observed.vmid} on "
             f"{plan.observed.node} ({phase.disruption}):"]
    for c in phase.changes:
        if c.target == "vm-config":
            lines.append(f"  {c.id}: VM config {c.key}: {c.before or '(absent)'} -> "
                         f"{c.after or '(deleted)'}" + ("  [root@pam]" if c.needs_root_pam
                                                        else ""))
        elif c.target == "host-cmdline":
            lines.append(f"  {c.id}: {c.file}: {c.before!r} -> {c.after!r}")
            if c.refresh_command:
                lines.append(f"      then: {shlex.join(c.refresh_command)}")
        elif c.target == "guest-cmdline":
            lines.append(f"  {c.id}: in the guest: {c.file}: {c.before!r} -> {c.after!r}")
            if c.refresh_command:
                lines.append(f"      then, in the guest: {shlex.join(c.refresh_command)}")
        elif c.target == "manual":
            lines.append(f"  {c.id}: by hand ({c.target}): {c.key} -> {c.after}"
                         " (best done before the activation below; otherwise reboot once more)")
            lines += [f"      {cmd}" for cmd in c.commands]
        else:
            assert_never(c)
    lines.append(f"Activation: {phase.activation}")
    return lines


def _refuse_root_only(phase: Phase, live: HostState, options: ApplyOptions) -> bool:
    """True when `qm set` over SSH is to be used; raises before any write when nothing can."""
    needing = checks.root_only(phase)
    access = live.access
    if not needing or access.method != "api" or access.is_root_pam_ticket:
        return False
    if options.qm_set and access.ssh:
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
        f"{', '.join(c.key for c in needing)}: only root@pam with a password ticket may set "
        f"raw host devices, and this connection is {access.user} ({access.auth}); nothing was "
        "written. Ways that work: " + "; ".join(paths),
        source=f"VM {live.vm.vmid}",
    )


@contextlib.contextmanager
def transaction(ctx: StepContext, journal: Journal, console: Console,
                snapshot: Snapshot) -> Iterator[list[Step]]:
    """Yield the list of started steps; on ANY exception undo them in reverse and re-raise
    (RefusedError stays a refusal, Ctrl-C stays Ctrl-C) with the undo report."""
    started: list[Step] = []
    try:
        yield started
    except BaseException as exc:
        try:
            undone, failures = undo_steps(started, ctx, journal, console)
        except UndoInterrupted as again:
            # A second Ctrl-C: stop, but say exactly what is still changed and how to undo it.
            journal.record("apply-end", status="interrupted-undo", remaining=again.remaining)
            console.progress(interrupted_undo_report(again, snapshot))
            raise
        exact = _restore_exact(ctx, snapshot, journal)
        if exact:
            undone.append(exact)
        status = "failed" if failures else "undone"
        journal.record("apply-end", status=status, error=str(exc))
        report = _undo_report(exc, undone, failures, snapshot)
        console.progress(report)
        if isinstance(exc, RefusedError) or any(f.endswith("[conflict]") for f in failures):
            raise RefusedError(f"{exc}\n{report}") from exc
        if isinstance(exc, PvefixError):
            raise ApplyFailed(f"{exc}\n{report}") from exc
        if isinstance(exc, Exception):
            raise ApplyFailed(f"{type(exc).__name__}: {exc}\n{report}") from exc
        raise


class UndoInterrupted(KeyboardInterrupt):
    """Ctrl-C while undoing: `remaining` are the summaries of the steps still in place."""

    def __init__(self, undone: list[str], remaining: list[str]) -> None:
        self.undone = undone
        self.remaining = remaining
        super().__init__("interrupted while undoing")


def interrupted_undo_report(again: UndoInterrupted, snapshot: Snapshot) -> str:
    lines = ["interrupted again while undoing: the undo stopped."]
    lines.append("undone: " + ("; ".join(again.undone) if again.undone else "nothing yet"))
    lines.append("STILL CHANGED (not undone): " + "; ".join(again.remaining))
    lines.append(f"undo them with: pvefix rollback {snapshot.meta.vmid} --snapshot "
                 f"{snapshot.id}")
    return "\n".join(lines)


def undo_steps(started: list[Step], ctx: StepContext, journal: Journal,
               console: Console) -> tuple[list[str], list[str]]:
    undone: list[str] = []
    failures: list[str] = []
    todo = list(reversed(started))
    for index, step in enumerate(todo):
        journal.record("undo-begin", step=step.id, kind=step.kind)
        try:
            what = step.undo(ctx)
        except KeyboardInterrupt:
            # This step may or may not be undone: it is listed as still changed.
            raise UndoInterrupted(undone, [s.summary() for s in todo[index:]]) from None
        except UndoConflict as exc:
            # Another writer's change: stop undoing (earlier steps may depend on it).
            failures.append(f"{step.id}: {exc} [conflict]")
            journal.record("undo-failed", step=step.id, error=str(exc), conflict=True)
            break
        except Exception as exc:  # keep undoing the rest; report what could not be
            failures.append(f"{step.id}: {exc}")
            journal.record("undo-failed", step=step.id, error=str(exc))
            continue
        journal.record("undo-end", step=step.id, undone=what)
        if what:
            undone.append(what)
            console.progress(f"undone: {what}")
    return undone, failures


def _restore_exact(ctx: StepContext, snapshot: Snapshot, journal: Journal) -> str | None:
    """After undoing through the API the values are back; put back the exact bytes too when
    the file differs only in form (never over someone else's edit)."""
    if not ctx.remote.has_ssh or snapshot.meta.vm.config_source != "file":
        return None
    try:
        path = vm_conf_path(snapshot.meta.node, snapshot.meta.vmid)
        raw = ctx.remote.read_file(path)
        text = snapshot.vm_config_text()
        if raw is None or raw == text or not checks.same_content(raw, text):
            return None
        journal.record("restore-begin", kind="vm-config", method="file", path=path,
                       digest=snapshot.meta.vm.digest)
        ctx.remote.write_file(path, text)
        journal.record("restore-end", kind="vm-config", digest=sha1_text(text))
        return f"VM {snapshot.meta.vmid} config bytes restored (digest {sha1_text(text)})"
    except PvefixError:
        return None


def _undo_report(exc: BaseException, undone: list[str], failures: list[str],
                 snapshot: Snapshot) -> str:
    lines = [f"apply stopped: {exc}" if not isinstance(exc, KeyboardInterrupt)
             else "apply interrupted"]
    lines.append("undone, in reverse order: " + ("; ".join(undone) if undone else
                                                  "nothing had been written"))
    if failures:
        lines.append("COULD NOT UNDO: " + "; ".join(failures))
        lines.append(f"restore by hand or with: pvefix rollback {snapshot.meta.vmid} "
                     f"--snapshot {snapshot.id}"
                     + (" --force (it overwrites the other writer's change)"
                        if any(f.endswith("[conflict]") for f in failures) else ""))
    return "\n".join(lines)


def rollback_command(vmid: int, snapshot_id: str, options: ApplyOptions, restart: bool) -> str:
    parts = ["pvefix", "rollback", str(vmid), "--snapshot", snapshot_id]
    if restart:
        parts.append("--restart")
    command = shlex.join(parts)
    return f"{command} {options.rollback_hint}".strip()


def apply_phase(
    conn: Connection,
    vmid: int,
    options: ApplyOptions,
    console: Console,
    *,
    plan: Plan | None = None,
    hook: Hook | None = None,
    read: StateReader | None = None,
    guest: GuestAccess | None = None,
) -> ApplyResult:
    """Apply phase `options.phase` of `plan` (or of a fresh plan) to VM `vmid`; `guest` is
    the way into its guest (for guest-cmdline changes and --verify), if any."""
    from pvefix.planner import plan as make_plan
    from pvefix.sources.live import read_live

    if options.verify and guest is None:
        raise PvefixError("--verify runs the probe inside the guest: give a way into it "
                          "(--guest-agent, or --guest-ssh-host HOST); nothing was written")
    reader: StateReader = read or (lambda c, v: read_live(c, v, guest=guest))
    live = reader(conn, vmid)
    conn = conn.model_copy(update={"node": live.vm.node})
    planned_with = plan
    if plan is not None:
        stale = checks.stale_reasons(plan, live, plan.phase(options.phase))
        if stale and not options.replan:
            raise RefusedError(
                "the plan is stale: the target changed since it was made:\n  "
                + "\n  ".join(stale)
                + "\nnothing was written; re-run with --replan to plan afresh (and review it)",
                source=f"VM {vmid}",
            )
        if stale:
            console.progress("the plan was stale (" + "; ".join(stale) + "): planning afresh")
            plan = None
    asked = planned_with.options if planned_with is not None else options.plan_options
    fresh = make_plan(live, asked)
    saved_phase = plan.phase(options.phase) if plan is not None else None
    if saved_phase is not None:
        # A guest change needs the way into the guest it was planned with: say that first.
        _refuse_guest_without_access(saved_phase, live, guest)
    if plan is not None:
        # A plan file is data, never authority: what runs is derived here from the live
        # target, and the file must say exactly that.
        differs = checks.plan_differences(plan, fresh, options.phase)
        if differs:
            raise RefusedError(
                "the saved plan does not match what pvefix derives from the target now:\n  "
                + "\n  ".join(differs)
                + "\nnothing was written; plan again (pvefix plan) and review it",
                source=f"VM {vmid}",
            )
    plan = fresh
    if not plan.has_changes:
        raise NothingToDo(f"VM {vmid}: the plan has nothing to change; nothing was written")
    phase = plan.phase(options.phase)
    if phase is None:
        have = ", ".join(str(p.number) for p in plan.phases) or "none"
        raise PvefixError(f"the plan has no phase {options.phase} (phases: {have})",
                          source=f"VM {vmid}")
    missing = checks.missing_prerequisites(plan, phase, live)
    if missing:
        raise RefusedError(
            "a prerequisite phase is not in effect:\n  " + "\n  ".join(missing)
            + "\napply (and activate) the earlier phase first; nothing was written",
            source=f"VM {vmid}",
        )
    use_qm = _refuse_root_only(phase, live, options)
    if live.vm.lock:
        raise RefusedError(f"VM {vmid} is locked ({live.vm.lock}); nothing was written")
    wants_host = any(c.target == "host-cmdline" for c in phase.changes)
    if wants_host and not live.access.ssh:
        raise RefusedError("this phase changes host files, which needs SSH to the node")
    _refuse_guest_without_access(phase, live, guest)
    others: list[NodeVm] = []
    reboots = options.reboot_host and wants_host
    starts = options.start or (options.restart and live.vm.status == "running" and any(
        c.target == "vm-config" for c in phase.changes))
    if reboots or starts:
        probe = Remote(conn, live.vm.node)
        try:
            vms = node_vms(probe)
        finally:
            probe.close()
        if starts:
            check_start(vms, vmid)
    if reboots:
        console.say(f"A host reboot stops every VM on {live.vm.node}:")
        for v in vms:
            console.say(f"  {v.describe()}")
        others = check_host_reboot(vms, vmid, options.stop_others)
        back = [v.vmid for v in others]
        if live.vm.status == "running" or options.start:
            back.append(vmid)
        check_after_boot(vms, back)
    for line in render_phase(plan, phase):
        console.say(line)
    if not options.yes and not console.confirm(f"Apply phase {phase.number} to VM {vmid}?"):
        raise RefusedError("not confirmed: nothing was written (dry run; --yes to apply)")

    baseline = None
    if options.verify and guest is not None:
        baseline = probe_before(conn, guest, vmid, options.state_dir, options.verify_quick,
                                console)
    remote = Remote(conn, live.vm.node)
    remote.on_warning = console.progress
    channel = open_channel(conn, guest, vmid) if guest is not None and _wants_guest(
        phase) else None
    try:
        with vm_lock(options.state_dir, remote, vmid, f"apply phase {phase.number}",
                     console.progress):
            result = _apply(remote, conn, live, plan, phase, options, console, hook, reader,
                            use_qm, channel, guest, others)
    finally:
        if channel is not None:
            channel.close()
        remote.close()
    if baseline is None or guest is None:
        return result
    outcome = probe_after(conn, guest, vmid, options.state_dir, options.verify_quick, console,
                          baseline, wait_s=options.guest_wait,
                          rollback_cmd=result.rollback_command)
    clique = next((c for c in phase.changes if c.rule == "p2p" and c.key == "args"), None)
    if clique is not None and options.restart:
        _p2p_verdict(conn, vmid, options, console, baseline[1], outcome.report, clique.after,
                     result)
    return result.model_copy(update={"verify_worse": outcome.worse,
                                     "verify_reports": [baseline[0], Path(outcome.stored).stem]})


def _wants_guest(phase: Phase) -> bool:
    return any(c.target == "guest-cmdline" for c in phase.changes)


def _refuse_guest_without_access(phase: Phase, live: HostState,
                                 guest: GuestAccess | None) -> None:
    """A guest-cmdline change is applied through the guest channel: refuse, before any write,
    when there is none or the guest has no GRUB defaults file to edit."""
    ids = ", ".join(c.id for c in phase.changes if c.target == "guest-cmdline")
    if not ids:
        return
    if guest is None:
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


def _take_pve_snapshot(remote: Remote, vmid: int, options: ApplyOptions,
                       console: Console) -> str:
    name = "pvefix_" + backup_stamp().replace("T", "_").rstrip("Z")
    console.progress(
        f"WARNING: taking Proxmox snapshot {name} (disk only, no RAM). Rolling THAT back also "
        "rolls back the disks: every write inside the guest since then is lost. pvefix's own "
        "rollback never uses it."
    )
    remote.run_task(f"/nodes/{remote.node}/qemu/{vmid}/snapshot",
                    {"snapname": name, "vmstate": "0",
                     "description": "before pvefix apply (config fix)"},
                    options.task_timeout)
    return name


def _apply(remote: Remote, conn: Connection, live: HostState, plan: Plan, phase: Phase,
           options: ApplyOptions, console: Console, hook: Hook | None,
           reader: StateReader, use_qm: bool, channel: GuestChannel | None,
           guest: GuestAccess | None, others: list[NodeVm] | None = None) -> ApplyResult:
    vmid = live.vm.vmid
    was_running = live.vm.status == "running"
    pve_snap = None
    if options.pve_snapshot:
        pve_snap = _take_pve_snapshot(remote, vmid, options, console)
        live = reader(conn, vmid)  # the Proxmox snapshot moved the digest: snapshot after it
    target_info: dict[str, str | int | None] = {
        "api": f"{conn.host}:{conn.port}", "user": conn.api_user, "ssh": conn.effective_ssh_host
        if conn.ssh else None, "guest": guest.method if guest else None,
        "guest_ssh": guest.ssh_host if guest and guest.method == "ssh" else None,
    }
    snapshot = take_snapshot(options.state_dir, live, plan, phase.number, target_info, pve_snap,
                             cluster=remote.identity())
    console.progress(f"snapshot {snapshot.id} in {snapshot.path}")
    journal = snapshot.journal(hook)
    writer: VmWriter = QmVmWriter(remote, vmid) if use_qm else ApiVmWriter(
        remote, vmid, options.task_timeout)
    ctx = StepContext(remote=remote, vmid=vmid, writer=writer, vm_digest=live.vm.digest,
                      backup_suffix=backup_stamp(), node=NodeFiles(remote),
                      guest=None if channel is None else GuestFiles(channel))
    steps = build_steps(plan, phase, snapshot, guest=channel is not None)
    restarting = options.restart and any(c.target == "vm-config" for c in phase.changes)
    rollback_cmd = rollback_command(vmid, snapshot.id, options, restarting)
    journal.record("apply-start", phase=phase.number, vmid=vmid, writer=writer.name,
                   steps=[s.id for s in steps])
    done: list[str] = []
    manual: list[str] = []
    activated: list[str] = []
    with transaction(ctx, journal, console, snapshot) as started:
        for step in steps:
            if isinstance(step, ManualStep):
                manual += step.change.commands or [step.summary()]
                continue
            journal.record("step-begin", step=step.id, **step.intent(ctx))
            started.append(step)
            result = step.do(ctx)
            journal.record("step-end", step=step.id, **result)
            done.append(step.summary())
            console.progress(f"done: {step.summary()}")
        problems = [p for s in started if (p := s.verify(ctx))]
        if problems:
            raise PvefixError("verification failed: " + "; ".join(problems))
        journal.record("verified", stage="written")
        if restarting:
            journal.record("activation-begin", kind="restart")
            shutdown_vm(remote, vmid, timeout=options.shutdown_timeout,
                        force_stop=options.force_stop, task_timeout=options.task_timeout,
                        say=console.progress)
    if restarting and not was_running and not options.start:
        console.progress(f"VM {vmid} was stopped: the config is applied and it stays stopped"
                         " (add --start to start it)")
        restarting = False
    elif restarting:
        machine = _machine_now(remote, vmid)
        try:
            start_vm(remote, vmid, task_timeout=options.task_timeout, say=console.progress,
                     machine=machine)
        except StartFailed as exc:
            journal.record("activation-failed", kind="restart", error=exc.exitstatus)
            _after_start_failure(remote, conn, snapshot, journal, options, console, exc,
                                 reader, rollback_cmd)
        journal.record("activation-end", kind="restart")
        activated.append(f"VM {vmid} restarted")
    if options.reboot_host and any(c.target == "host-cmdline" for c in phase.changes):
        journal.record("activation-begin", kind="reboot-host")
        stopped = _stop_others(remote, others or [], options, console, journal)
        target_ran = vm_run(remote, vmid).status == "running"
        seconds = reboot_host(remote, timeout=options.reboot_timeout, say=console.progress)
        journal.record("activation-end", kind="reboot-host", seconds=round(seconds, 2))
        activated.append(f"host {remote.node} rebooted ({seconds:.1f} s)")
        ran_before = [*stopped, *([vmid] if target_ran else [])]
        activated += _start_again(remote, ran_before, others or [], options, console, journal)
    # The guest's files were verified before activation; a restarted guest may not answer yet.
    after = reader(conn, vmid) if channel is None else _read_host_only(conn, vmid)
    problems = checks.verify_live(phase, plan, after, restarted=restarting)
    clique = next((c for c in phase.changes if c.rule == "p2p" and c.key == "args"), None)
    if restarting and clique is not None:
        proof = prove_cmdline(remote, vmid, clique.after)
        journal.record("qemu-cmdline", pid=proof.pid, problems=proof.problems, note=proof.note)
        if proof.note:
            console.progress(f"the running QEMU's cliques are not proven: {proof.note}")
        elif not proof.problems:
            console.progress(f"/proc/{proof.pid}/cmdline on {remote.node}: every clique is there,"
                             " no kvm=off")
        problems += proof.problems
    if options.reboot_host:
        proc = after.file(PROC_CMDLINE).text or ""
        problems += cmdline_problems(proc, [(c.before, c.after) for c in phase.changes
                                            if c.target == "host-cmdline"])
    if problems:
        journal.record("apply-end", status="verify-failed", problems=problems)
        raise PvefixError(
            "verification after the phase failed:\n  " + "\n  ".join(problems)
            + f"\nto put everything back: {rollback_cmd}"
        )
    journal.record("apply-end", status="applied")
    desired = record_desired(options.state_dir, after, note=f"apply phase {phase.number}",
                             cluster=remote.identity(), p2p=p2p_rule(plan.options))
    console.progress(f"desired state recorded in {desired} (pvefix check {vmid} uses it)")
    return ApplyResult(
        vmid=vmid, phase=phase.number, snapshot_id=snapshot.id, done=done, manual=manual,
        activated=activated, pending=_pending_text(phase, after, restarting,
                                                   options.reboot_host),
        rollback_command=rollback_cmd,
        desired_path=str(desired),
        not_running=[line for line in activated if " NOT up: " in line],
    )


def _stop_others(remote: Remote, others: list[NodeVm], options: ApplyOptions,
                 console: Console, journal: Journal) -> list[int]:
    """Shut the other running VMs down cleanly, in reverse startup order, each waited for."""
    stopped: list[int] = []
    for v in reversed(startup_sorted(others)):
        journal.record("activation-begin", kind="stop-other", vmid=v.vmid)
        if shutdown_vm(remote, v.vmid, timeout=options.shutdown_timeout,
                       force_stop=options.force_stop, task_timeout=options.task_timeout,
                       say=console.progress):
            stopped.append(v.vmid)
        journal.record("activation-end", kind="stop-other", vmid=v.vmid)
    return stopped


def _start_again(remote: Remote, ran_before: list[int], others: list[NodeVm],
                 options: ApplyOptions, console: Console, journal: Journal) -> list[str]:
    """Every VM that ran before the reboot runs again (onboot ones may already), in startup
    order, each checked; returns what the report says of each."""
    order = {v.vmid: v for v in others}
    wanted = sorted(ran_before, key=lambda i: (
        order[i].order is None if i in order else True,
        (order[i].order or 0) if i in order else 0, i))
    report: list[str] = []
    for vmid in wanted:
        run = vm_run(remote, vmid)
        if run.status == "running":
            report.append(f"VM {vmid} up ({run.running_machine or 'running'})")
            continue
        journal.record("activation-begin", kind="start-again", vmid=vmid)
        try:
            machine = _machine_now(remote, vmid)
            run = start_vm(remote, vmid, task_timeout=options.task_timeout,
                           say=console.progress, machine=machine)
            report.append(f"VM {vmid} up again ({run.running_machine})")
        except PvefixError as exc:
            report.append(f"VM {vmid} NOT up: {exc}")
        journal.record("activation-end", kind="start-again", vmid=vmid)
    return report


def _read_host_only(conn: Connection, vmid: int) -> HostState:
    from pvefix.sources.live import read_live

    return read_live(conn, vmid)


def _parse(text: str) -> VMConfig:
    return VMConfig.parse(text, "snapshot")


def _machine_now(remote: Remote, vmid: int) -> str | None:
    return read_vm(remote, vmid).effective("machine")


def _p2p_verdict(conn: Connection, vmid: int, options: ApplyOptions, console: Console,
                 before: Report, after: Report, args: str | None, result: ApplyResult) -> None:
    """The P2P phase proven by moving data, or failed (and, with --auto-rollback, reverted
    alone: the snapshot taken for this phase)."""
    verdict = judge_p2p(before, after, clique_map(args))
    for line in verdict.unmeasured:
        console.say(f"P2P phase, not measured (not counted as a pass): {line}")
    if not verdict.failed:
        console.say("P2P phase proven in the guest: every granted pair reports OK"
                    + ("" if verdict.unmeasured else ", data delivered, no slowdown, no hang"))
        return
    why = "\n  ".join(verdict.failures)
    if not options.auto_rollback:
        raise ApplyFailed(f"the P2P phase failed in the guest:\n  {why}\nthe clique is in "
                          f"place; to put it back: {result.rollback_command}")
    console.progress("the P2P phase failed in the guest; rolling this phase back "
                     f"(--auto-rollback, snapshot {result.snapshot_id})")
    undone = run_rollback(conn, options.state_dir, vmid, result.snapshot_id,
                          RollbackOptions(yes=True, restart=True, force_stop=options.force_stop,
                                          shutdown_timeout=options.shutdown_timeout,
                                          task_timeout=options.task_timeout), console)
    raise ApplyFailed(f"the P2P phase failed in the guest:\n  {why}\nrolled back "
                      f"(--auto-rollback): " + "; ".join(undone.restored))


def _after_start_failure(remote: Remote, conn: Connection, snapshot: Snapshot,
                         journal: Journal, options: ApplyOptions, console: Console,
                         exc: StartFailed, reader: StateReader, rollback_cmd: str) -> None:
    vmid = snapshot.meta.vmid
    if not options.auto_rollback:
        journal.record("apply-end", status="start-failed", error=exc.exitstatus)
        raise ApplyFailed(
            f"{exc}\nthe changes are in place and the VM is stopped. To put the old config back "
            f"and start it: {rollback_cmd}"
        )
    console.progress(f"{exc}; rolling back to snapshot {snapshot.id} (--auto-rollback)")
    live = reader(conn, vmid)
    writer = ApiVmWriter(remote, vmid, options.task_timeout)
    journal.record("rollback-begin", automatic=True)
    restored = [r for r in [restore_vm_config(remote, snapshot, live, journal, writer)] if r]
    restored += restore_files(rollback_context(remote, snapshot, writer, live.vm.digest),
                              snapshot, live, journal)
    machine = _parse(snapshot.vm_config_text()).main.get("machine")
    if snapshot.meta.vm.status == "running":
        start_vm(remote, vmid, task_timeout=options.task_timeout, say=console.progress,
                 machine=machine)
        restored.append(f"VM {vmid} started again on the old config")
    journal.record("rollback-end", restored=restored, automatic=True)
    raise ApplyFailed(f"{exc}\nrolled back (--auto-rollback): " + "; ".join(restored))


def _pending_text(phase: Phase, after: HostState, restarted: bool,
                  rebooted: bool) -> list[str]:
    out: list[str] = []
    vm_changes = [c for c in phase.changes if c.target == "vm-config"]
    vmid = after.vm.vmid
    if vm_changes and not restarted:
        if after.vm.status == "running":
            out.append(
                f"VM {vmid}: the changes wait in [PENDING] until its next cold start: shut it "
                f"down and start it (qm shutdown {vmid} && qm start {vmid}, or --restart); a "
                "reboot inside the guest does not apply them"
            )
        else:
            out.append(f"VM {vmid} is stopped: the new config takes effect when it starts")
    if any(c.target == "host-cmdline" for c in phase.changes) and not rebooted:
        out.append("host: the boot loader holds the new kernel cmdline; it takes effect at the "
                   "next host reboot (or --reboot-host)")
    if _wants_guest(phase) and not restarted:
        out.append(f"guest: its boot loader holds the new kernel cmdline; it takes effect at "
                   f"the guest's next boot (reboot it, or restart VM {vmid})")
    return out
