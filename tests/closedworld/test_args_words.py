"""The args words: every QEMU option the installed QEMU documents is classified (a QEMU upgrade
that adds one fails here), an args line's words split into options without losing one, and
an option pvefix does not know never swallows the option after it."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.closedworld.args_words import INPUTS, classify, options
from pvefix.closedworld.registry import lookup


def _qemu_options() -> set[str]:
    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None:
        pytest.skip("qemu-system-x86_64 is not installed here (fw-lab/install-deps.sh)")
    out = subprocess.run([qemu, "-help"], capture_output=True, text=True, check=True).stdout
    names: set[str] = set()
    for line in out.splitlines():
        m = re.match(r"^(-[A-Za-z][\w/-]*)", line)
        if m:  # `-fda/-fdb`, `-hda/-hdb`: each is an option
            names |= {n if n.startswith("-") else f"-{n}" for n in m.group(1).split("/")}
    return names


def test_every_option_the_installed_qemu_documents_is_classified() -> None:
    assert sorted(n for n in _qemu_options() if lookup("args-word", n) is None) == []


_WORD = st.one_of(st.sampled_from([i.name.split(":")[0] for i in INPUTS]),
                  st.from_regex(r"-?-?[a-z][a-z0-9=,._-]{0,8}", fullmatch=True))


@given(st.lists(_WORD, max_size=12))
def test_options_cover_every_word_once(words: list[str]) -> None:
    got = options(words)
    flat = [w for o in got for w in ((o.name if not o.name.startswith("-") else None), o.value)
            if w is not None]
    assert len(got) + sum(1 for o in got if o.value is not None) == len(words)
    assert all(classify(o).kind == "args-word" for o in got)
    assert set(flat) <= set(words) | {w.lstrip("-") for w in words}


def test_an_unknown_option_does_not_swallow_the_next_one() -> None:
    got = options(["-x-foo", "-cpu", "host,kvm=off"])
    assert [(o.name, o.value) for o in got] == [("-x-foo", None), ("-cpu", "host,kvm=off")]
    assert classify(got[0]).status == "unmodelled" and classify(got[1]).status == "modelled"


@pytest.mark.parametrize(("value", "name"), [
    ("device.hostpci0.x-nv-gpudirect-clique=0", "-set"),
    ("device.net0.rombar=0", "-set:rombar"),
    ("device.hostpci0.x-pci-vendor-id=0x10de", "-set:other"),
])
def test_a_set_is_classified_by_what_it_sets(value: str, name: str) -> None:
    assert classify(options(["-set", value])[0]).name == name
