"""TOML text to data, for every TOML file pvefix reads (desired states, connection profiles).

The parser is tomli: the code CPython ships as `tomllib` (same grammar, same messages), which
its project also publishes compiled with mypyc for the common platforms; there it parses about
3x faster than the standard library's copy (a 1,000-VM desired state: ~150 ms -> ~50 ms on the
bench machine, docs/benchmarks.md). Where tomli is not installed, `tomllib` reads the same.

Every failure is a ParseError naming the source and, where the parser says it, the line.
"""

from __future__ import annotations

import re
from typing import Any

try:
    import tomli as _toml
except ImportError:  # pragma: no cover - tomli is a dependency; this keeps a bare install going
    import tomllib as _toml  # type: ignore[no-redef]

from pvefix.errors import ParseError

PARSER = _toml.__name__
_AT_LINE = re.compile(r"\(at line (\d+), column \d+\)")


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """The TOML document `text` as data; ParseError naming `source` and the line."""
    try:
        return _toml.loads(text)
    except _toml.TOMLDecodeError as exc:
        m = _AT_LINE.search(str(exc))
        reason = _AT_LINE.sub("", str(exc)).strip()
        raise ParseError(f"not valid TOML: {reason}", source=source,
                         line=int(m.group(1)) if m else None) from None
    except RecursionError:
        raise ParseError("not valid TOML: nested too deeply", source=source) from None
    except ValueError as exc:  # the parser raises these on a few odd inputs
        raise ParseError(f"not valid TOML: {type(exc).__name__}", source=source) from None
