"""What `--help` shows: metavars an admin reads (VMID, FILE, SECONDS, not `<list[int]>`) and
one example per command.

typer derives a type label from each Python annotation; `finish_help` walks the built click
command once and replaces those labels with names (a name the command gave stays), and gives
each command its examples: a command's help is laid out by helpview.py (at most 100 lines at 80
columns), a group's is typer's with the examples appended.
"""

from __future__ import annotations

import functools
from typing import Any

HELP_OPTION_NAMES = ["-h", "--help"]

# Command path (without "pvefix") -> example lines shown at the end of its help. Each line is
# run or parsed by tests/docs/test_doc_examples.py, as the README's examples are.
EXAMPLES: dict[str, tuple[str, ...]] = {
    "plan": ("pvefix plan 100 --profile prod",
             "pvefix plan 100 --bundle ./host-tree --format markdown > ticket.md"),
    "show": ("pvefix show plans/kpro6-100.json",
             "pvefix show plans/kpro6-100.json --format markdown > ticket.md"),
    "apply": ("pvefix apply 100 --phase 1 --restart",
              "pvefix apply plans/kpro6-100.json --phase 2 --yes"),
    "rollback": ("pvefix rollback 100", "pvefix rollback 100 --snapshot 20260101T120000Z-100"),
    "snapshots": ("pvefix snapshots", "pvefix snapshots 100"),
    "check": ("pvefix check --all --desired plans/desired.toml --format junit -o drift.xml",
              "pvefix check 100 101",
              "pvefix check --all --desired plans/desired.toml --rehearse"),
    "desired": ("pvefix desired 100 -o plans/desired.toml",
                "pvefix desired 100 --from current"),
    "verify": ("pvefix verify 100 --guest-agent --quick",),
    "rehearse": ("pvefix rehearse 100 --phase 1",
                 "pvefix rehearse 100 --plan plans/kpro6-100.json --format json"),
    "inspect": ("pvefix inspect config /etc/pve/qemu-server/100.conf",),
    "inspect config": ("pvefix inspect config /etc/pve/qemu-server/100.conf --format json",),
    "inspect cmdline": ("pvefix inspect cmdline /etc/kernel/cmdline",),
    "probe": ("pvefix probe --quick",),
    "probe diff": ("pvefix probe diff before.json after.json",),
    "sim": ("pvefix sim serve --scenario kpro6 --root /tmp/kpro6 --ready-file /tmp/kpro6.json",),
    "sim serve": ("pvefix sim serve --scenario kpro6 --root /tmp/kpro6 "
                  "--ready-file /tmp/kpro6.json",),
    "sim scenarios": ("pvefix sim scenarios",),
    "collect": ("pvefix collect script > collect.sh",),
    "collect script": ("pvefix collect script > collect.sh",),
    "collect import": ("pvefix collect import pvefix-bundle-kpro6.tar.gz ./host-tree",),
}


def _label(param: Any, ctx: Any) -> str | None:
    """The metavar for a parameter, from the type label typer made for it (`<int>`,
    `<list[int]>`, `<text|json>`) and its name. None: typer made no such label."""
    display = getattr(param, "display_type", None)
    if not callable(display):
        return None
    shown = str(display(ctx))
    if not (shown.startswith("<") and shown.endswith(">")):
        return None
    kind = shown[1:-1].removeprefix("list[").removesuffix("]")
    name = str(param.name or "value").lower()
    if param.param_type_name == "argument":
        return name.upper()
    if "|" in kind:
        return "[" + kind + "]"
    if name in ("out", "output"):
        return "FILE"
    if kind == "path" or kind.endswith("Path"):
        return "DIR" if name.endswith(("dir", "root")) else "PATH"
    if kind.startswith("float"):
        return "SECONDS" if "timeout" in name or "wait" in name else "NUMBER"
    if kind.startswith("int"):
        return "PORT" if name.endswith("port") else "N"
    return name.rsplit("_", 1)[-1].upper()


def _no_type(ctx: Any) -> None:
    return None  # an argument's name already says what it is


def _usage_pieces(param: Any, ctx: Any) -> list[str]:
    from pvefix.commands.helpview import usage_piece

    return [usage_piece(param)]


def _format_help(command: Any, ctx: Any, formatter: Any, *,
                 examples: tuple[str, ...]) -> None:
    from pvefix.commands.helpview import format_help

    format_help(command, ctx, examples)


def finish_help(command: Any, path: str = "") -> Any:
    """Set readable metavars and append examples, for `command` (a click command as typer
    builds it) and every subcommand."""
    # The help option is built once and kept (click caches it): built here with its names.
    ctx = command.context_class(command, help_option_names=HELP_OPTION_NAMES)
    help_option = command.get_help_option(ctx)
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            param.display_type_rich = _no_type  # a flag takes no value: no `<bool>`
            continue
        label = _label(param, ctx)
        if label is None:
            continue
        if param.param_type_name == "argument":
            # typer prints the argument's name and then its type: keep only the name, and the
            # command's own (`VMID...`) when it gave one; the usage line (errors print it too)
            # shows it without typer's braces.
            param.display_type_rich = _no_type
            param.metavar = param.metavar or label
            param.get_usage_pieces = functools.partial(_usage_pieces, param)
            continue
        param.metavar = param.metavar or label  # one the command gave (`SHA256`) stays
    examples = EXAMPLES.get(path, ())
    subcommands: dict[str, Any] = getattr(command, "commands", {})
    if not hasattr(command, "list_commands"):
        # A command's help is pvefix's own layout (helpview.py); a group's lists its commands
        # as typer shows them.
        command.format_help = functools.partial(_format_help, command, examples=examples)
    elif examples and command.help is not None and "Examples:" not in command.help:
        # Help is Markdown (typer's rich_markup_mode): an indented block is kept as it is.
        lines = "\n".join(f"    {line}" for line in examples)
        command.help = f"{command.help.rstrip()}\n\nExamples:\n\n{lines}\n"
    for name, sub in subcommands.items():
        finish_help(sub, f"{path} {name}".strip())
    return command
