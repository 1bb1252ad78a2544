"""Groups of typer options handed to a command as one value (connection, guest access).

typer reads a command's signature, so a group's options are spliced into it; the command itself
takes one keyword argument (`opts`, `guest`) built from them. `--help` shows each group in its
own panel (typer's `rich_help_panel`: Connection, Guest, P2P; apply's and rollback's Safety).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])

# field of the group's value -> (CLI parameter name, annotation, typer.Option)
OptionTable = Mapping[str, tuple[str, Any, Any]]


# The help panels (typer's rich_help_panel), one name each, in the order --help lists them.
CONNECTION = "Connection"
GUEST = "Guest"
P2P = "P2P"
SAFETY = "Safety"
REHEARSAL = "Rehearsal"

# Panel title -> a line `-h` shows at the top of the panel: what its options share (where
# their environment variables come from), said once instead of in each option's help.
PANEL_NOTES: dict[str, str] = {}


def unset(flag: str, help: str, **more: Any) -> Any:
    """A group's option: None unless given (the group's value says what None means), so
    `--help` shows no default."""
    return typer.Option(None, flag, help=help, show_default=False, **more)


def option_group(target: str, build: Callable[..., Any], options: OptionTable,
                 panel: str, note: str | None = None) -> Callable[[F], F]:
    """A decorator adding `options` to a typer command that takes `target=build(**fields)`,
    shown in `--help` under `panel` (with `note` at its top)."""
    if note is not None:
        PANEL_NOTES[panel] = note
    for _, _, option in options.values():
        option.rich_help_panel = panel

    def decorate(func: F) -> F:
        signature = inspect.signature(func)
        # Evaluate the command's own annotations in its module (they may be strings under
        # `from __future__ import annotations`); typer reads them from the wrapper.
        hints = typing.get_type_hints(func)
        kept = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in signature.parameters.values()
            if p.name != target
        ]
        added = [
            inspect.Parameter(param, inspect.Parameter.KEYWORD_ONLY, default=option,
                              annotation=annotation)
            for param, annotation, option in options.values()]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {field: kwargs.pop(param, None) for field, (param, _, _) in options.items()}
            return func(*args, **{target: build(**values)}, **kwargs)

        annotations = {k: v for k, v in hints.items() if k != target}
        annotations.update({param: annotation for param, annotation, _ in options.values()})
        wrapper.__annotations__ = annotations
        wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*kept, *added])
        del wrapper.__wrapped__  # typer must see the new signature
        return wrapper  # type: ignore[return-value]

    return decorate


def in_panel(panel: str, *names: str) -> Callable[[F], F]:
    """A decorator showing a command's own options `names` (parameter names) under `panel`."""

    def decorate(func: F) -> F:
        params = inspect.signature(func).parameters
        for name in names:
            params[name].default.rich_help_panel = panel
        return func

    return decorate


def given_argv(values: Mapping[str, Any], options: OptionTable,
               skip: tuple[str, ...] = ()) -> list[str]:
    """The command-line words that give a group's `values` (field -> value; None: not given)
    again, in the table's order: `--flag VALUE`, a bare `--flag` for True, the `--no-` side of
    a `--flag/--no-flag` switch for False. What printed commands carry (pvefix/hints.py)."""
    words: list[str] = []
    for name, (_, _, option) in options.items():
        value = values.get(name)
        if value is None or name in skip:
            continue
        on, _, off = option.param_decls[0].partition("/")
        if value is True:
            words.append(on)
        elif value is False:
            words += [off] if off else []
        else:
            words += [on, str(value)]
    return words
