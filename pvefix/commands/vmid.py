"""VMIDs on the command line: checked as Proxmox checks them (`paths.is_vmid`), so `²`, `0100`,
`5` or `1_000` is a usage error naming the argument, never a traceback or a request."""

from __future__ import annotations

import typer

from pvefix.paths import VMID_RANGE, is_vmid


def not_a_vmid(text: str) -> str:
    """The message for an argument that is not a VMID (the text as repr: no control byte)."""
    return f"{text!r} is not a VMID ({VMID_RANGE}, ASCII digits)"


def parse_vmid(text: str) -> int:
    """typer's `parser=` for a VMID argument or option."""
    if not is_vmid(text):
        raise typer.BadParameter(not_a_vmid(text))
    return int(text)
