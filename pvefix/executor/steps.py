"""Steps: each does one write, knows how to undo it, and how to check it landed.

- VmConfigStep: one key of the VM config through the API (or `qm set`), with the digest.
- FileStep: a file on the node (kernel cmdline, /etc/default/grub) or in the guest (its
  /etc/default/grub), through a node or the guest channel (pvefix.target.guest.channel
  `Files`: the node re-asked on each use, pvefix.target.node.ReopeningNode): a dated backup kept
  beside it, a temporary file beside the target, then a rename; read back.
- RefreshStep: the boot loader refresh on the node (`proxmox-boot-tool refresh`, `update-grub`)
  or in the guest (`update-grub`), its exit status checked. Its undo is done by the file's
  undo, which runs it again once the file is back.
- ManualStep: what pvefix cannot do (no way into the guest): printed, never run.

Undo reads the target first and does nothing when it is already as before, so undoing a step
that failed half-way (or never wrote) is safe; it puts back only what pvefix wrote
(compare-and-swap: UndoConflict otherwise). Rollback restores files and runs the refresh
again through these same steps (pvefix.executor.restore, the restore stage).

A new kind of write is a Step here, built in `build_steps` (whose dispatch mypy checks is
exhaustive over the plan's change kinds).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

from pvefix.digest import sha256_text
from pvefix.errors import PvefixError, RefusedError
from pvefix.executor.snapshot import Snapshot
from pvefix.executor.vmwrite import VmWriter, digest_of, read_vm
from pvefix.planner.model import Change, Phase, Plan, VmConfigChange
from pvefix.target.guest.channel import REFRESH_TIMEOUT_S, Files, GuestChannel, check
from pvefix.target.node import ReopeningNode
from pvefix.target.sessions import Sessions
from pvefix.vmconfig.nextstart import NextStart

Side = Literal["host", "guest"]

#: The guest's boot loader refresh when a plan names none.
DEFAULT_GUEST_REFRESH = ("update-grub",)


@dataclass
class StepContext:
    """What steps share during one apply (or rollback): the command's sessions (the API the
    VM config is read through), the node (its name, files and commands), the VM writer, the
    digest chain, and the way into the guest when there is one."""

    sessions: Sessions
    vmid: int
    writer: VmWriter
    vm_digest: str
    backup_suffix: str
    node: ReopeningNode
    refreshed: dict[str, list[list[str]]] = field(default_factory=dict)
    guest: GuestChannel | None = None  # the way into the guest, for guest steps

    def read_vm(self) -> NextStart:
        """The VM config as it is now (pvefix.executor.vmwrite.read_vm)."""
        return read_vm(self.sessions, self.node.name, self.vmid)

    def files(self, side: Side) -> Files:
        if side == "host":
            return self.node
        if self.guest is None:
            raise PvefixError("this step runs in the guest, and there is no way into it")
        return self.guest


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

    def __init__(self, change: VmConfigChange) -> None:
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
        view = ctx.read_vm()
        ctx.vm_digest = digest_of(view)
        if view.value(self.key) != self.change.after:
            raise PvefixError(
                f"after the write, {self.key} is {view.value(self.key)!r}, not "
                f"{self.change.after!r}", source=f"VM {ctx.vmid}")
        return {"digest": digest_of(view), "pending": view.is_staged(self.key)}

    def undo(self, ctx: StepContext) -> str | None:
        before = self.change.before
        view = ctx.read_vm()
        if view.value(self.key) == before and not (
            view.is_staged(self.key) and view.current.get(self.key) != before
        ):
            ctx.vm_digest = digest_of(view)
            return None
        if view.value(self.key) != self.change.after:
            # Compare-and-swap: only what pvefix wrote is put back.
            raise UndoConflict(
                f"{self.key} is {view.value(self.key)!r}, neither what pvefix wrote"
                f" ({self.change.after!r}) nor what was there ({before!r}): another writer"
                " changed it; left as it is", source=f"VM {ctx.vmid}")
        if view.is_staged(self.key):
            # Drop our pending change rather than stack a second one on top of it.
            ctx.writer.write({"revert": self.key}, digest_of(view))
            view = ctx.read_vm()
        if view.value(self.key) != before:
            ctx.writer.write(_params(self.key, before), digest_of(view))
            view = ctx.read_vm()
        ctx.vm_digest = digest_of(view)
        if view.value(self.key) != before:
            raise PvefixError(f"could not restore {self.key} to {before!r}",
                              source=f"VM {ctx.vmid}")
        return f"VM config {self.key} back to {before or '(absent)'}"

    def verify(self, ctx: StepContext) -> str | None:
        value = ctx.read_vm().value(self.key)
        if value != self.change.after:
            return f"VM {ctx.vmid} {self.key} is {value!r}, the plan expects {self.change.after!r}"
        return None


class VmConfigBatch(Step):
    """Every VM config change of a phase in ONE write, guarded by the digest the snapshot was
    read with: used without SSH, where no lock on the node can be taken. A second pvefix then
    reads the config before this write or after it, never half-written, and its own write with
    the older digest is refused by Proxmox (compare-and-swap through the API). The journal
    names each key; undo is each key's compare-and-swap undo, in reverse."""

    kind = "vm-config-batch"

    def __init__(self, steps: list[VmConfigStep]) -> None:
        self.steps = steps
        self.refused = False
        self.id = "vm-config:" + ",".join(s.key for s in steps)

    def summary(self) -> str:
        return "; ".join(s.summary() for s in self.steps) + " (one write)"

    def intent(self, ctx: StepContext) -> dict[str, Any]:
        return {"kind": self.kind, "changes": [s.intent(ctx) for s in self.steps],
                "digest": ctx.vm_digest, "writer": ctx.writer.name}

    def do(self, ctx: StepContext) -> dict[str, Any]:
        params = {s.key: s.change.after for s in self.steps if s.change.after is not None}
        deletes = [s.key for s in self.steps if s.change.after is None]
        try:
            ctx.writer.write({**params, **({"delete": ",".join(deletes)} if deletes else {})},
                             ctx.vm_digest)
        except RefusedError:
            self.refused = True  # Proxmox refused the write (digest): nothing to undo
            raise
        view = ctx.read_vm()
        ctx.vm_digest = digest_of(view)
        wrong = [f"{s.key} is {view.value(s.key)!r}, not {s.change.after!r}"
                 for s in self.steps if view.value(s.key) != s.change.after]
        if wrong:
            raise PvefixError("after the write, " + "; ".join(wrong), source=f"VM {ctx.vmid}")
        return {"digest": digest_of(view),
                "pending": [s.key for s in self.steps if view.is_staged(s.key)]}

    def undo(self, ctx: StepContext) -> str | None:
        if self.refused:  # another writer's equal values are not pvefix's to undo
            return None
        done = [what for s in reversed(self.steps) if (what := s.undo(ctx))]
        return "; ".join(done) or None

    def verify(self, ctx: StepContext) -> str | None:
        return next((p for s in self.steps if (p := s.verify(ctx))), None)


