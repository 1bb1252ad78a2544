"""What a node's files and its boot tool say: the facts a drift check reads from every node.

Kept apart from HostState (pvefix.state, which re-exports them) so that reading a cluster's
host cmdlines does not build the PCI device and mapping models a plan needs. Pure: command
results in, facts out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from pvefix.cmdline.grubd import is_dropin
from pvefix.digest import sha256_text
from pvefix.errors import PvefixError

if TYPE_CHECKING:  # importing pvefix.target loads the connection settings: a bundle needs none
    from pvefix.target.result import CommandResult

BootLoader = Literal["systemd-boot", "grub", "grub-esp", "unknown"]

# update-grub sources /etc/default/grub.d/*.cfg after /etc/default/grub: list them (no shell
# glob), then read each (`cat`): the plan's reader and check's read the same files.


def dropin_paths(result: CommandResult | None) -> list[str]:
    """The drop-ins the listing (facts.node.GRUB_DROPINS) found (none when it failed: no
    such folder)."""
    if result is None or not result.ok:
        return []
    return sorted(p for p in result.stdout.splitlines() if is_dropin(p))


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FileFact(Frozen):
    """A file as read on the target: its text (None when absent) and the SHA-256 of it."""

    path: str
    text: str | None = None
    sha256: str | None = None

    @classmethod
    def of(cls, path: str, text: str | None) -> FileFact:
        return cls(path=path, text=text, sha256=None if text is None else sha256_text(text))

    @property
    def exists(self) -> bool:
        return self.text is not None


class BootToolFacts(Frozen):
    """`proxmox-boot-tool status`: exit code and output decide where the cmdline lives."""

    exit_code: int | None = None  # None: could not run it
    output: str = ""

    @property
    def loader(self) -> BootLoader:
        """systemd-boot (edit /etc/kernel/cmdline), grub-esp (GRUB on ESPs managed by
        proxmox-boot-tool: /etc/default/grub then `proxmox-boot-tool refresh`), grub (plain
        GRUB: /etc/default/grub then `update-grub`), or unknown."""
        if self.exit_code == 2:
            return "grub"
        if self.exit_code != 0:
            return "unknown"
        words = self.output.lower()
        lines = [ln for ln in words.splitlines() if ln.strip() and "configured with:" in ln]
        kinds = " ".join(lines) if lines else words
        if "uefi" in kinds or "systemd-boot" in kinds:
            return "systemd-boot"
        if "grub" in kinds:
            return "grub-esp"
        return "unknown"


def file_fact(path: str, result: CommandResult | None) -> FileFact:
    """`cat PATH`: its text; None (absent) for "No such file"; other failures are errors."""
    if result is None:
        return FileFact(path=path)
    if result.exit_code == 0:
        return FileFact.of(path, result.stdout)
    if "No such file" in result.stderr:
        return FileFact(path=path)
    raise PvefixError(
        f"cannot read on the node: {result.stderr.strip() or f'exit {result.exit_code}'}",
        source=path)


def boot_tool_facts(result: CommandResult | None) -> BootToolFacts:
    """`proxmox-boot-tool status`; an absent tool (127) leaves the exit code unknown."""
    if result is None or result.exit_code in (126, 127):
        return BootToolFacts(exit_code=None, output="")
    return BootToolFacts(exit_code=result.exit_code, output=result.stdout)
