"""`pvefix probe`: what the GPUs of this machine are and whether P2P really moves data.

Runs inside a guest (or on any Linux box with NVIDIA GPUs). PyTorch is never imported here:
the measurements run in child processes (see pvefix/probe/).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import typer

app = typer.Typer(
    help="Probe this machine's GPUs: topology, P2P claims, and measured P2P and all-reduce.",
    invoke_without_command=True, no_args_is_help=False,
)


@app.callback()
def probe(
    ctx: typer.Context,
    format: Literal["text", "json"] = typer.Option("text", "--format", help="text or json."),
    quick: bool = typer.Option(False, "--quick", help="Fewer sizes and iterations (< 30 s)."),
    out: Path | None = typer.Option(None, "--out", help="Also save the JSON report here."),
    timeout: float | None = typer.Option(
        None, "--timeout", help="Total time budget in seconds (default 600, quick 28)."
    ),
    python: str | None = typer.Option(
        None, "--python", help="Interpreter with PyTorch for the measurements."
    ),
) -> None:
    """Probe the GPUs here and print a report (never fails for a missing GPU or tool)."""
    if ctx.invoked_subcommand is not None:
        return
    from pvefix.probe.main import execute_probe

    raise typer.Exit(execute_probe(format, quick, out, timeout, python, sys.stdout))


@app.command("diff")
def diff(
    before: Path = typer.Argument(..., help="Report taken before the change (JSON)."),
    after: Path = typer.Argument(..., help="Report taken after the change (JSON)."),
    format: Literal["text", "json"] = typer.Option("text", "--format", help="text or json."),
    only_changes: bool = typer.Option(False, "--only-changes", help="Hide unchanged figures."),
) -> None:
    """Compare two saved probe reports: P2P cells, data delivered, latency and all-reduce."""
    from pvefix.probe.main import execute_diff

    raise typer.Exit(execute_diff(before, after, format, only_changes, sys.stdout))
