"""Read a desired-state file: TOML (pvefix.tomltext), then the pydantic model.

Every error is a pvefix ParseError naming the file, the line (where one can be found) and the
field, e.g. `plans/desired.toml:12: vms.100.machine.family: Input should be 'i440fx', ...`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pydantic

from pvefix.desired.model import SCHEMA, DesiredState
from pvefix.errors import ParseError
from pvefix.tomltext import parse_toml

_SPACE = re.compile(r"\s*")
_BARE = re.compile(r"[A-Za-z0-9_\-]+")
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")
_KEY_PART = re.compile(r"[A-Za-z0-9_\-]+|\"([^\"]*)\"|'([^']*)'")


def _dotted(text: str) -> list[str]:
    parts = []
    for m in _KEY_PART.finditer(text):
        parts.append(m.group(1) if m.group(1) is not None else
                     m.group(2) if m.group(2) is not None else m.group(0))
    return parts


def _key_end(line: str, at: int) -> int | None:
    """Where the dotted key starting at `at` ends (bare or quoted parts joined by dots), or
    None. One pass, each character looked at once or twice: no pattern here can backtrack
    over a line of the user's."""
    while True:
        part = _BARE.match(line, at) or _QUOTED.match(line, at)
        if part is None:
            return None
        at = part.end()
        after = _SPACE.match(line, at).end()  # type: ignore[union-attr]  # \s* always matches
        if line[after:after + 1] != ".":
            return at
        at = _SPACE.match(line, after + 1).end()  # type: ignore[union-attr]


def _header(line: str) -> list[str] | None:
    """The path of a `[table]` or `[[array]]` header line (a comment may follow), or None."""
    text = line.lstrip()
    if not text.startswith("["):
        return None
    inner = text[2:] if text.startswith("[[") else text[1:]
    begin = len(inner) - len(inner.lstrip())
    end = _key_end(inner, begin)
    if end is None:
        return None
    rest = inner[end:].lstrip()
    rest = rest[2:] if rest.startswith("]]") else rest[1:] if rest.startswith("]") else "x"
    rest = rest.lstrip()
    return _dotted(inner[begin:end]) if not rest or rest.startswith("#") else None


def _assigned(line: str) -> list[str] | None:
    """The dotted key of a `key = value` line, or None."""
    begin = len(line) - len(line.lstrip())
    end = _key_end(line, begin)
    if end is None or not line[end:].lstrip().startswith("="):
        return None
    return _dotted(line[begin:end])


class LineIndex:
    """Where each table header and `key =` line of a desired-state file is: built in one pass
    over the text, then each `find` is a few dictionary look-ups (a CI run annotating 1,000
    drifted VMs reads and scans the file once)."""

    def __init__(self, text: str) -> None:
        self._exact: dict[tuple[str, ...], int] = {}  # a path -> its first line
        self._under: dict[tuple[str, ...], int] = {}  # a path -> first line at or below it
        table: list[str] = []
        for number, line in enumerate(text.splitlines(), start=1):
            header = _header(line)
            if header is not None:
                table = path = header
            else:
                key = _assigned(line)
                if key is None:
                    continue
                path = [*table, *key]
            self._exact.setdefault(tuple(path), number)
            for depth in range(1, len(path) + 1):
                self._under.setdefault(tuple(path[:depth]), number)

    def find(self, loc: tuple[str | int, ...]) -> int | None:
        """The line that best matches `loc` (a pydantic error location): the first table
        header or `key =` line whose path covers it, else the one with the deepest path that
        leads to it."""
        want = tuple(str(p) for p in loc)
        if want and want in self._under:
            return self._under[want]
        for depth in range(len(want) - 1, 0, -1):
            if want[:depth] in self._exact:
                return self._exact[want[:depth]]
        return None


def locate(text: str, loc: tuple[str | int, ...]) -> int | None:
    """`LineIndex(text).find(loc)`: a light scan of table headers and `key =` lines, enough to
    point at the right line of a hand-written file (multi-line arrays and inline tables point
    at their first line)."""
    return LineIndex(text).find(loc)


def _describe(err: dict[str, object]) -> tuple[tuple[str | int, ...], str]:
    raw_loc: tuple[object, ...] = tuple(err.get("loc", ()))  # type: ignore[arg-type]
    loc = tuple(p for p in raw_loc if isinstance(p, str | int))
    # pydantic adds the validator kind ('function-after[...]') or a union branch to some
    # locations; they say nothing to a user editing the file.
    loc = tuple(p for p in loc if not (isinstance(p, str) and "[" in p and "]" in p))
    kind = str(err.get("type", ""))
    message = str(err.get("msg", "invalid"))
    if kind == "extra_forbidden":
        message = "unknown key (see docs/check.md for the schema)"
    elif kind == "missing":
        message = "required key is missing"
    message = message.removeprefix("Value error, ")
    return loc, message


def loads_desired(text: str, source: str = "<desired>") -> DesiredState:
    """Parse the text of a desired-state file; ParseError names the source, line and field."""
    data = parse_toml(text, source)
    schema = data.get("schema")
    if schema != SCHEMA:
        line = locate(text, ("schema",))
        got = "missing" if schema is None else f"{schema!r}"
        raise ParseError(f"schema: expected \"{SCHEMA}\", got {got}", source=source, line=line)
    try:
        return DesiredState.model_validate(data)
    except pydantic.ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        loc, message = _describe(dict(errors[0]))
        field = ".".join(str(p) for p in loc) or "(top level)"
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise ParseError(f"{field}: {message}{more}", source=source,
                         line=locate(text, loc)) from None


def load_desired(path: str | Path) -> DesiredState:
    """Read a desired-state file from disk."""
    from pvefix.hosttree.safe import FILE_CAP, read_local

    p = Path(path)
    data = read_local(p, FILE_CAP)  # a FIFO or a device is refused, never read
    if data is None:
        raise ParseError("desired-state file not found", source=str(p))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(f"not UTF-8 (byte {exc.start})", source=str(p)) from None
    return loads_desired(text, str(p))
