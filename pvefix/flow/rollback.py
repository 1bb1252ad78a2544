"""`pvefix rollback`, as a flow: pick the snapshot, read the target (and the guest's files the
apply changed, through the way into the guest), refuse when it moved in ways the apply did not
make (unless --force), show what will be restored, confirm, then let the executor restore it
under the VM lock (pvefix.executor.restore.restore_snapshot). Returns the result; the command
renders it."""

from __future__ import annotations

from pathlib import Path

from pvefix.errors import PvefixError, RefusedError
from pvefix.executor.activate import boot_pending, reboot_to_activate
from pvefix.executor.checks import config_diff, moved_since, written_by_apply
from pvefix.executor.console import Console
from pvefix.executor.locks import local_lock_note, vm_lock
from pvefix.executor.neighbours import NodeVm
from pvefix.executor.options import ApplyOptions, RollbackOptions
from pvefix.executor.restore import (
    RestartOutlook,
    RollbackResult,
    guest_changes,
    guest_for,
    guest_moved,
    restart_outlook,
    restore_snapshot,
    what_differs,
)
from pvefix.executor.snapshot import Snapshot, find_snapshot, list_snapshots
from pvefix.flow.guards import (
    confirm_reboot,
    guard_host_reboot,
    refuse_ha_restart,
    refuse_missing_privileges,
    restore_privileges,
)
from pvefix.hints import Context
from pvefix.state import HostState
from pvefix.store.statedir import check_state_tree
from pvefix.target.guest.access import GuestAccess
from pvefix.target.guest.channel import GuestChannel
from pvefix.target.sessions import Sessions
from pvefix.target.settings import Connection


def run_rollback(conn: Connection, state_dir: Path, vmid: int | None, snapshot_id: str | None,
                 options: RollbackOptions, console: Console,
                 guest: GuestAccess | None = None) -> RollbackResult:
    """`pvefix rollback`: pick the snapshot, refuse if the target moved, confirm, restore.
    One API session, one SSH session to the node and one guest channel serve it all."""
    check_state_tree(state_dir)  # a snapshot another user could have planted is never restored
    with Sessions(conn) as sessions:
        cluster = sessions.cluster_identity()
        if options.reboot_host and snapshot_id is None and vmid is not None:
            snapshot_id = rolled_back_not_rebooted(state_dir, vmid, cluster)
        try:
            snapshot = find_snapshot(state_dir, snapshot_id, vmid, cluster)
        except PvefixError as exc:
            # No snapshot: say whether a pvefix holds the VM now, or one ended (kill -9) before
            # its first write, rather than only "nothing to roll back".
            note = local_lock_note(state_dir, vmid) if vmid is not None else None
            if note is None or snapshot_id is not None:
                raise
            raise PvefixError(f"{exc.message}: {note}", source=exc.source) from None
        meta = snapshot.meta
        target = conn.model_copy(update={"node": conn.node or meta.node})
        touched, _ = guest_changes(snapshot)
        inside: tuple[GuestChannel, dict[str, str | None]] | None = None
        if touched:
            channel = sessions.guest(guest_for(snapshot, guest), meta.vmid, target.node)
            inside = (channel, {path: channel.read_file(path) for path in sorted(touched)})
        result = _run_rollback(target, snapshot, options, console, inside, state_dir,
                               sessions)
        return _p2p_goal_note(result, snapshot, state_dir, cluster, options.context)


def _p2p_goal_note(result: RollbackResult, snapshot: Snapshot, state_dir: Path,
                   cluster: str | None, context: Context) -> RollbackResult:
    """After the P2P phase is rolled back, the desired state its apply recorded still asks
    for P2P (`pvefix check` would call the rollback drift): say so, with the command that
    records the goal without it."""
    from pvefix.desired.store import recorded_p2p
    from pvefix.planner.rules.p2p import PHASE as P2P_PHASE

    vmid = snapshot.meta.vmid
    if snapshot.meta.phase != P2P_PHASE:
        return result
    wants, path = recorded_p2p(state_dir, vmid, lambda: cluster)
    if wants is None:
        return result
    line = context.command(["desired", str(vmid), "--no-p2p", "--record"], guest=False)
    note = (f"the desired state recorded for VM {vmid} ({path}) still asks for the P2P phase:"
            f" pvefix check reports the rollback as drift until the goal without it is"
            f" recorded:\n  {line}")
    return result.model_copy(update={"notes": [*result.notes, note]})