_WHERE = {"host": "on the host", "guest": "in the guest"}
#: The journal's names for file and refresh steps on each side (rollback reads them back).
FILE_KIND: dict[Side, str] = {"host": "host-file", "guest": "guest-file"}
REFRESH_KIND: dict[Side, str] = {"host": "refresh", "guest": "guest-refresh"}


def _label(side: Side, path: str) -> str:
    return path if side == "host" else f"guest {path}"


def refresh_key(side: Side, path: str) -> str:
    """Where StepContext.refreshed keeps a file's refresh commands (a guest path is not the
    node's path of the same name)."""
    return path if side == "host" else f"guest:{path}"


class FileStep(Step):
    """One file on the node or in the guest: `before` (None: absent) becomes `after` (None:
    removed). Refuses to write over a file that no longer holds `before` (`moved` says why);
    keeps the old file beside it as PATH.pvefix-STAMP."""

    def __init__(self, side: Side, path: str, before: str | None, after: str | None,
                 change_ids: list[str], *, moved: str | None = None) -> None:
        self.side = side
        self.path = path
        self.before = before
        self.after = after
        self.change_ids = change_ids
        self.kind = FILE_KIND[side]
        self.id = f"file:{path}" if side == "host" else f"guest-file:{path}"
        self.moved = moved or (f"changed {_WHERE[side]} since the snapshot was taken; pvefix "
                               "does not write over someone else's edit")

    @property
    def label(self) -> str:
        return _label(self.side, self.path)

    def summary(self) -> str:
        return f"{self.side} file {self.path} ({', '.join(self.change_ids)})"

    def backup_path(self, ctx: StepContext) -> str:
        return f"{self.path}.pvefix-{ctx.backup_suffix}"

    def intent(self, ctx: StepContext) -> dict[str, Any]:
        intent: dict[str, Any] = {
            "kind": self.kind, "path": self.path,
            "sha_before": None if self.before is None else sha256_text(self.before),
            "sha_after": None if self.after is None else sha256_text(self.after),
            "backup": self.backup_path(ctx), "changes": self.change_ids}
        if self.side == "guest":
            intent["via"] = ctx.files(self.side).where
        return intent

    def do(self, ctx: StepContext) -> dict[str, Any]:
        target = ctx.files(self.side)
        current = target.read_file(self.path)
        if current != self.before:
            raise RefusedError(self.moved, source=self.label)
        if current is not None:
            # A dated copy stays beside it: the way back even without pvefix.
            check(target, ["cp", "-p", self.path, self.backup_path(ctx)])
        self._put(target, self.after)
        return {"sha256": None if self.after is None else sha256_text(self.after),
                "backup": self.backup_path(ctx) if current is not None else None}

    def _put(self, target: Files, text: str | None) -> None:
        if text is None:
            check(target, ["rm", "-f", self.path])
        else:
            target.replace_file(self.path, text)
        if target.read_file(self.path) != text:
            raise PvefixError("the file reads back different from what was written",
                              source=self.label)

    def undo(self, ctx: StepContext) -> str | None:
        target = ctx.files(self.side)
        key = refresh_key(self.side, self.path)
        refresh = ctx.refreshed.get(key, [])
        current = target.read_file(self.path)
        if current == self.before and not refresh:
            return None
        if current not in (self.before, self.after):
            # Compare-and-swap: only what pvefix wrote is put back.
            raise UndoConflict(
                "holds neither what pvefix wrote nor what was there before: another writer"
                " changed it; left as it is", source=self.label)
        if current != self.before:
            self._put(target, self.before)
        for argv in refresh:
            check(target, argv, REFRESH_TIMEOUT_S)
        ctx.refreshed.pop(key, None)
        again = f", then `{' '.join(refresh[0])}` again" if refresh else ""
        return f"{self.side} file {self.path} restored{again}"

    def verify(self, ctx: StepContext) -> str | None:
        if ctx.files(self.side).read_file(self.path) != self.after:
            return f"{self.label} does not hold the planned text"
        return None


