"""Roll a snapshot back (the executor's half; pvefix.flow.rollback picks, checks and confirms):
the restore stage (pvefix.executor.restore: the VM config, the host files and their refresh,
the guest's files the apply changed, through the guest channel: --guest-agent /
--guest-ssh-host, or the agent when the apply used it), then (--restart) the VM stopped and
started again, unless the restored config cannot start. The flow refuses, showing the diff,
when the target has moved in ways the apply did not make, unless forced."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from pvefix.digest import sha256_text
from pvefix.errors import PvefixError
from pvefix.executor.activation import shutdown_vm, start_vm
from pvefix.executor.remote import Remote
from pvefix.executor.restore import GuestSide, guest_changes, restore
from pvefix.executor.snapshot import Snapshot
from pvefix.executor.vmwrite import ApiVmWriter
from pvefix.hints import Context
from pvefix.state import HostState
from pvefix.target.guest.access import GuestAccess
from pvefix.target.guest.channel import GuestChannel
from pvefix.vmconfig.nextstart import NextStart, start_problems


@dataclass(frozen=True)
class RollbackOptions:
    yes: bool = False
    force: bool = False
    restart: bool = False
    start: bool = False  # with --restart: start the VM even if it was stopped
    force_stop: bool = False
    shutdown_timeout: float = 120.0
    task_timeout: float = 60.0
    reboot_host: bool = False  # reboot the node so the restored host cmdline runs
    stop_others: bool = False  # with reboot_host: shut other running VMs down cleanly first
    reboot_timeout: float = 900.0
    context: Context = field(default_factory=Context)  # what printed commands carry


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
        live.vm.config_text != snapshot.vm_config_text()
    )
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


def _restart(remote: Remote, snapshot: Snapshot, options: RollbackOptions,
             say: Callable[[str], None], restored: list[str], notes: list[str]) -> None:
    """--restart: stop the VM and start it again, unless the restored config cannot start."""
    meta = snapshot.meta
    outlook = restart_outlook(snapshot)
    if outlook.cannot_start:
        notes.append(outlook.held_back())
        return
    was_running = shutdown_vm(remote, meta.vmid, timeout=options.shutdown_timeout,
                              force_stop=options.force_stop,
                              task_timeout=options.task_timeout, say=say)
    # It ran when the snapshot was taken (or runs now): it runs again afterwards.
    if was_running or options.start or meta.vm.status == "running":
        saved = NextStart.from_text(snapshot.vm_config_text(), "snapshot")
        start_vm(remote, meta.vmid, task_timeout=options.task_timeout, say=say,
                 machine=saved.value("machine"))
        restored.append(f"VM {meta.vmid} {'restarted' if was_running else 'started'}")
    else:
        notes.append(f"VM {meta.vmid} was stopped (also when the snapshot was taken) "
                     "and is left stopped (--start starts it)")


def restore_snapshot(remote: Remote, snapshot: Snapshot, live: HostState,
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
    writer = ApiVmWriter(remote, meta.vmid, options.task_timeout)
    done = restore(remote, snapshot, live, journal, writer,
                   None if guest is None else GuestSide(*guest))
    restored = list(done.restored)
    notes += done.skipped
    if options.restart:
        _restart(remote, snapshot, options, say, restored, notes)
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