def _run_rollback(conn: Connection, snapshot: Snapshot, options: RollbackOptions,
                  console: Console,
                  guest: tuple[GuestChannel, dict[str, str | None]] | None,
                  state_dir: Path, sessions: Sessions) -> RollbackResult:
    from pvefix.sources.live import read_live

    meta = snapshot.meta
    live = read_live(conn, meta.vmid, sessions=sessions)
    _refuse_unread_files(snapshot, live)
    _refuse_template_start(snapshot, live, options)
    differs = what_differs(snapshot, live)
    guest_differs = [] if guest is None else [
        p for p, text in guest[1].items() if text != snapshot.guest_file_text(p)]
    console.say_wrapped(f"snapshot {meta.id} (VM {meta.vmid}, phase {meta.phase}, "
                        f"{meta.created()}, {snapshot.status()})")
    outlook = restart_outlook(snapshot)
    held = [outlook.held_back()] if options.restart and outlook.cannot_start else []
    reboot = options.reboot_host and (bool(differs.files) or boot_pending(live))
    nothing = not differs.vm_differs and not differs.files and not guest_differs
    if nothing and (not options.restart or held) and not reboot:
        return RollbackResult(snapshot_id=meta.id, vmid=meta.vmid, restored=[],
                              notes=held + _activation_note(snapshot, state_dir,
                                                            options.context)
                              + _nothing_to_activate(options, snapshot),
                              already=True)
    moved = moved_since(snapshot, live) + ([] if guest is None else
                                           guest_moved(snapshot, guest[1]))
    diff = config_diff(live.vm.config_text, snapshot.vm_config_text(),
                       f"VM {meta.vmid} now", f"snapshot {meta.id}")
    if options.restart and not held:
        refuse_ha_restart(live, "rollback --restart")
    by_api = differs.vm_differs and not (conn.reaches_node and meta.vm.config_source == "file")
    refuse_missing_privileges(
        sessions.api().get, live,
        restore_privileges(meta.vmid, snapshot.vm_config_text(), live.vm.config_text,
                           api_keys=by_api, starts=options.restart and not held),
        "the rollback")
    others = guard_host_reboot(conn, sessions, live, stop_others=options.stop_others,
                               start=options.start, console=console,
                               command="the rollback") if reboot else []
    if moved and not options.force:
        raise RefusedError(
            "the target has changed since the apply this snapshot belongs to, in ways pvefix "
            "did not make:\n  " + "\n  ".join(moved)
            + (f"\n{diff}" if diff else "")
            + "\nnothing was written; look at the changes, then re-run with --force to restore "
              "the snapshot over them",
            source=f"snapshot {meta.id}")
    _say_restored(console, snapshot, diff, differs.files, guest_differs)
    question = _say_restart(console, outlook, options.restart)
    question += f" and reboot host {meta.node} to run the restored cmdline" if reboot else ""
    if not options.yes:
        confirm_reboot(console, f"Roll VM {meta.vmid} back to {meta.id}{question}?", meta.node,
                       others if reboot else [], refused="use --yes to confirm",
                       yes="roll back")
    return _restore_locked(conn, snapshot, live, options, console, guest, state_dir, sessions,
                           nothing=nothing, forced=bool(moved),
                           reboot=others if reboot else None)


def _say_restored(console: Console, snapshot: Snapshot, diff: str, files: list[str],
                  guest_files: list[str]) -> None:
    """Show what the rollback will put back: the VM config's diff, the host and guest files."""
    if diff:
        console.say(diff.rstrip("\n"))
    for path in files:
        record = snapshot.file_record(path)
        console.say(f"{path}: will be restored (sha256 {record.sha256 if record else '?'})")
    for path in guest_files:
        console.say(f"guest {path}: will be restored")


def _refuse_template_start(snapshot: Snapshot, live: HostState,
                           options: RollbackOptions) -> None:
    """--restart/--start on a template (now, or as the snapshot restores it): refused before
    any write. Proxmox never starts a template (qemu-server QemuServer.pm vm_start)."""
    from pvefix.flow.prepare import is_template_vm

    if not (options.restart or options.start):
        return
    if is_template_vm(live.vm.config_text) or is_template_vm(snapshot.vm_config_text()):
        raise RefusedError(
            f"VM {snapshot.meta.vmid} is a template: Proxmox never starts a template"
            " (qemu-server vm_start), so --restart/--start cannot be done; nothing was"
            " written. Roll back without them: the restored config reaches the clones made"
            " from it afterwards.",
            source=f"VM {snapshot.meta.vmid}")


def _restore_locked(conn: Connection, snapshot: Snapshot, live: HostState,
                    options: RollbackOptions, console: Console,
                    guest: tuple[GuestChannel, dict[str, str | None]] | None, state_dir: Path,
                    sessions: Sessions, *, nothing: bool, forced: bool,
                    reboot: list[NodeVm] | None) -> RollbackResult:
    """Under the VM lock: restore what differs (nothing: only the reboot is left), then, when
    `reboot` (the other VMs to stop first) is given, reboot the node to run it."""
    meta = snapshot.meta
    sessions.claim(meta.node)  # --local: this host must be the VM's node, checked now
    with vm_lock(state_dir, sessions, meta.node, meta.vmid, "rollback", console.progress):
        result = RollbackResult(snapshot_id=meta.id, vmid=meta.vmid, restored=[],
                                notes=[]) if nothing else restore_snapshot(
            sessions, meta.node, snapshot, live, options, console.progress, guest,
            forced=forced)
        if reboot is not None:
            result = _activate(conn.for_node(meta.node), sessions, snapshot, result, reboot,
                               options, state_dir, console)
        return result


