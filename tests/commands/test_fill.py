"""The one filling helper (pvefix/console/terminal.py): prose is filled at spaces to the
width, never inside a word; a command in backticks, a path or a value stays whole."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pvefix.console.terminal import Terminal

WORD = st.text(alphabet="abcxyz0123456789-=/.:", min_size=1, max_size=30)
CODE = st.lists(WORD, min_size=1, max_size=4).map(lambda ws: "`" + " ".join(ws) + "`")
PIECES = st.lists(st.one_of(WORD, WORD, CODE), min_size=1, max_size=40)


@given(PIECES, st.integers(min_value=40, max_value=120), st.sampled_from(["", "  ", "    "]))
def test_filled_text_keeps_every_word_and_backtick_span_whole(
        pieces: list[str], width: int, indent: str) -> None:
    text = " ".join(pieces)
    term = Terminal(width=width)
    filled = term.wrap(text, indent)
    assert filled.split() == text.split()  # the same words, none broken, in order
    for piece in pieces:
        if piece.startswith("`"):
            assert any(piece in line for line in filled.splitlines()), (piece, filled)
    for line in filled.splitlines():
        body = line.strip()
        whole = len(body.split()) == 1 or (body.startswith("`") and body.count("`") == 2)
        assert len(line) <= width or whole, (width, line)


@given(PIECES, st.integers(min_value=40, max_value=120))
def test_fit_leaves_lines_that_fit_as_they_are(pieces: list[str], width: int) -> None:
    term = Terminal(width=width)
    short = "  " + " ".join(pieces)[: width - 2]
    assert term.fit(short) == short
    long = "  " + " ".join(pieces * 4)
    assert term.fit(long).split() == long.split()


def test_a_change_keeps_its_values_whole() -> None:
    term = Terminal(width=80)
    assert term.change("  a:", "x", "y") == ["  a: x -> y"]
    lead = "  vm.cpu.phys-bits: VM config cpu:"
    pair = term.change(lead, "x86-64-v2-AES", "x86-64-v2-AES,phys-bits=host,flags=+pdpe1gb")
    assert pair == [lead, "      x86-64-v2-AES -> x86-64-v2-AES,phys-bits=host,flags=+pdpe1gb"]
    before, after = "'" + "root=ZFS=rpool/ROOT/pve-1 boot=zfs " * 2 + "'", "'" + "a " * 40 + "'"
    assert term.change("  f:", before, after) == [
        "  f:", f"      before: {before}", f"      after:  {after}"]


def test_a_comment_step_is_filled_and_a_command_step_is_whole() -> None:
    term = Terminal(width=40)
    command = "grubby --update-kernel=ALL --args=pci=realloc --and-more-words"
    assert term.step(command) == f"        {command}"
    comment = term.step("# add pci=realloc inside those quotes, e.g. with an editor")
    assert all(line.startswith("        # ") for line in comment.splitlines())
    assert len(comment.splitlines()) > 1


def test_a_word_too_wide_for_the_hanging_indent_goes_back_to_the_first_lines() -> None:
    term = Terminal(width=60)
    path = "/var/lib/pvefix/state/desired/node-kpro6@8dbc5a65a94a/100.toml"
    lines = term.wrap(f"desired state recorded: {path} (used by pvefix check)", "").split("\n")
    assert path in lines  # alone, at the left edge: it sticks out as little as it can
