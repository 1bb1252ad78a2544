"""Just enough POSIX shell to read and rewrite one `NAME=value` word of /etc/default/grub.

grub-mkconfig sources /etc/default/grub with /bin/sh, so an assignment's value is one shell
word: double-quoted, single-quoted, unquoted, or a mix. pvefix reads the value without running
anything: `$VAR`, `${...}`, `$(...)` and backquotes are kept verbatim in the value and listed as
expansions, never expanded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Style = Literal["double", "single", "bare", "mixed", "empty"]

# Characters that end an unquoted word (operators and blanks); a newline ends it too.
_WORD_END = " \t\n;&|<>()"
_NAME_START = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_NAME_CHARS = _NAME_START + "0123456789"
_SPECIAL_PARAMS = "@*#?$!-0123456789"
# Inside double quotes a backslash escapes only these (POSIX 2.2.3).
_DQ_ESCAPABLE = '$`"\\\n'
# Runs of plain characters, taken in one step so a long value parses in linear, fast time.
_BARE_RUN = re.compile(r"[^ \t\n;&|<>()'\"\\$`]+")
_DQ_RUN = re.compile(r'[^"\\$`]+')
# A whole word in one of the two plain shapes: nothing after it but the end of the word.
_SIMPLE_DOUBLE = re.compile(r'"([^"\\$`]*)"(?=[ \t\n;&|<>()]|\Z)')
_SIMPLE_BARE = re.compile(r"[^ \t\n;&|<>()'\"\\$`]+(?=[ \t\n;&|<>()]|\Z)")
# What `quote(..., "double")` escapes: every `"`, and a backslash before an escapable or at the end.
_DQ_NEEDS_ESCAPE = re.compile(r'"|\\(?=[$`"\\\n]|\Z)')


class UnterminatedError(Exception):
    """A quote or expansion is still open at the end of the text (carries the position)."""

    def __init__(self, what: str, pos: int) -> None:
        super().__init__(what)
        self.what = what
        self.pos = pos


@dataclass
class Word:
    """One parsed shell word: its value, how it was quoted, what it would expand."""

    raw: str
    value: str
    style: Style
    expansions: list[str] = field(default_factory=list)
    # A `$` or backquote that the shell takes literally (escaped, or quoted in a way that
    # keeps it literal): pvefix cannot tell it from an expansion once unquoted.
    literal_specials: bool = False


def parse_word(text: str, pos: int = 0) -> tuple[Word, int]:
    """Parse the shell word starting at `pos`; returns it and the position after it."""
    # Fast path: the shapes nearly every file uses, a double-quoted or a bare value without
    # escapes or expansions, ending where the word ends. Anything else takes the full loop.
    simple = _SIMPLE_DOUBLE.match(text, pos)
    if simple is not None:
        return Word(simple.group(0), simple.group(1), "double"), simple.end()
    simple = _SIMPLE_BARE.match(text, pos)
    if simple is not None:
        return Word(simple.group(0), simple.group(0), "bare"), simple.end()
    start = pos
    out: list[str] = []
    kinds: set[Style] = set()  # how its parts are quoted
    expansions: list[str] = []
    literal = False
    while pos < len(text):
        c = text[pos]
        if c in _WORD_END:
            break
        if c == "'":
            end = text.find("'", pos + 1)
            if end < 0:
                raise UnterminatedError("single quote", pos)
            out.append(text[pos + 1 : end])
            kinds.add("single")
            pos = end + 1
        elif c == '"':
            pos, lit = _double(text, pos + 1, out, expansions)
            literal = literal or lit
            kinds.add("double")
        elif c == "\\":
            kinds.add("bare")
            if pos + 1 >= len(text):
                out.append("\\")
                pos += 1
            elif text[pos + 1] == "\n":
                pos += 2  # line continuation
            else:
                literal = literal or text[pos + 1] in "$`"
                out.append(text[pos + 1])
                pos += 2
        elif c in "$`":
            kinds.add("bare")
            pos = _expansion(text, pos, out, expansions)
        else:
            kinds.add("bare")
            pos = _run(_BARE_RUN, text, pos, out)
    style: Style = "empty" if not kinds else "mixed" if len(kinds) > 1 else next(iter(kinds))
    word = Word(text[start:pos], "".join(out), style, expansions, literal)
    return word, pos


def _expansion(text: str, pos: int, out: list[str], expansions: list[str]) -> int:
    """The `$...` or backquoted expansion at `pos`, kept verbatim in `out` (and in
    `expansions`, unless a lone `$`); returns the position after it."""
    end = _expansion_end(text, pos)
    if end > pos + 1 or text[pos] == "`":
        expansions.append(text[pos:end])
    out.append(text[pos:end])
    return end


def _run(pattern: re.Pattern[str], text: str, pos: int, out: list[str]) -> int:
    """The run of plain characters `pattern` matches at `pos` (at least one), kept in `out`."""
    run = pattern.match(text, pos)
    end = run.end() if run is not None and run.end() > pos else pos + 1
    out.append(text[pos:end])
    return end


def _double(text: str, pos: int, out: list[str], expansions: list[str]) -> tuple[int, bool]:
    literal = False
    while pos < len(text):
        c = text[pos]
        if c == '"':
            return pos + 1, literal
        if c == "\\" and pos + 1 < len(text) and text[pos + 1] in _DQ_ESCAPABLE:
            nxt = text[pos + 1]
            if nxt != "\n":  # backslash-newline is a line continuation: both vanish
                literal = literal or nxt in "$`"
                out.append(nxt)
            pos += 2
        elif c in "$`":
            pos = _expansion(text, pos, out, expansions)
        else:
            pos = _run(_DQ_RUN, text, pos, out)
    raise UnterminatedError("double quote", pos)


def _expansion_end(text: str, pos: int) -> int:
    """End of the expansion at `pos` (`$NAME`, `${..}`, `$(..)`, backquotes); pos+1 if none."""
    if text[pos] == "`":
        end = pos + 1
        while end < len(text) and text[end] != "`":
            end += 2 if text[end] == "\\" else 1
        if end >= len(text):
            raise UnterminatedError("backquote", pos)
        return end + 1
    nxt = text[pos + 1] if pos + 1 < len(text) else ""
    if nxt in ("{", "("):
        close = "}" if nxt == "{" else ")"
        depth, end = 0, pos + 1
        while end < len(text):
            if text[end] == nxt:
                depth += 1
            elif text[end] == close:
                depth -= 1
                if depth == 0:
                    return end + 1
            end += 1
        raise UnterminatedError(f"'${nxt}'", pos)
    if nxt and nxt in _NAME_START:
        end = pos + 1
        while end < len(text) and text[end] in _NAME_CHARS:
            end += 1
        return end
    if nxt and nxt in _SPECIAL_PARAMS:
        return pos + 2
    return pos + 1  # a lone '$' is literal


def quote(value: str, style: Style) -> str | None:
    """`value` written back in `style`; None when that style cannot hold it.

    `$` and backquotes are written unescaped, because in the values pvefix handles they are
    the expansions that were read verbatim (words with literal ones are not rewritten).
    """
    if style == "single":
        return None if "'" in value else f"'{value}'"
    if style == "bare":
        if not value or any(c in _WORD_END + "'\"\\" for c in value):
            return None
        return value
    if style == "double":
        # `"` always takes a backslash; a backslash takes another one where the shell would
        # otherwise read it as an escape (before one of _DQ_ESCAPABLE, or at the very end).
        return '"' + _DQ_NEEDS_ESCAPE.sub(r"\\\g<0>", value) + '"'
    return None
