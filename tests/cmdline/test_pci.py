"""pci= options: flattened across tokens, realloc's last setting wins, edits join tokens."""

from __future__ import annotations

import pytest

from pvefix.cmdline import Cmdline, ensure_pci_option, pci_options, pci_realloc_state
from pvefix.errors import ValidationError


@pytest.mark.parametrize(
    ("text", "options", "state"),
    [
        ("quiet", [], None),
        ("pci=realloc", ["realloc"], "on"),
        ("pci=realloc=on", ["realloc=on"], "on"),
        ("pci=realloc=off", ["realloc=off"], "off"),
        ("pci=nocrs,realloc", ["nocrs", "realloc"], "on"),
        ("pci=realloc pci=nocrs,realloc=off", ["realloc", "nocrs", "realloc=off"], "off"),
        ("pci=realloc=off pci=realloc", ["realloc=off", "realloc"], "on"),
        ("pci=realloc=bogus", ["realloc=bogus"], None),
        ("pci=,,nocrs, pci", ["nocrs"], None),
        ('"pci=realloc"', ["realloc"], "on"),
        ("pci=realloc -- pci=realloc=off", ["realloc"], "on"),
    ],
)
def test_options_and_realloc_state_follow_kernel_order(
    text: str, options: list[str], state: str | None
) -> None:
    line = Cmdline.parse(text)
    assert pci_options(line) == options
    assert pci_realloc_state(line) == state


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("quiet", "quiet pci=realloc"),
        ("quiet pci=nocrs", "quiet pci=nocrs,realloc"),
        ("pci=nocrs quiet", "pci=nocrs,realloc quiet"),
        ("pci=realloc=off quiet", "pci=realloc quiet"),
        ("pci=nocrs,realloc=off", "pci=nocrs,realloc"),
        ("pci=realloc=off pci=realloc=off", "pci=realloc pci=realloc"),
        ('pci="nocrs"', 'pci="nocrs,realloc"'),
        ("pci=nocrs -- pci=x", "pci=nocrs,realloc -- pci=x"),
    ],
)
def test_ensure_realloc_joins_or_appends_and_replaces_off(before: str, after: str) -> None:
    line = Cmdline.parse(before)
    assert ensure_pci_option(line, "realloc") is True
    assert line.render() == after
    assert pci_realloc_state(line) == "on"


@pytest.mark.parametrize("text", ["pci=realloc", "pci=realloc=on", "pci=nocrs,realloc"])
def test_ensure_realloc_is_a_no_op_when_already_on(text: str) -> None:
    line = Cmdline.parse(text)
    assert ensure_pci_option(line, "realloc") is False
    assert line.render() == text


def test_ensure_other_options_is_idempotent() -> None:
    line = Cmdline.parse("pci=realloc")
    assert ensure_pci_option(line, "nocrs")
    assert not ensure_pci_option(line, "nocrs")
    assert line.render() == "pci=realloc,nocrs"


def test_a_pci_token_with_a_stray_quote_is_left_alone() -> None:
    line = Cmdline.parse('pci=no"crs"')
    assert ensure_pci_option(line, "realloc")
    assert line.render() == 'pci=no"crs" pci=realloc'


@pytest.mark.parametrize("option", ["", "a,b", "a b", 'a"'])
def test_invalid_options_are_refused(option: str) -> None:
    with pytest.raises(ValidationError):
        ensure_pci_option(Cmdline.parse("quiet"), option)