def rolled_back_not_rebooted(state_dir: Path, vmid: int, cluster: str | None) -> str | None:
    """`rollback VMID --reboot-host` right after a rollback without it: the newest snapshot of
    the VM, when it is rolled back, restored host files and no reboot followed that rollback
    (its id; else None: the newest snapshot not rolled back yet, as always)."""
    snaps = list_snapshots(state_dir, vmid, cluster)
    if not snaps or snaps[-1].status() != "rolled-back":
        return None
    newest = snaps[-1]
    records = newest.records()
    if not written_by_apply(records)[1]:
        return None
    last = max((i for i, r in enumerate(records) if r.get("event") == "rollback-end"),
               default=0)
    rebooted = any(r.get("event") == "activation-end" and r.get("rollback")
                   for r in records[last:])
    return None if rebooted else newest.id


def _activation_note(snapshot: Snapshot, state_dir: Path, context: Context) -> list[str]:
    """An activation-only apply (phase 2 with nothing to write, a host reboot) has nothing to
    restore: say so, and which rollback goes back to the old cmdline."""
    meta = snapshot.meta
    phase = snapshot.plan().phase(meta.phase)
    if phase is None or not phase.activation_only:
        return []
    wrote = [s for s in list_snapshots(state_dir, meta.vmid, meta.cluster)
             if s.meta.created_at < meta.created_at and s.status() == "applied"
             and written_by_apply(s.records())[1]]
    back = (context.command(["rollback", str(meta.vmid), "--snapshot", wrote[-1].id,
                             "--reboot-host"], guest=False) if wrote
            else "roll back the apply that wrote the host file, with --reboot-host (pvefix"
            " snapshots lists it)")
    return [f"snapshot {meta.id} wrote nothing: phase {meta.phase} only activated the host"
            " cmdline configured before it (a host reboot), so there is nothing to restore;"
            f" to go back to the old cmdline:\n  {back}"]


def _nothing_to_activate(options: RollbackOptions, snapshot: Snapshot) -> list[str]:
    if not options.reboot_host:
        return []
    return [f"no host reboot: host {snapshot.meta.node} already runs the kernel cmdline"
            " configured in its files (nothing to activate)"]


def _activate(conn: Connection, sessions: Sessions, snapshot: Snapshot,
              result: RollbackResult, others: list[NodeVm], options: RollbackOptions,
              state_dir: Path, console: Console) -> RollbackResult:
    """--reboot-host: reboot the node so the restored host cmdline runs (also later, when the
    files were restored by an earlier rollback and the old line still runs)."""
    steps = ApplyOptions(phase=snapshot.meta.phase, state_dir=state_dir,
                         force_stop=options.force_stop, stop_others=options.stop_others,
                         shutdown_timeout=options.shutdown_timeout,
                         task_timeout=options.task_timeout,
                         reboot_timeout=options.reboot_timeout)
    from pvefix.sources.live import read_live

    vmid = snapshot.meta.vmid
    activated = reboot_to_activate(
        sessions, snapshot.meta.node, snapshot, others, steps, console,
        reread=lambda: read_live(conn, vmid, sessions=sessions))
    return result.model_copy(update={"restored": [*result.restored, *activated]})


def _say_restart(console: Console, outlook: RestartOutlook, restart: bool) -> str:
    """Say what --restart will do to the VM; returns the words the question adds."""
    if not restart:
        return ""
    if outlook.cannot_start:
        console.say(outlook.held_back())
        return " (without restarting it)"
    if outlook.staged:
        console.say(outlook.commits())
        return " and restart it, committing its staged [PENDING] changes"
    return " and restart it"


def _refuse_unread_files(snapshot: Snapshot, live: HostState) -> None:
    """Files the apply wrote on the node cannot be compared or restored without reading them
    (no SSH): refused, rather than a rollback that leaves them as they are unsaid."""
    _, wrote = written_by_apply(snapshot.records())
    if wrote and not live.host_files_read:
        raise RefusedError(
            f"the apply of snapshot {snapshot.id} changed files on the node ("
            + ", ".join(sorted(wrote)) + "): restoring them needs SSH; nothing was written"
            " (roll back with SSH settings, without --no-ssh)", source=f"VM {snapshot.meta.vmid}")
