"""Command line entry point. Kept thin: parse options, call one function, render, exit.

Heavy modules (paramiko, proxmoxer, jinja2, the simulator) are imported inside the commands
that use them, so `pvefix --version` and `--help` start fast.
"""

from __future__ import annotations

from typing import Any

import typer

from pvefix import __version__
from pvefix.commands import (
    apply_cmd,
    check_cmd,
    collect_cmd,
    desired_cmd,
    inspect_cmd,
    plan_cmd,
    probe_cmd,
    rollback_cmd,
    sim_cmd,
    snapshots_cmd,
    verify_cmd,
)
from pvefix.commands.clihelp import finish_help

app = typer.Typer(
    name="pvefix",
    help="Plan, apply, roll back and drift-check multi-GPU passthrough fixes on Proxmox VE.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(inspect_cmd.app, name="inspect")
app.add_typer(probe_cmd.app, name="probe")
app.add_typer(sim_cmd.app, name="sim")
app.add_typer(collect_cmd.app, name="collect")
app.command("plan")(plan_cmd.plan_command)
app.command("apply")(apply_cmd.apply_command)
app.command("rollback")(rollback_cmd.rollback_command)
app.command("snapshots")(snapshots_cmd.snapshots_command)
app.command("check")(check_cmd.check_command)
app.command("desired")(desired_cmd.desired_command)
app.command("verify")(verify_cmd.verify_command)


def build_command() -> Any:
    """The click command tree, with readable metavars and an example per command."""
    return finish_help(typer.main.get_command(app))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pvefix {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", help="Print pvefix's version and exit.", callback=_version,
        is_eager=True,
    ),
) -> None:
    """pvefix: make multi-GPU passthrough on Proxmox VE right, safely (dry run by default)."""
