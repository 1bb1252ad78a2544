"""Guest steps: the guest kernel's cmdline, changed through the guest channel (SSH or agent).

- GuestFileStep: GRUB_CMDLINE_LINUX_DEFAULT in the guest's /etc/default/grub gets
  `pci=realloc` (pvefix.cmdline.GrubDefaultFile, so quoting, `pci=realloc=off` and the rest of
  the file are handled as for the host). A dated backup stays in the guest
  (`/etc/default/grub.pvefix-YYYYmmddTHHMMSSZ`); the new text goes to a temporary file that is
  renamed over the old one. Undo copies the backup back (again through a temporary file and a
  rename) and runs the refresh again.
- GuestRefreshStep: `update-grub` in the guest, its exit status checked; undone by the file's
  undo, which runs it again once the old file is back.

The guest file's text before comes from the snapshot (read just before it was taken), and
the step refuses to write when the guest's file has moved since.
"""

from __future__ import annotations

from typing import Any

from pvefix.cmdline import GrubDefaultFile
from pvefix.digest import sha256_text
from pvefix.errors import PvefixError, RefusedError
from pvefix.executor.steps import Step, StepContext, UndoConflict
from pvefix.verify.channel import GuestChannel
from pvefix.verify.guest_files import (
    REFRESH_TIMEOUT_S,
    guest_check,
    read_guest_file,
    replace_guest_file,
    temp_path,
)

GUEST_GRUB = "/etc/default/grub"
DEFAULT_REFRESH = ("update-grub",)


def with_pci_realloc(text: str) -> str:
    """The guest's /etc/default/grub with pci=realloc in effect (ParseError if it cannot)."""
    grub = GrubDefaultFile.parse(text, f"guest {GUEST_GRUB}")
    grub.ensure_pci_option("realloc")
    return grub.render()


def refresh_key(path: str) -> str:
    """Where StepContext.refreshed keeps a guest file's refresh commands (host paths differ)."""
    return f"guest:{path}"


def _channel(ctx: StepContext) -> GuestChannel:
    if ctx.guest is None:
        raise PvefixError("this step runs in the guest, and there is no way into it")
    return ctx.guest


class GuestFileStep(Step):
    kind = "guest-file"

    def __init__(self, path: str, before: str, change_ids: list[str]) -> None:
        self.path = path
        self.before = before
        self.after = with_pci_realloc(before)
        self.id = f"guest-file:{path}"
        self.change_ids = change_ids

    def summary(self) -> str:
        return f"guest file {self.path} ({', '.join(self.change_ids)})"

    def backup_path(self, ctx: StepContext) -> str:
        return f"{self.path}.pvefix-{ctx.backup_suffix}"

    def intent(self, ctx: StepContext) -> dict[str, Any]:
        return {
            "kind": self.kind, "path": self.path, "sha_before": sha256_text(self.before),
            "sha_after": sha256_text(self.after), "backup": self.backup_path(ctx),
            "changes": self.change_ids, "via": _channel(ctx).where,
        }

    def do(self, ctx: StepContext) -> dict[str, Any]:
        channel = _channel(ctx)
        if read_guest_file(channel, self.path) != self.before:
            raise RefusedError("changed in the guest since the snapshot was taken; pvefix does "
                               "not write over someone else's edit", source=f"guest {self.path}")
        guest_check(channel, ["cp", "-p", self.path, self.backup_path(ctx)])
        replace_guest_file(channel, self.path, self.after)
        if read_guest_file(channel, self.path) != self.after:
            raise PvefixError("the file reads back different from what was written",
                              source=f"guest {self.path}")
        return {"sha256": sha256_text(self.after), "backup": self.backup_path(ctx)}

    def undo(self, ctx: StepContext) -> str | None:
        channel = _channel(ctx)
        refresh = ctx.refreshed.get(refresh_key(self.path), [])
        current = read_guest_file(channel, self.path)
        if current == self.before and not refresh:
            return None
        how = ""
        if current != self.before:
            if current != self.after:
                # Compare-and-swap, as on the host: only what pvefix wrote is put back.
                raise UndoConflict(
                    "holds neither what pvefix wrote nor what was there before: another "
                    "writer changed it; left as it is", source=f"guest {self.path}")
            backup = self.backup_path(ctx)
            if read_guest_file(channel, backup) == self.before:
                tmp = temp_path(self.path)
                guest_check(channel, ["cp", "-p", backup, tmp])
                guest_check(channel, ["mv", "-f", tmp, self.path])
                how = f" from {backup}"
            else:  # the backup was never made (the step failed before): the snapshot's text
                replace_guest_file(channel, self.path, self.before)
            if read_guest_file(channel, self.path) != self.before:
                raise PvefixError("could not put the old text back", source=f"guest {self.path}")
        for argv in refresh:
            guest_check(channel, argv, REFRESH_TIMEOUT_S)
        ctx.refreshed.pop(refresh_key(self.path), None)
        again = f", then `{' '.join(refresh[0])}` again" if refresh else ""
        return f"guest file {self.path} restored{how}{again}"

    def verify(self, ctx: StepContext) -> str | None:
        if read_guest_file(_channel(ctx), self.path) != self.after:
            return f"the guest's {self.path} does not hold the planned text"
        return None


class GuestRefreshStep(Step):
    kind = "guest-refresh"

    def __init__(self, argv: list[str], files: list[str]) -> None:
        self.argv = argv
        self.files = files
        self.id = "guest-refresh:" + " ".join(argv)

    def summary(self) -> str:
        return f"guest boot loader: {' '.join(self.argv)}"

    def intent(self, ctx: StepContext) -> dict[str, Any]:
        return {"kind": self.kind, "argv": self.argv, "files": self.files}

    def do(self, ctx: StepContext) -> dict[str, Any]:
        for path in self.files:  # before running: a half-done refresh must be redone on undo
            ctx.refreshed.setdefault(refresh_key(path), []).append(self.argv)
        result = guest_check(_channel(ctx), self.argv, REFRESH_TIMEOUT_S)
        return {"exit": result.exit_code}

    def undo(self, ctx: StepContext) -> str | None:
        return None  # the file's undo runs it again once the old file is back
