"""The result of a drift check: one item per VM (or node) and property, and the exit code."""

from __future__ import annotations

import builtins
from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pvefix.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK

Status = Literal["ok", "drift", "unknown", "skipped"]
#: Where an item's `got` was read: the VM config, its [PENDING] section, the running QEMU, the
#: node's configured or booted kernel cmdline, the guest's booted cmdline, the rehearsal of the
#: VM's next start on its node (`check --rehearse`) ("" when unread).
Where = Literal["config", "pending", "running", "configured", "booted", "guest", "rehearsal", ""]
#: `want` of a presence rule (`hostpciN` must be there, whatever its value).
PRESENT = "(present)"
REPORT_SCHEMA = "pvefix.check/v1"

# The two labels for drift that is real but not yet (or no longer) in effect.
AT_COLD_START = "takes effect at the next cold start"
AT_HOST_REBOOT = "takes effect at the next host reboot"


class CheckItem(BaseModel):
    """One property of one VM or node, and whether it holds.

    `expected` / `actual` are short texts for the diff; `when` labels drift that lives only in
    [PENDING] or only in the configured-but-not-booted cmdline (it still counts as drift).
    `key`, `want`, `got` and `where` say the same for scripts: the config key (`hostpci0.pcie`,
    `machine`, `args:hostpci0`, `*` for unexpected keys) or `cmdline:NAME` /
    `guest-cmdline:NAME`; the value wanted (None: must be absent); the value read (None:
    absent) where it first fails (the config before [PENDING], configured before booted).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: Literal["vm", "node"]
    vmid: int | None = None
    node: str
    property: str
    status: Status
    expected: str = ""
    actual: str = ""
    when: str | None = None
    detail: str = ""
    key: str = ""
    want: str | None = None
    got: str | None = None
    where: Where = ""

    @builtins.property
    def subject(self) -> str:
        return f"VM {self.vmid}" if self.target == "vm" else f"node {self.node}"


class CheckReport(BaseModel):
    """Everything a check found, in a stable order (nodes by name, then VMs by VMID)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    items: list[CheckItem] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    source: str = ""
    read_path: str | None = Field(
        default=None, description='how a live cluster was read: "bulk" or "per-vm"')
    rehearsals: list[dict[str, Any]] | None = Field(
        default=None, exclude_if=lambda v: v is None,  # in the document only with --rehearse
        description="with --rehearse: each rehearsed VM's verdict (pvefix.rehearse/v1)")

    def counts(self) -> dict[Status, int]:
        """How many items have each status, in one pass (a fleet's report holds 60,000)."""
        found = Counter(item.status for item in self.items)
        return {s: found[s] for s in ("ok", "drift", "unknown", "skipped")}

    def count(self, status: Status) -> int:
        return self.counts()[status]

    @property
    def drifted(self) -> list[CheckItem]:
        return [i for i in self.items if i.status == "drift"]

    @property
    def exit_code(self) -> int:
        """1 when something asked for could not be checked, else 2 on drift, else 0."""
        return exit_code_of(self.counts())

    def subjects(self) -> list[tuple[str, list[CheckItem]]]:
        """Items grouped by VM or node, in report order."""
        groups: dict[str, list[CheckItem]] = {}
        for item in self.items:
            groups.setdefault(item.subject, []).append(item)
        return list(groups.items())

    def json_fields(self) -> dict[str, Any]:
        """Every field of the pvefix.check/v1 document but `items`, in the document's order
        (`items` goes before `notes`; render_json writes the items, one line each);
        `rehearsals` only with --rehearse."""
        counts = self.counts()
        return {
            "schema": REPORT_SCHEMA,
            "source": self.source,
            "read_path": self.read_path,
            "exit_code": exit_code_of(counts),
            "summary": counts,
            "notes": list(self.notes),
            **({} if self.rehearsals is None else {"rehearsals": list(self.rehearsals)}),
        }


def exit_code_of(counts: dict[Status, int]) -> int:
    """A report's exit code from its counts (CheckReport.counts)."""
    if counts["unknown"]:
        return EXIT_ERROR
    if counts["drift"]:
        return EXIT_CHANGES
    return EXIT_OK
