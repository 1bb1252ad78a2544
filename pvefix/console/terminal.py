"""What the output stream can show: colour or not, and how wide a line may be.

    term = terminal(sys.stdout, "auto")      # --color auto|always|never
    term.style("HOST REBOOT", "bold", "red")
    term.wrap("why: a long sentence ...", "      ")

On a terminal the decision is rich's (`rich.console.Console`): it honours `NO_COLOR`,
`FORCE_COLOR`, `TERM=dumb` and `COLUMNS`, and knows the colour system. Off a terminal (a pipe,
a CI log) with `--color auto` or `never` the answer is fixed without importing rich (start-up
is paid per run): no colour, and `COLUMNS` wide, else 80 columns, as rich would say too.
`--color always` colours whatever the stream is, through rich as well.

Text is wrapped to the width with hanging indents (`label: ` continues under the text, not the
label) and never inside a word: a single word wider than the line (a path, a long cmdline
token) stays whole on a line of its own.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TextIO

ColorChoice = Literal["auto", "always", "never"]
COLOR_CHOICES: tuple[ColorChoice, ...] = ("auto", "always", "never")
DEFAULT_WIDTH = 80
MIN_WIDTH = 40  # narrower than this, hanging indents would leave no room for words
_STYLES = {"red", "yellow", "green", "cyan", "bold", "dim"}


@dataclass(frozen=True)
class Terminal:
    """A stream's manners: `color_system` is rich's name ("standard", "256", "truecolor"),
    None for plain text."""

    width: int = DEFAULT_WIDTH
    color_system: str | None = None

    @property
    def color(self) -> bool:
        return self.color_system is not None

    def style(self, text: str, *styles: str) -> str:
        """`text` in these styles (bold, dim, red, ...), or as it is without colour."""
        if not self.color or not styles or not text:
            return text
        from rich.color import ColorSystem
        from rich.style import Style

        unknown = set(styles) - _STYLES
        assert not unknown, unknown
        system = {"standard": ColorSystem.STANDARD, "256": ColorSystem.EIGHT_BIT,
                  "truecolor": ColorSystem.TRUECOLOR}.get(self.color_system or "",
                                                          ColorSystem.STANDARD)
        return Style.parse(" ".join(styles)).render(text, color_system=system)

    def wrap(self, text: str, indent: str, *, hang: int | None = None) -> str:
        """`text` filled to the width after `indent`. The lines after the first hang `hang`
        columns further in; by default under the text after a leading `- ` or `· ` bullet or
        a short `label: ` (up to 24 characters), else under the first."""
        if hang is None:
            hang = _hang(text)
        rest = indent + " " * hang
        if len(rest) > self.width // 2:
            rest = indent
        return textwrap.fill(text, width=self.width, initial_indent=indent,
                             subsequent_indent=rest, break_on_hyphens=False,
                             break_long_words=False)

    def command_line(self, lead: str, command: str, indent: str = "") -> str:
        """`lead: command` on one line when it fits; else the lead filled to the width and
        the command whole on the next line, two columns further in: a command (or a value)
        is copied as it is, so it is never wrapped."""
        line = f"{indent}{lead}: {command}"
        if len(line) <= self.width:
            return line
        return f"{self.wrap(lead + ':', indent)}\n{indent}  {command}"


_LABEL = re.compile(r"[A-Za-z][\w .()/-]{0,23}")


def _hang(text: str) -> int:
    """How far the lines after the first hang in: under the text after a bullet or a short
    label (`why: `, `risk (medium): `, `Phase 2: `), not after prose that has a colon."""
    if text.startswith(("- ", "· ")):
        return 2
    head, sep, _ = text.partition(": ")
    return len(head) + 2 if sep and _LABEL.fullmatch(head) else 0


def _columns(env: Mapping[str, str]) -> int | None:
    try:
        value = int(env.get("COLUMNS", ""))
    except ValueError:
        return None
    return value if value > 0 else None


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def terminal(stream: TextIO, choice: ColorChoice = "auto",
             env: Mapping[str, str] | None = None) -> Terminal:
    """The manners of `stream` under `--color choice` (see the module doc)."""
    env = os.environ if env is None else env
    if choice == "never" or (choice == "auto" and not _is_tty(stream)):
        width = _columns(env) or DEFAULT_WIDTH
        return Terminal(width=max(MIN_WIDTH, width))
    from rich.console import Console

    console = Console(file=stream, force_terminal=True if choice == "always" else None,
                      highlight=False, _environ=dict(env))
    # rich keeps bold and dim under NO_COLOR; pvefix drops every escape then (plain text).
    system = None if console.no_color else console.color_system
    if choice == "always" and system is None:  # TERM=dumb or NO_COLOR: the flag wins
        system = "standard"
    return Terminal(width=max(MIN_WIDTH, console.width), color_system=system)
