"""`pvefix show PLAN_FILE`: a saved plan file rendered as `pvefix plan` renders a plan, for the
approver who reviews it (text, or Markdown for the change ticket). Reads the file only: no
host, no network."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path

import typer

from pvefix.console.terminal import ColorChoice, terminal
from pvefix.errors import EXIT_OK


class ShowFormat(StrEnum):
    text = "text"
    markdown = "markdown"


def show_command(
    plan_file: Path = typer.Argument(..., metavar="PLAN_FILE", help="A plan file saved by"
                                     " `pvefix plan VMID --out FILE` (pvefix.plan/v1)."),
    fmt: ShowFormat = typer.Option(ShowFormat.text, "--format", "-f", help="text: the terminal"
                                   " view `pvefix plan` prints; markdown: for change tickets."),
    color: ColorChoice = typer.Option(
        "auto", "--color", help="auto: colour on a terminal unless NO_COLOR is set or TERM is"
        " dumb; always; never. Text is wrapped to the terminal's width (COLUMNS)."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="text: also each change's effect and evidence, the"
        " info findings' detail and the diffs (as `pvefix plan --verbose`)."),
) -> int:
    """Show a saved plan file as `pvefix plan` shows a plan, without reaching any host.

    What is shown is what the file says, as it was planned then: `pvefix apply PLAN_FILE
    --phase N` checks it against the target before writing anything (a plan file is data,
    never authority). Exit codes: 0 shown, 1 not a plan file.
    """
    from pvefix.flow.planfile import load_plan_file
    from pvefix.render.plan_markdown import render_plan_markdown
    from pvefix.render.plan_text import render_plan_text

    plan = load_plan_file(plan_file)
    if fmt is ShowFormat.markdown:
        import hashlib

        digest = hashlib.sha256(plan_file.read_bytes()).hexdigest()
        sys.stdout.write(render_plan_markdown(plan, saved=(str(plan_file), digest)))
    else:
        sys.stdout.write(render_plan_text(plan, term=terminal(sys.stdout, color),
                                          verbose=verbose))
    return EXIT_OK
