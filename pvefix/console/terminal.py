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
DEFAULT_WIDTH = 80
MIN_WIDTH = 40  # narrower than this, hanging indents would leave no room for words
_STYLES = {"red", "yellow", "green", "cyan", "bold", "dim"}


@dataclass(frozen=True)
class Terminal:
    """A stream's manners: `color_system` is rich's name ("standard", "256", "truecolor"),
    None for plain text; `tty`: the stream is a terminal (what only a terminal needs, such
    as filling stderr's lines, a log does without: there each stays one line to grep)."""

    width: int = DEFAULT_WIDTH
    color_system: str | None = None
    tty: bool = False

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
        a short `label: ` (up to 24 characters), else under the first. A command or value in
        backticks stays whole, as a word does."""
        if hang is None:
            hang = _hang(text)
        rest = indent + " " * hang
        if len(rest) > self.width // 2:
            rest = indent
        whole = _CODE.sub(lambda m: m.group(0).replace(" ", _GLUE), text)
        lines = textwrap.wrap(whole, width=self.width, initial_indent=indent,
                              subsequent_indent=rest, break_on_hyphens=False,
                              break_long_words=False) or [indent.rstrip()]
        # A word (a path, a command in backticks) too wide for the hanging indent goes back
        # to the first line's: it sticks out as little as it can.
        lines[1:] = [indent + line.lstrip(" ") if len(line) > self.width else line
                     for line in lines[1:]]
        return "\n".join(lines).replace(_GLUE, " ")

    def fit(self, text: str, *, hang: int | None = None) -> str:
        """Each line of `text` that is wider than the terminal filled to the width (as
        `wrap`), under its own leading indent; the others as they are, and so is a line that
        is a command to copy (`pvefix ...`, `qm ...`: never wrapped)."""
        out = []
        for line in text.split("\n"):
            body = line.lstrip(" ")
            indent = line[:len(line) - len(body)]
            wide = len(line) > self.width and not _COMMAND.match(body)
            out.append(self.wrap(body, indent, hang=hang) if wide else line)
        return "\n".join(out)

    def step(self, command: str, indent: str = "        ") -> str:
        """A step as it is to be typed, whole; a comment step (`# ...`) is prose: filled,
        each line a comment."""
        if not command.startswith("# "):
            return f"{indent}{command}"
        return self.wrap(command[2:], f"{indent}# ", hang=0)

    def change(self, lead: str, before: str, after: str, indent: str = "      ") -> list[str]:
        """`lead before -> after` on one line when it fits; else the lead, then the values
        on the next line, or each on its own (`before:`, `after:`): values are copied as
        they are, so they are never wrapped."""
        line = f"{lead} {before} -> {after}"
        if len(line) <= self.width:
            return [line]
        pair = f"{indent}{before} -> {after}"
        if len(pair) <= self.width:
            return [lead, pair]
        return [lead, f"{indent}before: {before}", f"{indent}after:  {after}"]

    def command_line(self, lead: str, command: str, indent: str = "") -> str:
        """`lead: command` on one line when it fits; else the lead filled to the width and
        the command whole on the next line, two columns further in: a command (or a value)
        is copied as it is, so it is never wrapped."""
        line = f"{indent}{lead}: {command}"
        if len(line) <= self.width:
            return line
        return f"{self.wrap(lead + ':', indent)}\n{indent}  {command}"


_LABEL = re.compile(r"[A-Za-z][\w .()/-]{0,23}")
_CODE = re.compile(r"`[^`\n]+`")
# A line that is one of the commands pvefix prints to be copied whole.
_COMMAND = re.compile(r"(pvefix|qm|ssh-keygen|ssh-keyscan|pveum) ")
_GLUE = "\x00"  # a blank inside backticks while filling: textwrap breaks only at white space


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


def on_tty(stream: TextIO) -> Terminal | None:
    """The stream's manners where it is a terminal; None for a pipe or a file (a CI log, where
    a report's lines stay whole, to grep)."""
    term = terminal(stream)
    return term if term.tty else None


def say_err(text: str, *, hang: int | None = None, stream: TextIO | None = None) -> None:
    """`text` (an error, a note, a step) on stderr: on a terminal filled to its width (a word,
    a path, a command in backticks stays whole), in a log each line as it is, to grep."""
    import sys

    stream = stream or sys.stderr
    term = terminal(stream)
    print(term.fit(text, hang=hang) if term.tty else text, file=stream, flush=True)


def terminal(stream: TextIO, choice: ColorChoice = "auto",
             env: Mapping[str, str] | None = None) -> Terminal:
    """The manners of `stream` under `--color choice` (see the module doc)."""
    env = os.environ if env is None else env
    if choice == "never" or (choice == "auto" and not _is_tty(stream)):
        width = _columns(env) or DEFAULT_WIDTH
        return Terminal(width=max(MIN_WIDTH, width), tty=_is_tty(stream))
    from rich.console import Console

    console = Console(file=stream, force_terminal=True if choice == "always" else None,
                      highlight=False, _environ=dict(env))
    # rich keeps bold and dim under NO_COLOR; pvefix drops every escape then (plain text).
    system = None if console.no_color else console.color_system
    if choice == "always" and system is None:  # TERM=dumb or NO_COLOR: the flag wins
        system = "standard"
    return Terminal(width=max(MIN_WIDTH, console.width), color_system=system,
                    tty=_is_tty(stream))
