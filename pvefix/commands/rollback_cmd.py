"""`pvefix rollback [VMID] [--snapshot ID]`: put a target back as a snapshot holds it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from pvefix.commands.apply_cmd import (
    reboot_timeout_option,
    state_dir_option,
    stop_others_option,
)
from pvefix.commands.guest_options import GuestOptions, guest_options, optional_guest
from pvefix.commands.optgroup import SAFETY, in_panel
from pvefix.commands.options import ConnectionOptions, connection_options
from pvefix.commands.vmid import parse_vmid
from pvefix.errors import EXIT_OK, PvefixError

if TYPE_CHECKING:
    from pvefix.executor.restore import RollbackResult


def render_rollback(result: RollbackResult) -> list[str]:
    """What `pvefix rollback` prints once it is done."""
    if result.already:
        return ["the target already matches the snapshot: nothing to roll back",
                *(f"note: {line}" for line in result.notes)]
    return [*(f"restored: {line}" for line in result.restored),
            *(f"note: {line}" for line in result.notes)]


@in_panel(SAFETY, "yes", "force", "restart", "start", "force_stop", "reboot_host",
          "stop_others", "shutdown_timeout", "task_timeout", "reboot_timeout")
@connection_options
@guest_options
def rollback_command(
    vmid: int | None = typer.Argument(None, parser=parse_vmid, show_default=False,
                                      help="The VM (default: the VM of --snapshot)."),
    snapshot: str | None = typer.Option(None, "--snapshot", "-s", help="Snapshot id (see "
                                        "`pvefix snapshots`; default: the newest one of the VM "
                                        "not rolled back yet).", show_default=False),
    yes: bool = typer.Option(False, "--yes", "-y", help="Roll back without asking."),
    force: bool = typer.Option(False, "--force", help="Restore even though the target changed "
                               "in ways the apply did not make (they are overwritten)."),
    restart: bool = typer.Option(False, "--restart", help="Then shut the VM down cleanly and "
                                 "start it, so the restored config runs."),
    start: bool = typer.Option(False, "--start", help="With --restart: start the VM even if it "
                               "was stopped (otherwise a stopped VM stays stopped)."),
    force_stop: bool = typer.Option(False, "--force-stop", help="With --restart: stop hard "
                                    "when the clean shutdown times out."),
    reboot_host: bool = typer.Option(False, "--reboot-host", help="Then reboot the node so "
                                     "the restored host cmdline runs (also later, when the "
                                     "files are restored and the old line still runs): the "
                                     "same checks of the node's VMs as apply --reboot-host."),
    stop_others: bool = stop_others_option(),
    shutdown_timeout: float = typer.Option(120.0, "--shutdown-timeout", help="Seconds the "
                                           "guest gets to shut down cleanly."),
    task_timeout: float = typer.Option(60.0, "--task-timeout", help="Seconds to wait for a "
                                       "Proxmox task."),
    reboot_timeout: float = reboot_timeout_option(),
    state_dir: Path | None = state_dir_option(),
    *,
    opts: ConnectionOptions,
    guest: GuestOptions,
) -> int:
    """Restore the VM config (byte for byte over SSH), host files and boot loader from a
    snapshot. Refuses (exit 3), showing the diff, when the target has moved since the apply,
    unless --force."""
    from pvefix.commands.options import hint_context, resolve_connection_options
    from pvefix.executor.console import Console
    from pvefix.executor.options import RollbackOptions
    from pvefix.flow.rollback import run_rollback
    from pvefix.store.statedir import open_state_dir

    if vmid is None and snapshot is None:
        raise PvefixError("name the VM (VMID) or the snapshot (--snapshot ID)")
    if opts.bundle is not None:
        raise PvefixError("rollback writes to a live target: a bundle (--bundle) is read-only")
    options = RollbackOptions(yes=yes, force=force, restart=restart, start=start,
                              force_stop=force_stop, reboot_host=reboot_host,
                              stop_others=stop_others, reboot_timeout=reboot_timeout,
                              shutdown_timeout=shutdown_timeout, task_timeout=task_timeout,
                              context=hint_context(opts, state_dir, guest))
    console = Console()
    result = run_rollback(resolve_connection_options(opts), open_state_dir(state_dir), vmid,
                          snapshot, options, console, optional_guest(guest))
    for line in render_rollback(result):
        console.say_wrapped(line)  # a digest or a path, one word, stays whole
    return EXIT_OK
