"""What an apply left the target as, recorded in its journal's `apply-end`: the VM config digest,
its run state and the hash of each host file, read after the phase (and its activation). A
later phase of the same reviewed plan file uses it to tell pvefix's own writes from anyone
else's (pvefix.flow.reviewed)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pvefix.executor.journal import Record
from pvefix.state import HostState


@dataclass(frozen=True)
class Reached:
    digest: str
    status: str
    files: dict[str, str | None]


def reached_fields(after: HostState) -> dict[str, Any]:
    """The fields `apply-end` records of the target as read after the phase."""
    files = {p: f.sha256 for p, f in sorted(after.files.items())} if after.host_files_read else {}
    return {"vm_digest": after.vm.digest, "vm_status": after.vm.status, "files": files}


def last_reached(records: Iterable[Record]) -> Reached | None:
    """The state an applied phase reached, from its journal (None: not applied, or a journal
    from before pvefix recorded it)."""
    found: Reached | None = None
    for record in records:
        if record.get("event") != "apply-end":
            continue
        digest, files = record.get("vm_digest"), record.get("files")
        if record.get("status") != "applied" or not isinstance(digest, str):
            found = None
            continue
        found = Reached(digest, str(record.get("vm_status")),
                        dict(files) if isinstance(files, dict) else {})
    return found
