"""A command's `-h` as an admin reads it at 80 columns: the usage line in plain words
(`VMID...`, not `{VMIDS}`), the description, the examples, then the options in their panels
(typer's `rich_help_panel`: Arguments, Options, then Safety, Rehearsal, P2P, Guest,
Connection as the command declares them).

Each panel is two columns, the option with its value's name (`--ssh-port PORT`) and its help,
so the help gets most of the line: typer's own layout gives the option, its short form, its
`--no-` form and the value's name a column each, which left the help 24 columns at 80 and made
`apply -h` 242 lines. A value's name that does not fit beside its option goes under it; an
option is never cut (`config.t...` was).

clihelp.finish_help installs `format_help` on each command (not on groups: theirs list
commands, as typer shows them).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

MIN_NAME, MAX_NAME = 14, 28  # the option column's width, chosen per panel between these
_CODE = re.compile(r"`([^`]*)`")


def usage_piece(param: Any) -> str:
    """An argument as the usage line shows it: `VMID...` when required, `[VMID...]` when
    not (no braces: they read as shell syntax)."""
    name = str(param.metavar or str(param.name or "arg").upper())
    if param.nargs != 1 and not name.endswith("..."):
        name += "..."
    return name if param.required else f"[{name}]"


def _label(param: Any) -> str:
    """The option column: its names (`--format, -f`, `--ssh/--no-ssh`) and its value's name."""
    if param.param_type_name == "argument":
        return usage_piece(param).strip("[]")
    longs = [o for o in param.opts if o.startswith("--")]
    shorts = [o for o in param.opts if not o.startswith("--")]
    names = ", ".join(longs + shorts)
    if param.secondary_opts:
        names += "/" + ", ".join(param.secondary_opts)
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return names
    return f"{names} {param.metavar}" if param.metavar else names


def _help(param: Any) -> str:
    text = _CODE.sub(r"\1", inspect.cleandoc(getattr(param, "help", None) or ""))
    text = " ".join(text.split())
    default = getattr(param, "default", None)
    shown = getattr(param, "show_default", None)
    if (param.param_type_name == "option" and shown is not False and default not in
            (None, False, "", ()) and not getattr(param, "is_flag", False)
            and not callable(default)):
        value = getattr(default, "value", default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        text += f" [default: {value}]"
    if param.required and param.param_type_name == "option":  # the usage line says an argument's
        text += " [required]"
    return text


def _panels(command: Any, ctx: Any) -> dict[str, list[Any]]:
    """Panel title -> its parameters, in typer's order: Arguments, Options, then the others
    as first met."""
    panels: dict[str, list[Any]] = {"Arguments": [], "Options": []}
    for param in command.params:  # not -h itself: whoever reads this has found it
        if getattr(param, "hidden", False):
            continue
        default = "Arguments" if param.param_type_name == "argument" else "Options"
        panels.setdefault(getattr(param, "rich_help_panel", None) or default, []).append(param)
    return {title: params for title, params in panels.items() if params}


def _rows(label: str, help_: str, name: int, inner: int) -> int:
    """Lines a parameter takes with the option column `name` wide in a panel `inner` wide."""
    import textwrap

    words = textwrap.wrap(label, name, break_long_words=False) or [""]
    extra = 1 if len(label.split()[0]) > name else 0  # the option alone on a line first
    text = textwrap.wrap(help_, inner - name - 1, break_long_words=False) or [""]
    return extra + max(0 if extra else len(words), len(text))


def _name_width(labels: list[str], helps: list[str], inner: int) -> int:
    """The option column's width that makes the panel shortest (the narrower on a tie); at
    least its longest value name (`[text|json|markdown]`), which is never cut."""
    least = max([MIN_NAME, *(len(w) for label in labels for w in label.split()[1:])])
    return min(range(least, max(least, MAX_NAME) + 1), key=lambda w: (
        sum(_rows(label, h, w, inner) for label, h in zip(labels, helps, strict=True)), w))


def _panel_body(title: str, params: list[Any], inner: int) -> Any:
    """One panel's rows: a row per parameter, its label in the option column (a value's name
    that does not fit goes under the option) and its help beside; an option longer than the
    column has a line of its own and its help starts on the next. The column's width is the
    one that makes the panel shortest (`_name_width`)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from pvefix.commands.optgroup import PANEL_NOTES

    labels, helps = [_label(p) for p in params], [_help(p) for p in params]
    name = _name_width(labels, helps, inner)
    note = PANEL_NOTES.get(title)
    rows: list[Any] = [Text(note, style="dim")] if note else []
    table = None
    for label, help_ in zip(labels, helps, strict=True):
        if len(label.split()[0]) > name:  # a line of its own, the help under it
            rows.append(Text(label, style="bold cyan"))
            table, label = None, ""
        if table is None:
            table = Table.grid(padding=(0, 1), expand=True)
            table.add_column(width=name)
            table.add_column(ratio=1)
            rows.append(table)
        table.add_row(Text(label, style="bold cyan"), Text(help_))
    return Group(*rows)


class Panels:
    """The panels in one box, each opened by its titled rule (`├─ Safety ──┤`): a panel's
    bottom border would be a line of its own, and the next panel's top one more."""

    def __init__(self, panels: dict[str, list[Any]]) -> None:
        self.panels = panels

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.segment import Segment
        from rich.style import Style

        border = Style(dim=True)
        width = options.max_width
        inner = options.update_width(width - 4)
        for k, (title, params) in enumerate(self.panels.items()):
            left, right = ("╭", "╮") if k == 0 else ("├", "┤")
            head = f"{left}─ {title} "
            yield Segment(head + "─" * max(0, width - len(head) - 1) + right, border)
            yield Segment.line()
            body = _panel_body(title, params, width - 4)
            for line in console.render_lines(body, inner, pad=True):
                yield Segment("│ ", border)
                yield from line
                yield Segment(" │", border)
                yield Segment.line()
        yield Segment("╰" + "─" * (width - 2) + "╯", border)
        yield Segment.line()


def format_help(command: Any, ctx: Any, examples: tuple[str, ...]) -> None:
    """Print `command`'s help (click calls it for `-h`/`--help`) to stdout."""
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.padding import Padding
    from rich.text import Text

    console = Console(highlight=False)
    pieces = [p for param in command.get_params(ctx) for p in (
        [usage_piece(param)] if param.param_type_name == "argument" else [])]
    usage = " ".join([ctx.command_path, "[OPTIONS]", *pieces])
    console.print(Padding(Text(f"Usage: {usage}", style="bold"), (0, 1, 1, 1)))
    if command.help:
        # The summary line and the paragraph after it read as one paragraph (a line less).
        text = inspect.cleandoc(command.help).replace("\n\n", "\n", 1)
        console.print(Padding(Markdown(text), (0, 1, 1, 1)))
    if examples:
        console.print(Padding(Text("Examples:\n" + "\n".join(f"  {e}" for e in examples)),
                              (0, 1, 1, 1)))
    panels = _panels(command, ctx)
    if panels:
        console.print(Panels(panels))
