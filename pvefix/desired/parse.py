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

_HEADER = re.compile(r"^\s*\[\[?\s*(.+?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(r"^\s*((?:[A-Za-z0-9_\-]+|\"[^\"]*\"|'[^']*')"
                     r"(?:\s*\.\s*(?:[A-Za-z0-9_\-]+|\"[^\"]*\"|'[^']*'))*)\s*=")
_KEY_PART = re.compile(r"[A-Za-z0-9_\-]+|\"([^\"]*)\"|'([^']*)'")


def _dotted(text: str) -> list[str]:
    parts = []
    for m in _KEY_PART.finditer(text):
        parts.append(m.group(1) if m.group(1) is not None else
                     m.group(2) if m.group(2) is not None else m.group(0))
    return parts


def locate(text: str, loc: tuple[str | int, ...]) -> int | None:
    """The line that best matches `loc` (a pydantic error location): the first table header or
    `key =` line whose path covers it, else the one with the deepest path that leads to it.

    A light scan of table headers and `key =` lines: enough to point at the right line of a
    hand-written file (multi-line arrays and inline tables point at their first line).
    """
    want = [str(p) for p in loc]
    table: list[str] = []
    best: tuple[int, int] | None = None  # (depth matched, line)
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header is not None:
            table = _dotted(header.group(1))
            path = table
        else:
            assign = _ASSIGN.match(line)
            if assign is None:
                continue
            path = [*table, *_dotted(assign.group(1))]
        depth = 0
        for a, b in zip(path, want, strict=False):
            if a != b:
                break
            depth += 1
        on_the_way = depth == len(path) or depth == len(want)
        if depth and on_the_way and (best is None or depth > best[0]):
            best = (depth, number)
    return best[1] if best else None


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
