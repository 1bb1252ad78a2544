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
from pvefix.vmconfig.args import clique_map, merge_cliques, remove_cliques, split_words

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
_args = st.lists(_word, max_size=6).map(" ".join)
_wanted = st.dictionaries(st.integers(0, 15).map(lambda i: f"hostpci{i}"), st.integers(0, 15),
                          max_size=5)


@given(_args, _wanted)
def test_merge_then_remove_gives_back_the_other_args(other: str, wanted: dict[str, int]) -> None:
    merged = merge_cliques(other or None, wanted)
    assert clique_map(merged) == {**clique_map(other), **wanted}
    assert merge_cliques(merged, wanted) == merged
    if wanted:
        assert remove_cliques(merged, set(wanted)) == (other or None)


def _perl_words(texts: list[str]) -> list[list[str]] | None:
    """Text::ParseWords::shellwords (qemu-server's split_args) on each text; None: no perl."""
    if shutil.which("perl") is None:
        return None
    script = ("use Text::ParseWords; use JSON::PP; local $/; my $in = decode_json(<STDIN>);"
              " print encode_json([map { [shellwords($_)] } @$in]);")
    out = subprocess.run(["perl", "-e", script], input=json.dumps(texts), capture_output=True,
                         text=True, check=True)
    words: list[list[str]] = json.loads(out.stdout)
    return words


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="ab=.- '\"\\$", max_size=20), min_size=1, max_size=20))
def test_split_words_splits_as_qemu_servers_perl_does(texts: list[str]) -> None:
    balanced = []
    for t in texts:
        try:
            balanced.append((t, [w.text for w in split_words(t)]))
        except ValidationError:
            continue
    perl = _perl_words([t for t, _ in balanced])
    if perl is None:
        pytest.skip("needs perl (Text::ParseWords)")
    for (text, ours), theirs in zip(balanced, perl, strict=True):
        if theirs:  # shellwords gives nothing at all for a line it cannot parse
            assert ours == theirs, text
