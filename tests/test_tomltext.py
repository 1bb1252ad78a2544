"""pvefix.tomltext: tomli (compiled where a wheel exists) reads every TOML file, exactly as the
standard library's tomllib would: same data, same refusals, same messages."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.desired import dumps_desired
from pvefix.errors import ParseError
from pvefix.tomltext import PARSER, parse_toml
from tests.check.test_desired_file import EXAMPLE, _sample


def test_the_parser_is_tomli() -> None:
    # A dependency (pyproject.toml): a fallback to tomllib would be slower, not different.
    assert PARSER == "tomli"


def _stdlib(text: str) -> object:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return ("error", str(exc))
    except (ValueError, RecursionError) as exc:
        return ("odd", type(exc).__name__)


def _ours(text: str) -> object:
    try:
        return parse_toml(text, "t.toml")
    except ParseError as exc:
        return ("error", exc.message, exc.line)


_PIECES = st.sampled_from(['a = 1', '[t]', '[[x]]', 'b = "s"', 'c = [1, 2', 'd = {e = 1}',
                           'a = 2', '"q" = true', "f = 1979-05-27", 'g = """x', '#c', '=', ''])


@given(st.lists(_PIECES, max_size=8).map("\n".join) | st.text(max_size=40))
def test_same_data_or_the_same_refusal_as_tomllib(text: str) -> None:
    ours, stdlib = _ours(text), _stdlib(text)
    if isinstance(ours, dict):
        assert ours == stdlib
        return
    assert isinstance(ours, tuple) and ours[1].startswith("not valid TOML: ")
    assert isinstance(stdlib, tuple) and stdlib[0] in ("error", "odd")
    if stdlib[0] == "error":
        message = str(stdlib[1])
        assert ours[1].removeprefix("not valid TOML: ") in message
        if "(at line " in message:
            assert f"(at line {ours[2]}," in message


def test_desired_state_files_read_the_same_as_with_tomllib() -> None:
    for text in (dumps_desired(_sample()), EXAMPLE.read_text(encoding="utf-8")):
        assert parse_toml(text, "d.toml") == tomllib.loads(text)


def test_deep_nesting_is_a_clear_error() -> None:
    with pytest.raises(ParseError, match=r"deep\.toml: not valid TOML: nested too deeply"):
        parse_toml("a = " + "[" * 100_000, "deep.toml")
