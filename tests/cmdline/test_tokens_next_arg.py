"""Cmdline.parse agrees with a line-by-line transcription of the kernel's parser.

The reference below follows lib/cmdline.c `next_arg` and kernel/params.c `parse_args` step by
step on a character buffer, writing NULs where the C code does, so it is slow and obviously
faithful; pvefix's own parser matches tokens with a regular expression (linear and fast on 100k
tokens). Hypothesis looks for any text where the two disagree.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pvefix.cmdline import Cmdline

SPACE = " \t\n\v\f\r"  # the kernel's isspace() on ASCII


def _cstr(buf: list[str], pos: int) -> str:
    end = pos
    while buf[end] != "\0":
        end += 1
    return "".join(buf[pos:end])


def _skip_spaces(buf: list[str], pos: int) -> int:
    while buf[pos] != "\0" and buf[pos] in SPACE:
        pos += 1
    return pos


def _next_arg(buf: list[str], args: int) -> tuple[str, str | None, int]:
    in_quote = quoted = False
    if buf[args] == '"':
        args += 1
        in_quote = quoted = True
    i = 0
    equals = 0
    while buf[args + i] != "\0":
        if buf[args + i] in SPACE and not in_quote:
            break
        if equals == 0 and buf[args + i] == "=":
            equals = i
        if buf[args + i] == '"':
            in_quote = not in_quote
        i += 1
    param = args
    val: int | None = None
    if equals:
        buf[args + equals] = "\0"
        val = args + equals + 1
        if buf[val] == '"':  # don't include quotes in value
            val += 1
            if buf[args + i - 1] == '"':
                buf[args + i - 1] = "\0"
    if quoted and i > 0 and buf[args + i - 1] == '"':
        buf[args + i - 1] = "\0"
    if buf[args + i] != "\0":
        buf[args + i] = "\0"
        nxt = args + i + 1
    else:
        nxt = args + i
    return _cstr(buf, param), None if val is None else _cstr(buf, val), _skip_spaces(buf, nxt)


def kernel_params(text: str) -> list[tuple[str, str | None]]:
    """What parse_args hands to the parameter handlers, in order, up to a bare `--`."""
    buf = [*text, "\0"]
    pos = _skip_spaces(buf, 0)
    out: list[tuple[str, str | None]] = []
    while buf[pos] != "\0":
        param, val, pos = _next_arg(buf, pos)
        if val is None and param == "--":
            break
        out.append((param, val))
    return out


@given(st.text(alphabet=' \t\n"=-ab', max_size=40))
def test_tokens_are_what_the_kernel_parser_hands_out(text: str) -> None:
    assert [(t.name, t.value) for t in Cmdline.parse(text).tokens] == kernel_params(text)


@given(st.text(alphabet=' \t"=-ab', max_size=40))
def test_parsing_is_lossless_on_any_text(text: str) -> None:
    assert Cmdline.parse(text).render() == text


# The usual line (no quote, one space between tokens) takes a faster path in Cmdline.parse;
# these lines always do, so the kernel's parser judges that path too.
usual_line = st.builds(
    lambda lead, words, trail: lead + " ".join(words) + trail,
    st.sampled_from(["", " ", "\t"]),
    st.lists(st.text(alphabet="=-ab.", min_size=1, max_size=6), max_size=8),
    st.sampled_from(["", " ", "\n", " \n"]),
)


@given(usual_line)
def test_the_usual_line_is_what_the_kernel_parser_hands_out(text: str) -> None:
    line = Cmdline.parse(text)
    assert [(t.name, t.value) for t in line.tokens] == kernel_params(text)
    assert line.render() == text
