"""The restore stage of apply and rollback: the ONE body that puts a snapshot back, used by
`pvefix rollback` (`restore_snapshot`, below), the executor's --auto-rollback
after a failed start (pvefix.executor.activate) and the P2P phase's rollback (through
`pvefix rollback`'s flow).

In order: the VM config (byte for byte over SSH, with the same digest as before; else every key
and the description through the API, each write guarded by the digest), the host files and the
boot loader refresh run again, then the guest's files the apply changed and the guest's refresh
(through the guest channel). Files go back through FileStep and RefreshStep
(pvefix.executor.steps), so a target that moved after it was read is left as it is. One report
(`Restored`) says what was restored and what was not, and why.

`restore_snapshot` is the rollback's half in the executor (pvefix.flow.rollback picks, checks
and confirms): the restore stage, then (--restart) the VM stopped and started again, unless the
restored config cannot start (`restart_outlook`). The guest's way in for a rollback is the one
given (--guest-agent / --guest-ssh-host), or the agent when the apply used it (`guest_for`).
The flow refuses, showing the diff (`what_differs`, `guest_moved`), when the target has moved
in ways the apply did not make, unless forced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict

from pvefix.digest import sha1_text, sha256_text
from pvefix.errors import PvefixError, RefusedError
from pvefix.executor.journal import Journal
from pvefix.executor.options import RollbackOptions
from pvefix.executor.power import shutdown_vm, start_vm
from pvefix.executor.snapshot import Snapshot
from pvefix.executor.steps import FileStep, RefreshStep, StepContext
from pvefix.executor.vmwrite import ApiVmWriter, VmWriter, digest_of, read_vm
from pvefix.paths import vm_config
from pvefix.state import HostState
from pvefix.target.guest.access import GuestAccess
from pvefix.target.guest.channel import GuestChannel
from pvefix.target.sessions import Sessions
from pvefix.vmconfig.nextstart import NextStart, start_problems


@dataclass(frozen=True)
class GuestSide:
    """The way into the guest for a restore, and the guest files as read (path -> text)."""

    channel: GuestChannel
    current: dict[str, str | None]


@dataclass(frozen=True)
class Restored:
    """What the restore stage did: what it restored, in order, and what it did not (why)."""

    restored: list[str]
    skipped: list[str]
    vm_config: bool  # the VM config was written


def restore(sessions: Sessions, node: str, snapshot: Snapshot, live: HostState, journal: Journal,
            writer: VmWriter, guest: GuestSide | None, unreachable: str = "") -> Restored:
    """Put `snapshot` back over the target as `live` read it: the VM config, the host files
    and their refresh, the guest's files and their refresh (`guest`). Guest files the apply
    changed with no way into the guest are not restored and said so (`unreachable`: why)."""
    ctx = rollback_context(sessions, node, snapshot, writer, live.vm.digest,
                           None if guest is None else guest.channel)
    restored: list[str] = []
    vm_done = restore_vm_config(sessions, node, snapshot, live, journal, writer)
    if vm_done:
        restored.append(vm_done)
    restored += restore_files(ctx, snapshot, live, journal)
    skipped: list[str] = []
    touched, _ = guest_changes(snapshot)
    if guest is not None:
        if any(text != snapshot.guest_file_text(p) for p, text in guest.current.items()):
            restored += restore_guest_files(ctx, snapshot, guest.current, journal)
    elif touched:
        skipped.append(f"the guest's {', '.join(sorted(touched))} (changed by the apply) "
                       f"not restored: {unreachable or 'no way into the guest'}")
    return Restored(restored=restored, skipped=skipped, vm_config=vm_done is not None)


# The only boot loader refreshes pvefix ever runs (host and guest). A journal naming anything
# else was not written by pvefix: rollback refuses it rather than run it.
REFRESH_COMMANDS = (["proxmox-boot-tool", "refresh"], ["update-grub"])


def _known_refresh(argv: list[str], snapshot: Snapshot) -> list[str]:
    if argv not in REFRESH_COMMANDS:
        raise RefusedError(
            f"the snapshot's journal names a refresh command pvefix never runs ({argv[0]!r});"
            " nothing was run. Restore the files by hand from the snapshot folder",
            source=str(snapshot.path))
    return argv


# Compare-and-swap for rollback too: a target that moved after it was read (and shown for
# confirmation) is left as it is.
MOVED_WHILE_ROLLING_BACK = ("changed while pvefix was rolling back (after it was read and "
                            "shown); left as it is: look, then run the rollback again")


def refresh_commands(snapshot: Snapshot) -> list[list[str]]:
    """The boot loader commands the apply started (from its journal), in order, once each."""
    seen: list[list[str]] = []
    for record in snapshot.records():
        if record.get("event") == "step-begin" and record.get("kind") == "refresh":
            argv = [str(a) for a in record.get("argv", [])]
            if argv and argv not in seen:
                seen.append(_known_refresh(argv, snapshot))
    return seen


def restore_vm_config(sessions: Sessions, node: str, snapshot: Snapshot, live: HostState,
                      journal: Journal, writer: VmWriter) -> str | None:
    """Put the VM config back; returns what was done (None: it already was)."""
    meta = snapshot.meta
    text = snapshot.vm_config_text()
    if live.vm.config_text == text and live.vm.digest == meta.vm.digest:
        return None
    if sessions.conn.reaches_node and meta.vm.config_source == "file":
        path = vm_config(meta.node, meta.vmid)
        raw = sessions.at(node).read_file(path)
        if raw is None:
            raise PvefixError("the VM config file is gone", source=path)
        if sha1_text(raw) != live.vm.digest:
            raise RefusedError("the VM config changed while pvefix was rolling back",
                               source=path)
        journal.record("restore-begin", kind="vm-config", method="file", path=path,
                       digest=meta.vm.digest)
        sessions.at(node).replace_file(path, text)
        now = sessions.at(node).read_file(path)
        if now is None or sha1_text(now) != meta.vm.digest:
            raise PvefixError("the restored config reads back with another digest", source=path)
        journal.record("restore-end", kind="vm-config", digest=meta.vm.digest)
        return f"VM {meta.vmid} config restored byte for byte (digest {meta.vm.digest})"
    return _restore_via_api(sessions, node, snapshot, journal, writer, live.vm.digest)


def _restore_via_api(sessions: Sessions, node: str, snapshot: Snapshot, journal: Journal,
                     writer: VmWriter, expected_digest: str) -> str:
    """The snapshot's next start back through the API: every key and the description, each
    write guarded by the digest (the API has no byte-for-byte write)."""
    meta = snapshot.meta
    saved = NextStart.from_text(snapshot.vm_config_text(), "snapshot")
    view = read_vm(sessions, node, meta.vmid)
    if view.digest != expected_digest:
        raise RefusedError(MOVED_WHILE_ROLLING_BACK, source=f"VM {meta.vmid}")
    journal.record("restore-begin", kind="vm-config", method="api", digest=view.digest)
    revert = sorted(k for k in set(view.pending) | set(view.deletes)
                    if view.pending.get(k) != saved.pending.get(k)
                    or (k in view.deletes) != (k in saved.deletes))
    if revert:
        writer.write({"revert": ",".join(revert)}, digest_of(view))
        expected = NextStart(view.current, {k: v for k, v in view.pending.items()
                                            if k not in revert},
                             {k: f for k, f in view.deletes.items() if k not in revert})
        view = read_vm(sessions, node, meta.vmid)
        if view.values != expected.values:  # another writer came in between: not adopted
            raise RefusedError(MOVED_WHILE_ROLLING_BACK, source=f"VM {meta.vmid}")
    wanted = saved.values
    params = {k: v for k, v in wanted.items() if view.value(k) != v}
    deletes = sorted(k for k in view.values if k not in wanted)
    if deletes:
        params["delete"] = ",".join(deletes)
    if params:
        writer.write(params, digest_of(view))
        view = read_vm(sessions, node, meta.vmid)
    if view.values != wanted:
        differ = sorted(k for k in set(wanted) | set(view.values)
                        if wanted.get(k) != view.value(k))
        raise PvefixError("after the rollback through the API, the VM config still differs: "
                          + ", ".join(differ), source=f"VM {meta.vmid}")
    journal.record("restore-end", kind="vm-config", digest=view.digest)
    return (f"VM {meta.vmid} config restored through the API (every key and the description; "
            f"digest now {view.digest})")


def rollback_context(sessions: Sessions, node: str, snapshot: Snapshot, writer: VmWriter,
                     vm_digest: str, guest: GuestChannel | None = None) -> StepContext:
    """The steps' context for a rollback: the same node and guest targets apply writes
    through, and a fresh backup stamp for the copies of what is replaced."""
    return StepContext(sessions=sessions, vmid=snapshot.meta.vmid, writer=writer,
                       vm_digest=vm_digest, backup_suffix=backup_stamp(),
                       node=sessions.at(node), guest=guest)


def _restore(ctx: StepContext, journal: Journal, step: FileStep, sha256: str | None) -> str:
    """One file back through FileStep: refused when it moved since it was read and shown,
    the current text kept beside it as a dated copy."""
    journal.record("restore-begin", kind=step.kind, path=step.path, sha256=sha256)
    step.do(ctx)
    journal.record("restore-end", kind=step.kind, path=step.path)
    return f"{step.label} restored"


def _refresh_again(ctx: StepContext, journal: Journal, step: RefreshStep) -> str:
    journal.record("restore-begin", kind=step.kind, argv=step.argv)
    step.do(ctx)
    journal.record("restore-end", kind=step.kind, argv=step.argv)
    where = "boot loader" if step.side == "host" else "guest boot loader"
    return f"{where} refreshed again: {' '.join(step.argv)}"


def restore_files(ctx: StepContext, snapshot: Snapshot, live: HostState,
                  journal: Journal) -> list[str]:
    """Host files back as the snapshot holds them (the current one kept as a dated copy),
    then the boot loader refresh the apply ran, again: through FileStep and RefreshStep."""
    done: list[str] = []
    for record in snapshot.meta.files if live.host_files_read else []:
        if not record.restorable or record.path not in live.files:
            continue
        if live.file(record.path).sha256 == record.sha256:
            continue
        step = FileStep("host", record.path, live.file(record.path).text,
                        snapshot.file_text(record.path), [], moved=MOVED_WHILE_ROLLING_BACK)
        done.append(_restore(ctx, journal, step, record.sha256))
    for argv in refresh_commands(snapshot):
        done.append(_refresh_again(ctx, journal, RefreshStep("host", argv, [])))
    return done


def guest_changes(snapshot: Snapshot) -> tuple[dict[str, set[str | None]], list[list[str]]]:
    """From the journal: guest files the apply began to write (with the hashes it may have
    left them with) and the guest refresh commands it began, in order."""
    files: dict[str, set[str | None]] = {}
    refresh: list[list[str]] = []
    for record in snapshot.records():
        if record.get("event") != "step-begin":
            continue
        if record.get("kind") == "guest-file":
            files.setdefault(str(record["path"]), set()).update(
                {record.get("sha_before"), record.get("sha_after")})
        elif record.get("kind") == "guest-refresh":
            argv = [str(a) for a in record.get("argv", [])]
            if argv and argv not in refresh:
                refresh.append(_known_refresh(argv, snapshot))
    return files, refresh


def restore_guest_files(ctx: StepContext, snapshot: Snapshot,
                        current: dict[str, str | None], journal: Journal) -> list[str]:
    """The guest files back as the snapshot holds them (the current text kept as a dated copy
    in the guest), then the guest refresh the apply ran, again: through FileStep and
    RefreshStep."""
    _, refresh = guest_changes(snapshot)
    done: list[str] = []
    for path, text in current.items():
        before = snapshot.guest_file_text(path)
        if text == before or before is None:
            continue
        step = FileStep("guest", path, text, before, [], moved=MOVED_WHILE_ROLLING_BACK)
        done.append(_restore(ctx, journal, step, sha256_text(before)))
    for argv in refresh:
        done.append(_refresh_again(ctx, journal, RefreshStep("guest", argv, [])))
    return done


def backup_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


class RollbackResult(BaseModel):
    """What a rollback did (frozen; rendered by the command): what it restored, and notes for
    the admin. `already`: the target matched the snapshot, nothing was written."""

    model_config = ConfigDict(frozen=True)

    snapshot_id: str
    vmid: int
    restored: list[str]
    notes: list[str]
    already: bool = False


def guest_for(snapshot: Snapshot, guest: GuestAccess | None) -> GuestAccess:
    """The way into the guest for a rollback: the one given, else the agent if the apply used
    it (it needs no secret); SSH needs its settings again."""
    if guest is not None:
        return guest
    if snapshot.meta.target.get("guest") == "agent":
        return GuestAccess(method="agent")
    host = snapshot.meta.target.get("guest_ssh") or "HOST"
    raise PvefixError(f"this apply changed files in the guest; give the way into it to restore "
                      f"them: --guest-ssh-host {host} (and its key), or --guest-agent",
                      source=f"snapshot {snapshot.id}")


def guest_moved(snapshot: Snapshot, current: dict[str, str | None]) -> list[str]:
    """Guest files that differ from the snapshot in ways the apply did not make."""
    files, _ = guest_changes(snapshot)
    moved: list[str] = []
    for path, text in current.items():
        sha = None if text is None else sha256_text(text)
        record = next((r for r in snapshot.meta.guest_files if r.path == path), None)
        if record is not None and sha != record.sha256 and sha not in files.get(path, set()):
            moved.append(f"guest {path} sha256 {(record.sha256 or '(absent)')[:12]} -> "
                         f"{(sha or '(absent)')[:12]}")
    return moved


@dataclass
class Differs:
    """What differs between the target and a snapshot: the VM config, and which host files."""

    vm_differs: bool
    files: list[str] = field(default_factory=list)


def what_differs(snapshot: Snapshot, live: HostState) -> Differs:
    files = [r.path for r in snapshot.meta.files
             if r.restorable and r.path in live.files and live.host_files_read
             and live.file(r.path).sha256 != r.sha256]
    vm = live.vm.digest != snapshot.meta.vm.digest or (
        live.vm.config_text != snapshot.vm_config_text())
    return Differs(vm, files)


@dataclass(frozen=True)
class RestartOutlook:
    """What a restart after restoring a snapshot would start: the staged [PENDING] changes the
    start commits, and why Proxmox would refuse that start (then pvefix does not restart)."""

    vmid: int
    staged: list[str]
    cannot_start: list[str]

    def held_back(self, *, running: bool = True) -> str:
        """Why pvefix does not start the VM: said, never done silently."""
        refused = ("with the restored config Proxmox would refuse its start ("
                   + "; ".join(self.cannot_start) + ")")
        fix = f"until the config is fixed (see `qm pending {self.vmid}`)"
        if running:
            return (f"VM {self.vmid} is not restarted: {refused}, which would leave it stopped."
                    f" It runs on as it runs now; its next cold start fails the same way {fix}")
        return f"VM {self.vmid} is not started: {refused}; it stays stopped {fix}"

    def commits(self) -> str:
        return (f"a restart of VM {self.vmid} commits the staged [PENDING] changes the snapshot"
                " holds (" + "; ".join(self.staged) + "): it then runs them, not what ran"
                " before the apply")


def restart_outlook(snapshot: Snapshot) -> RestartOutlook:
    saved = NextStart.from_text(snapshot.vm_config_text(), "snapshot")
    return RestartOutlook(snapshot.meta.vmid, [s.describe() for s in saved.staged()],
                          start_problems(saved.values))


def _restart(sessions: Sessions, node: str, snapshot: Snapshot, options: RollbackOptions,
             say: Callable[[str], None], restored: list[str], notes: list[str]) -> None:
    """--restart: stop the VM and start it again, unless the restored config cannot start."""
    meta = snapshot.meta
    outlook = restart_outlook(snapshot)
    if outlook.cannot_start:
        notes.append(outlook.held_back())
        return
    was_running = shutdown_vm(sessions, node, meta.vmid, timeout=options.shutdown_timeout,
                              force_stop=options.force_stop,
                              task_timeout=options.task_timeout, say=say)
    # It ran when the snapshot was taken (or runs now): it runs again afterwards.
    if was_running or options.start or meta.vm.status == "running":
        saved = NextStart.from_text(snapshot.vm_config_text(), "snapshot")
        start_vm(sessions, node, meta.vmid, task_timeout=options.task_timeout, say=say,
                 machine=saved.value("machine"))
        restored.append(f"VM {meta.vmid} {'restarted' if was_running else 'started'}")
    else:
        notes.append(f"VM {meta.vmid} was stopped (also when the snapshot was taken) "
                     "and is left stopped (--start starts it)")


def restore_snapshot(sessions: Sessions, node: str, snapshot: Snapshot, live: HostState,
                     options: RollbackOptions, say: Callable[[str], None],
                     guest: tuple[GuestChannel, dict[str, str | None]] | None,
                     forced: bool) -> RollbackResult:
    """Restore a snapshot the flow (pvefix.flow.rollback) chose, checked and had confirmed,
    under the VM lock it holds: the VM config, the host files and their refresh, the guest's
    files and their refresh (`guest`: its channel and the files as read), then (--restart) the
    VM stopped and started again. Returns what was restored and notes for the admin."""
    meta = snapshot.meta
    differs = what_differs(snapshot, live)
    journal = snapshot.journal()
    notes: list[str] = []
    journal.record("rollback-begin", forced=forced)
    writer = ApiVmWriter(sessions, node, meta.vmid, options.task_timeout, say)
    done = restore(sessions, node, snapshot, live, journal, writer,
                   None if guest is None else GuestSide(*guest))
    restored = list(done.restored)
    notes += done.skipped
    if options.restart:
        _restart(sessions, node, snapshot, options, say, restored, notes)
    elif live.vm.status == "running" and done.vm_config:
        notes.append(f"VM {meta.vmid} runs on: the restored config takes effect at its next "
                     "cold start (shut down and start it, or re-run with --restart)")
    if differs.files and not options.reboot_host:
        notes.append("the host keeps running the kernel cmdline it booted with until it "
                     "reboots; to reboot it now (every VM on it stops):\n  "
                     + options.context.command(["rollback", str(meta.vmid), "--snapshot",
                                                meta.id, "--reboot-host"], guest=False))
    journal.record("rollback-end", restored=restored)
    return RollbackResult(snapshot_id=meta.id, vmid=meta.vmid, restored=restored, notes=notes)