class RefreshStep(Step):
    """The boot loader refresh after `files` changed, on the node or in the guest."""

    def __init__(self, side: Side, argv: list[str], files: list[str]) -> None:
        self.side = side
        self.argv = argv
        self.files = files
        self.kind = REFRESH_KIND[side]
        self.id = f"{self.kind}:" + " ".join(argv)

    def summary(self) -> str:
        where = "boot loader" if self.side == "host" else "guest boot loader"
        return f"{where}: {' '.join(self.argv)}"

    def intent(self, ctx: StepContext) -> dict[str, Any]:
        return {"kind": self.kind, "argv": self.argv, "files": self.files}

    def do(self, ctx: StepContext) -> dict[str, Any]:
        for path in self.files:  # before running: a half-done refresh must be redone on undo
            ctx.refreshed.setdefault(refresh_key(self.side, path), []).append(self.argv)
        result = check(ctx.files(self.side), self.argv, REFRESH_TIMEOUT_S)
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
                guest: bool = False, one_vm_write: bool = False) -> list[Step]:
    """The steps of a phase, in the plan's order (machine before hostpciN), host files after
    the VM config, then the boot loader refresh, then the guest's file and refresh (`guest`:
    there is a way into it; else they are left to the admin), then what is left to the
    admin. `one_vm_write` (no SSH): the VM config changes as one VmConfigBatch."""
    vm_steps: list[Step] = []
    files: dict[tuple[Side, str], list[str]] = {}
    refresh: dict[tuple[Side, tuple[str, ...]], list[str]] = {}
    manual: list[Step] = []
    for change in phase.changes:
        if change.target == "vm-config":
            vm_steps.append(VmConfigStep(change))
        elif change.target == "host-cmdline":
            if change.file not in plan.host_files_after:
                raise PvefixError(f"change {change.id} names no file the plan can write")
            _add(files, refresh, "host", change.file, change.id, change.refresh_command)
        elif change.target == "guest-cmdline":
            if not guest:
                manual.append(ManualStep(change))
                continue
            if snapshot.guest_file_text(change.file) is None:
                raise PvefixError(f"the guest has no {change.file}: pvefix cannot edit its "
                                  "cmdline (do it by hand, see `pvefix plan` without guest "
                                  "access)")
            if change.file not in plan.guest_files_after:
                raise PvefixError(f"change {change.id} names no guest file the plan can write")
            _add(files, refresh, "guest", change.file, change.id,
                 change.refresh_command or list(DEFAULT_GUEST_REFRESH))
        elif change.target == "manual":
            manual.append(ManualStep(change))
        elif change.target == "host-boot":
            continue  # configured, not yet booted: nothing to write, the reboot activates it
        else:
            assert_never(change)
    ordered: list[Step] = []
    for side in ("host", "guest"):
        ordered += [FileStep(side, path, _before(snapshot, side, path), _after(plan, side, path),
                             ids) for (on, path), ids in files.items() if on == side]
        ordered += [RefreshStep(side, list(argv), paths)
                    for (on, argv), paths in refresh.items() if on == side]
    if one_vm_write and len(vm_steps) > 1:
        vm_steps = [VmConfigBatch([s for s in vm_steps if isinstance(s, VmConfigStep)])]
    return [*vm_steps, *ordered, *manual]


def _add(files: dict[tuple[Side, str], list[str]],
         refresh: dict[tuple[Side, tuple[str, ...]], list[str]], side: Side, path: str,
         change_id: str, argv: list[str] | None) -> None:
    files.setdefault((side, path), []).append(change_id)
    if argv:
        paths = refresh.setdefault((side, tuple(argv)), [])
        if path not in paths:
            paths.append(path)


def _before(snapshot: Snapshot, side: Side, path: str) -> str | None:
    return snapshot.file_text(path) if side == "host" else snapshot.guest_file_text(path)


def _after(plan: Plan, side: Side, path: str) -> str:
    return plan.host_files_after[path] if side == "host" else plan.guest_files_after[path]
