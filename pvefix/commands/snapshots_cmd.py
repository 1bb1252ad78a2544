"""`pvefix snapshots [VMID]`: the snapshots in the state directory (id, time, phase, state,
what each holds)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from pvefix.commands.apply_cmd import state_dir_option
from pvefix.commands.vmid import parse_vmid
from pvefix.errors import EXIT_OK


def snapshots_command(
    vmid: int | None = typer.Argument(None, parser=parse_vmid, help="Only this VM's snapshots.",
                                      show_default=False),
    as_json: bool = typer.Option(False, "--json", help="JSON (a list of snapshot metadata "
                                 "with a status field) instead of text."),
    state_dir: Path | None = state_dir_option(),
) -> int:
    """List pvefix's snapshots, oldest first."""
    from pvefix.executor.snapshot import list_snapshots
    from pvefix.store.statedir import open_state_dir

    root = open_state_dir(state_dir)
    found = list_snapshots(root, vmid)
    if as_json:
        items = []
        for snap in found:
            data = snap.meta.model_dump(mode="json", by_alias=True)
            data["status"] = snap.status()
            data["path"] = str(snap.path)
            items.append(data)
        print(json.dumps(items, indent=2))
        return EXIT_OK
    if not found:
        print(f"no snapshots in {root}" + (f" for VM {vmid}" if vmid is not None else ""))
        return EXIT_OK
    from pvefix.console.terminal import terminal

    term = terminal(sys.stdout)
    for snap in found:
        meta = snap.meta
        # One line per snapshot at 80 columns: its time to the second, in UTC (the JSON keeps
        # the stored value); what it holds filled under it.
        print(term.fit(f"{meta.id}  {meta.created()}  VM {meta.vmid}  phase "
                       f"{meta.phase}  {snap.status()}", hang=4))
        print(term.wrap(f"holds: {'; '.join(meta.holds())}", "    "))
    return EXIT_OK

