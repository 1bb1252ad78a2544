"""`pvefix collect`: a script to gather a host tree from a console, and its import."""

from __future__ import annotations

from pathlib import Path

import typer

from pvefix.commands.vmid import parse_vmid

app = typer.Typer(
    help="Gather a host tree on a host you reach only by console, and import it.",
    no_args_is_help=True,
)


@app.command("script")
def script(
    vmid: list[int] = typer.Option(
        [], "--vmid", parser=parse_vmid,
        help="Only this VM's config and run state (repeat; default: all VMs)."),
) -> None:
    """Print the POSIX sh script to paste into the host's console as root."""
    from pvefix.collect.script import render_script

    typer.echo(render_script(vmid), nl=False)


@app.command("import")
def import_(
    bundle: Path = typer.Argument(..., help="The tarball the script wrote, or its folder."),
    dest: Path = typer.Argument(..., help="New (or empty) folder for the host tree."),
) -> None:
    """Unpack a bundle safely, write its pvefix-host.json, validate it and summarize it."""
    from pvefix.collect.importer import import_bundle

    typer.echo(import_bundle(bundle, dest).text(), nl=False)
