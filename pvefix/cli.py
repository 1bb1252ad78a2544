"""Command line entry point. Kept thin: parse options, call one function, render, exit.

Start-up is paid per run, so nothing is imported before it is needed: the root group knows
its commands by name only (`COMMANDS`) and imports a command's module when that command is
looked up, so `pvefix plan` never imports the simulator, apply or probe modules, and `--help`
imports them all. Heavy libraries (paramiko, proxmoxer, jinja2) are imported inside the
commands that use them; `pvefix --version` is answered before typer (pvefix/main.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import typer

from pvefix import __version__
from pvefix.commands.clihelp import HELP_OPTION_NAMES, finish_help

# Command name -> (module, attribute): a typer.Typer (a group of subcommands) or a function.
# The order is the order `pvefix --help` lists them in (typer's: commands, then groups).
COMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("pvefix.commands.plan_cmd", "plan_command"),
    "show": ("pvefix.commands.show_cmd", "show_command"),
    "apply": ("pvefix.commands.apply_cmd", "apply_command"),
    "rollback": ("pvefix.commands.rollback_cmd", "rollback_command"),
    "snapshots": ("pvefix.commands.snapshots_cmd", "snapshots_command"),
    "check": ("pvefix.commands.check_cmd", "check_command"),
    "desired": ("pvefix.commands.desired_cmd", "desired_command"),
    "verify": ("pvefix.commands.verify_cmd", "verify_command"),
    "rehearse": ("pvefix.commands.rehearse_cmd", "rehearse_command"),
    "inspect": ("pvefix.commands.inspect_cmd", "app"),
    "probe": ("pvefix.commands.probe_cmd", "app"),
    "sim": ("pvefix.commands.sim_cmd", "app"),
    "collect": ("pvefix.commands.collect_cmd", "app"),
}

_SETTINGS: dict[str, Any] = {"pretty_exceptions_enable": False, "rich_markup_mode": "markdown"}

app = typer.Typer(
    name="pvefix",
    help="Plan, apply, roll back and drift-check multi-GPU passthrough fixes on Proxmox VE.",
    no_args_is_help=True, add_completion=True,
    context_settings={"help_option_names": HELP_OPTION_NAMES},
    **_SETTINGS,
)


def load_command(name: str) -> Any:
    """The click command `name` of COMMANDS, built as typer builds a subcommand of the root
    (the same settings), with readable metavars and its examples (clihelp.finish_help)."""
    module, attribute = COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    wrapper = typer.Typer(add_completion=False, **_SETTINGS)
    if isinstance(target, typer.Typer):
        wrapper.add_typer(target, name=name)
    else:
        wrapper.command(name)(target)
    return finish_help(typer.main.get_group(wrapper).commands[name], name)


class LazyCommands(MutableMapping[str, Any]):
    """The root group's subcommands: every name known, each command built on first look-up.

    click looks a subcommand up by name (`get`), so running one command builds only that
    one; walking all of them (`--help`, `items()`) builds them all.
    """

    def __init__(self, loaders: dict[str, Callable[[], Any]]) -> None:
        self._loaders = dict(loaders)
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            self._built[name] = self._loaders[name]()  # KeyError: no such command
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._loaders[name] = lambda: command
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaders[name]
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)

    def __contains__(self, name: object) -> bool:
        return name in self._loaders


def build_command() -> Any:
    """The click command tree: the root group (options, --version) with its subcommands
    built lazily, each with readable metavars and an example (clihelp.finish_help)."""
    root = finish_help(typer.main.get_command(app))
    root.commands = LazyCommands(
        {name: (lambda name=name: load_command(name)) for name in COMMANDS}  # type: ignore[misc]
    )
    return root


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pvefix {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", help="Print pvefix's version and exit.", callback=_version,
        is_eager=True),
) -> None:
    """pvefix: make multi-GPU passthrough on Proxmox VE right, safely (dry run by default)."""
