"""The admin's staged changes and pvefix's writes: what a planned write does to [PENDING].

The planner decides from the VM's next start (pvefix.vmconfig.nextstart), so a write of a key
with a staged value builds on that value. Proxmox takes a key off the pending deletes when the
key is written, and drops a key's pending value when it is deleted (qemu-server API2/Qemu.pm
update_vm_api): a planned write that revives a staged delete or drops a staged value says so
as a risk naming the staged change.
"""

from __future__ import annotations

from pvefix.planner.context import Context
from pvefix.planner.model import Change, Risk

_LEVELS = ("low", "medium", "high")


def _risk(change: Change, text: str) -> Risk:
    level = max(change.risk.level, "medium", key=_LEVELS.index)
    return Risk(level=level, text=f"{change.risk.text} {text}".strip(),
                mitigation=change.risk.mitigation)


def keep_staged(ctx: Context, changes: list[Change]) -> list[Change]:
    """Each VM config change that touches a staged key, with that said: as evidence when the
    write builds on the staged value, as a risk when it revives a staged delete or drops a
    staged value."""
    out: list[Change] = []
    for c in changes:
        staged = ctx.next.staged_for(c.key) if c.target == "vm-config" else None
        if staged is None:
            out.append(c)
            continue
        what = f"`{staged.describe()}`"
        if staged.value is None and c.after is not None:
            risk = _risk(c, f"{c.key} is staged for deletion in [PENDING] ({what}); writing it"
                         " takes it off the pending deletes (Proxmox, update_vm_api), so the"
                         f" next start has {c.key} again.")
            out.append(c.model_copy(update={"risk": risk}))
        elif staged.value is not None and c.after is None:
            risk = _risk(c, f"{c.key} has a staged value in [PENDING] ({what}); deleting {c.key}"
                         " drops it.")
            out.append(c.model_copy(update={"risk": risk}))
        elif staged.value is not None:
            note = f"staged in [PENDING]: {what}; this change builds on it and replaces it"
            out.append(c.model_copy(update={"evidence": [*c.evidence, note]}))
        else:
            out.append(c)
    return out
