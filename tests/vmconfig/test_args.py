"""The args line: cliques found, merged and removed without touching anything else."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pvefix.errors import ValidationError
from pvefix.vmconfig.args import (
    ArgsIgnored,
    clique_map,
    merge_cliques,
    qemu_words,
    remove_cliques,
    split_words,
)

OTHER = "-fw_cfg 'name=opt/ovmf/X-PciMmio64Mb,string=262144'  -set device.net0.rombar=0"


def test_split_words_matches_a_shell() -> None:
    text = """-a 'b c' "d \\"e\\"" f\\ g"""
    assert [w.text for w in split_words(text)] == shlex.split(text)


def test_an_open_quote_is_refused() -> None:
    with pytest.raises(ValidationError):
        split_words("-set 'device.hostpci0")


def test_merge_appends_and_keeps_everything_else_byte_for_byte() -> None:
    after = merge_cliques(OTHER, {"hostpci0": 0, "hostpci1": 0})
    assert after == (OTHER + " -set device.hostpci0.x-nv-gpudirect-clique=0"
                     " -set device.hostpci1.x-nv-gpudirect-clique=0")
    assert merge_cliques(after, {"hostpci0": 0, "hostpci1": 0}) == after  # idempotent


def test_merge_rewrites_a_different_clique_in_place() -> None:
    before = "-set device.hostpci0.x-nv-gpudirect-clique=3 -foo bar"
    assert merge_cliques(before, {"hostpci0": 0}) == (
        "-set device.hostpci0.x-nv-gpudirect-clique=0 -foo bar")


def test_quoted_cliques_are_recognised() -> None:
    assert clique_map("-set 'device.hostpci2.x-nv-gpudirect-clique=1'") == {"hostpci2": 1}
    assert merge_cliques("-set 'device.hostpci2.x-nv-gpudirect-clique=1'", {"hostpci2": 1}) == (
        "-set 'device.hostpci2.x-nv-gpudirect-clique=1'")


def test_remove_takes_only_what_was_added_and_never_leaves_an_empty_line() -> None:
    added = merge_cliques(OTHER, {"hostpci0": 0})
    assert remove_cliques(added, {"hostpci0"}) == OTHER
    only = merge_cliques(None, {"hostpci0": 0, "hostpci1": 0})
    assert remove_cliques(only, {"hostpci0", "hostpci1"}) is None
    assert remove_cliques(only, {"hostpci0"}) == "-set device.hostpci1.x-nv-gpudirect-clique=0"


def test_a_clique_out_of_range_is_refused() -> None:
    with pytest.raises(ValidationError):
        merge_cliques(None, {"hostpci0": 16})


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.=,/", min_size=1, max_size=12)
_args = st.lists(_word, max_size=6).map(" ".join).filter(lambda t: t != "0")  # "0": refused
_wanted = st.dictionaries(st.integers(0, 15).map(lambda i: f"hostpci{i}"), st.integers(0, 15),
                          max_size=5)


@given(_args, _wanted)
def test_merge_then_remove_gives_back_the_other_args(other: str, wanted: dict[str, int]) -> None:
    merged = merge_cliques(other or None, wanted)
    assert clique_map(merged) == {**clique_map(other), **wanted}
    assert merge_cliques(merged, wanted) == merged
    if wanted:
        assert remove_cliques(merged, set(wanted)) == (other or None)


_PERL = r"""
use strict; use Text::ParseWords; use JSON::PP;
local $/; my $in = decode_json(<STDIN>); my @out;
for my $text (@$in) {
    my $bytes = $text; utf8::encode($bytes);  # qemu-server splits the config's raw bytes
    (my $rest = $bytes) =~ s/^\s+//;
    my @words = Text::ParseWords::shellwords($bytes);
    utf8::decode($_) for @words;
    push @out, (@words || !length($rest)) ? [@words] : undef;  # undef: the line is dropped
}
print encode_json(\@out);
"""


def _perl_words(texts: list[str]) -> list[list[str] | None]:
    """Text::ParseWords::shellwords (qemu-server's split_args) on each text, all in one perl
    run; None for a text it gives no word for although it is not blank (qemu-server drops
    that args)."""
    if shutil.which("perl") is None or subprocess.run(
            ["perl", "-MText::ParseWords", "-MJSON::PP", "-e", "1"], capture_output=True,
            check=False).returncode != 0:
        # Debian's perl-base alone has no JSON::PP: the perl package (perl-modules) has.
        pytest.skip("needs perl with its core modules Text::ParseWords and JSON::PP")
    out = subprocess.run(["perl", "-e", _PERL], input=json.dumps(texts), capture_output=True,
                         text=True, check=True)
    words: list[list[str] | None] = json.loads(out.stdout)
    return words


def _ours(text: str) -> list[str] | None:
    try:
        return [w.text for w in split_words(text)]
    except ArgsIgnored:
        return None


# Shell-ish pieces, Perl's spaces and the characters only Python calls spaces (U+001C..U+001F,
# NEL, NBSP, Unicode spaces): 200 texts per perl run, 6,000 per test run.
_PIECE = st.sampled_from(["a", "b=c", ".", "-", " ", "  ", "\t", "\n", "\r", "\x0b", "\x0c",
                          "'", '"', "\\", "\\ ", "\\'", '\\"', "$", "\x1c", "\x1d", "\x1e",
                          "\x1f", "\x85", "\xa0", "\u2003", "\u3000", "é", "0"])
_TEXTS = st.lists(st.lists(_PIECE, max_size=12).map("".join), min_size=200, max_size=200)


@settings(max_examples=30, deadline=None)
@given(_TEXTS)
def test_split_words_splits_as_qemu_servers_perl_does(texts: list[str]) -> None:
    perl = _perl_words(texts)
    for text, theirs in zip(texts, perl, strict=True):
        assert _ours(text) == theirs, repr(text)


@settings(max_examples=30, deadline=None)
@given(_TEXTS, _wanted.filter(bool))
def test_a_merge_adds_exactly_the_clique_words_or_refuses(texts: list[str],
                                                          wanted: dict[str, int]) -> None:
    merged: list[str] = []
    for text in texts:
        try:
            merged.append(merge_cliques(text or None, wanted) or "")
        except ArgsIgnored:
            merged.append("")
    perl = _perl_words(texts + merged)
    added = " ".join(f"-set device.{d}.x-nv-gpudirect-clique={k}" for d, k in wanted.items())
    for text, before, after, out in zip(texts, perl, perl[len(texts):], merged, strict=False):
        if before is None or text == "0":  # qemu-server drops it: pvefix never makes it live
            assert out == ""
        else:
            assert after == [*before, *added.split()], repr(text)


@pytest.mark.parametrize("text", ["-a \\", "-a 'b", '-a "b\\"', "0", "-a b\\"])
def test_an_args_qemu_server_drops_is_never_made_live(text: str) -> None:
    with pytest.raises(ArgsIgnored):
        merge_cliques(text, {"hostpci0": 0, "hostpci1": 0})
    assert qemu_words(text) == []


def test_information_separators_do_not_split_words() -> None:
    assert [w.text for w in split_words("-a\x1cb\x1fc \xa0d\u3000e")] == [
        "-a\x1cb\x1fc", "\xa0d\u3000e"]
