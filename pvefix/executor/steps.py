"""Steps: each does one write, knows how to undo it, and how to check it landed.

- VmConfigStep: one key of the VM config through the API (or `qm set`), with the digest.
- HostFileStep: a host file (kernel cmdline, /etc/default/grub): a dated backup kept on the
  host, a temporary file beside the target, then a rename.
- RefreshStep: the boot loader refresh (`proxmox-boot-tool refresh`, `update-grub`), its exit
  status checked. Its undo is done by the file's undo, which runs it again once the file is back.
- ManualStep: what pvefix cannot do (no way into the guest): printed, never run.
- Guest steps (pvefix.executor.guest_steps): the guest's /etc/default/grub and update-grub,
  through the guest channel, when the apply has a way into the guest.

Undo reads the target first and does nothing when it is already as before, so undoing a step
that failed half-way (or never wrote) is safe.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pvefix.digest import sha256_text
from pvefix.errors import PvefixError, RefusedError
from pvefix.executor.remote import Remote
from pvefix.executor.snapshot import Snapshot
from pvefix.executor.vmwrite import VmWriter, read_vm
from pvefix.planner.model import Change, Phase, Plan

if TYPE_CHECKING:
    from pvefix.verify.channel import GuestChannel


@dataclass
class StepContext:
    """What steps share during one apply: the remote, the writer and the digest chain."""

    remote: Remote
    vmid: int
    writer: VmWriter
    snapshot: Snapshot
    vm_digest: str
    backup_suffix: str
    refreshed: dict[str, list[list[str]]] = field(default_factory=dict)
    guest: GuestChannel | None = None  # the way into the guest, for guest steps


class UndoConflict(RefusedError):
    """The target no longer holds what pvefix wrote: another writer changed it. Undo leaves
    their change in place (compare-and-swap) and says so; the snapshot stays for
    `pvefix rollback --force`."""


class Step(ABC):
    id: str
    kind: str

    @abstractmethod
    def summary(self) -> str: ...

    @abstractmethod
    def intent(self, ctx: StepContext) -> dict[str, Any]:
        """What the step is about to write (journaled before it runs)."""

    @abstractmethod
    def do(self, ctx: StepContext) -> dict[str, Any]:
        """Write; returns what was written (journaled after it ran)."""

    @abstractmethod
    def undo(self, ctx: StepContext) -> str | None:
        """Put the target back; returns what was undone, None when nothing had to be."""

    def verify(self, ctx: StepContext) -> str | None:
        """None when the write is in place, else what is wrong."""
        return None


def _params(key: str, value: str | None) -> dict[str, str]:
    return {"delete": key} if value is None else {key: value}


class VmConfigStep(Step):
    kind = "vm-config"

    def __init__(self, change: Change) -> None:
        self.change = change
        self.id = change.id
        self.key = change.key

    def summary(self) -> str:
        c = self.change
        return f"VM config {c.key}: {c.before or '(absent)'} -> {c.after or '(deleted)'}"

    def intent(self, ctx: StepContext) -> dict[str, Any]:
        c = self.change
        return {"kind": self.kind, "key": c.key, "before": c.before, "after": c.after,
                "digest": ctx.vm_digest, "writer": ctx.writer.name}

    def do(self, ctx: StepContext) -> dict[str, Any]:
        ctx.writer.write(_params(self.key, self.change.after), ctx.vm_digest)
        view = read_vm(ctx.remote, ctx.vmid)
        ctx.vm_digest = view.digest
        if view.effective(self.key) != self.change.after:
            raise PvefixError(
                f"after the write, {self.key} is {view.effective(self.key)!r}, not "
                f"{self.change.after!r}", source=f"VM {ctx.vmid}",
            )
        return {"digest": view.digest, "pending": view.is_pending(self.key)}

    def undo(self, ctx: StepContext) -> str | None:
        before = self.change.before
        view = read_vm(ctx.remote, ctx.vmid)
        if view.effective(self.key) == before and not (
            view.is_pending(self.key) and view.main.get(self.key) != before
        ):
            ctx.vm_digest = view.digest
            return None
        if view.effective(self.key) != self.change.after:
            # Compare-and-swap: only what pvefix wrote is put back.
            raise UndoConflict(
                f"{self.key} is {view.effective(self.key)!r}, neither what pvefix wrote"
                f" ({self.change.after!r}) nor what was there ({before!r}): another writer"
                " changed it; left as it is", source=f"VM {ctx.vmid}",
            )
        if view.is_pending(self.key):
            # Drop our pending change rather than stack a second one on top of it.
            ctx.writer.write({"revert": self.key}, view.digest)
            view = read_vm(ctx.remote, ctx.vmid)
        if view.effective(self.key) != before:
            ctx.writer.write(_params(self.key, before), view.digest)
            view = read_vm(ctx.remote, ctx.vmid)
        ctx.vm_digest = view.digest
        if view.effective(self.key) != before:
            raise PvefixError(f"could not restore {self.key} to {before!r}",
                              source=f"VM {ctx.vmid}")
        return f"VM config {self.key} back to {before or '(absent)'}"

    def verify(self, ctx: StepContext) -> str | None:
        value = read_vm(ctx.remote, ctx.vmid).effective(self.key)
        if value != self.change.after:
            return f"VM {ctx.vmid} {self.key} is {value!r}, the plan expects {self.change.after!r}"
        return None


class HostFileStep(Step):
    kind = "host-file"

    def __init__(self, path: str, before: str | None, after: str, change_ids: list[str]) -> None:
        self.path = path
        self.before = before
        self.after = after
        self.id = f"file:{path}"
        self.change_ids = change_ids

    def summary(self) -> str:
        return f"host file {self.path} ({', '.join(self.change_ids)})"

    def backup_path(self, ctx: StepContext) -> str:
        return f"{self.path}.pvefix-{ctx.backup_suffix}"

    def intent(self, ctx: StepContext) -> dict[str, Any]:
        return {
            "kind": self.kind, "path": self.path,
            "sha_before": None if self.before is None else sha256_text(self.before),
            "sha_after": sha256_text(self.after), "backup": self.backup_path(ctx),
            "changes": self.change_ids,
        }

    def do(self, ctx: StepContext) -> dict[str, Any]:
        current = ctx.remote.read_file(self.path)
        if current != self.before:
            raise RefusedError(
                "changed on the host since the snapshot was taken; pvefix does not write over "
                "someone else's edit", source=self.path,
            )
        if current is not None:
            # A dated copy stays on the host: the way back even without pvefix.
            ctx.remote.check(["cp", "-p", self.path, self.backup_path(ctx)])
        ctx.remote.write_file(self.path, self.after)
        written = ctx.remote.read_file(self.path)
        if written != self.after:
            raise PvefixError("the file reads back different from what was written",
                              source=self.path)
        return {"sha256": sha256_text(self.after)}

    def undo(self, ctx: StepContext) -> str | None:
        current = ctx.remote.read_file(self.path)
        refresh = ctx.refreshed.get(self.path, [])
        if current == self.before and not refresh:
            return None
        if current not in (self.before, self.after):
            # Compare-and-swap: only what pvefix wrote is put back.
            raise UndoConflict(
                "holds neither what pvefix wrote nor what was there before: another writer"
                " changed it; left as it is", source=self.path,
            )
        if current != self.before:
            if self.before is None:
                ctx.remote.check(["rm", "-f", self.path])
            else:
                ctx.remote.write_file(self.path, self.before)
        for argv in refresh:
            ctx.remote.check(argv)
        ctx.refreshed.pop(self.path, None)
        again = f", then `{' '.join(refresh[0])}` again" if refresh else ""
        return f"host file {self.path} restored{again}"

    def verify(self, ctx: StepContext) -> str | None:
        if ctx.remote.read_file(self.path) != self.after:
            return f"{self.path} does not hold the planned text"
        return None


class RefreshStep(Step):
    kind = "refresh"

    def __init__(self, argv: list[str], files: list[str]) -> None:
        self.argv = argv
        self.files = files
        self.id = "refresh:" + " ".join(argv)

    def summary(self) -> str:
        return f"boot loader: {' '.join(self.argv)}"

    def intent(self, ctx: StepContext) -> dict[str, Any]:
        return {"kind": self.kind, "argv": self.argv, "files": self.files}

    def do(self, ctx: StepContext) -> dict[str, Any]:
        for path in self.files:  # before running: a half-done refresh must be redone on undo
            ctx.refreshed.setdefault(path, []).append(self.argv)
        result = ctx.remote.check(self.argv)
        return {"exit": result.exit_code}

    def undo(self, ctx: StepContext) -> str | None:
        return None  # the file's undo runs the refresh again once the old file is back


class ManualStep(Step):
    kind = "manual"

    def __init__(self, change: Change) -> None:
        self.change = change
        self.id = change.id

    def summary(self) -> str:
        c = self.change
        return f"manual ({c.key}): " + ("; ".join(c.commands) or c.inverse)

    def intent(self, ctx: StepContext) -> dict[str, Any]:
        return {"kind": self.kind, "commands": self.change.commands}

    def do(self, ctx: StepContext) -> dict[str, Any]:
        return {"printed": True}

    def undo(self, ctx: StepContext) -> str | None:
        return None


def build_steps(plan: Plan, phase: Phase, snapshot: Snapshot, *,
                guest: bool = False) -> list[Step]:
    """The steps of a phase, in the plan's order (machine before hostpciN), host files after
    the VM config, then the boot loader refresh, then the guest's file and refresh (`guest`:
    there is a way into it; else they are left to the admin), then what is left to the
    admin."""
    from pvefix.executor.guest_steps import (
        DEFAULT_REFRESH,
        GUEST_GRUB,
        GuestFileStep,
        GuestRefreshStep,
    )

    guest_files: dict[str, list[str]] = {}
    guest_refresh: dict[tuple[str, ...], list[str]] = {}
    vm_steps: list[Step] = []
    files: dict[str, list[str]] = {}
    refresh: dict[tuple[str, ...], list[str]] = {}
    manual: list[Step] = []
    for change in phase.changes:
        if change.target == "vm-config":
            vm_steps.append(VmConfigStep(change))
        elif change.target == "host-cmdline":
            if change.file is None or change.file not in plan.host_files_after:
                raise PvefixError(f"change {change.id} names no file the plan can write")
            files.setdefault(change.file, []).append(change.id)
            if change.refresh_command:
                paths = refresh.setdefault(tuple(change.refresh_command), [])
                if change.file not in paths:
                    paths.append(change.file)
        elif change.target == "guest-cmdline" and guest:
            path = change.file or GUEST_GRUB
            guest_files.setdefault(path, []).append(change.id)
            paths = guest_refresh.setdefault(tuple(change.refresh_command or DEFAULT_REFRESH),
                                             [])
            if path not in paths:
                paths.append(path)
        else:  # guest-cmdline without a way into the guest, and manual steps
            manual.append(ManualStep(change))
    file_steps: list[Step] = [
        HostFileStep(path, snapshot.file_text(path), plan.host_files_after[path], ids)
        for path, ids in files.items()
    ]
    refresh_steps: list[Step] = [RefreshStep(list(argv), paths) for argv, paths in
                                 refresh.items()]
    guest_steps: list[Step] = []
    for path, ids in guest_files.items():
        text = snapshot.guest_file_text(path)
        if text is None:
            raise PvefixError(f"the guest has no {path}: pvefix cannot edit its cmdline (do it "
                              "by hand, see `pvefix plan` without guest access)")
        guest_steps.append(GuestFileStep(path, text, ids))
    guest_steps += [GuestRefreshStep(list(argv), paths) for argv, paths in guest_refresh.items()]
    return [*vm_steps, *file_steps, *refresh_steps, *guest_steps, *manual]
