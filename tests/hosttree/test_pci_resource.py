"""pvefix.pci: the one parser of a sysfs `resource` file, read the same by the host tree, the
live reads and the probe in a guest (which gets it inside its zipapp)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pvefix import pci
from pvefix.hosttree.synth import resource_text
from pvefix.hosttree.sysfs import parse_resource as host_view
from pvefix.pci import Region
from pvefix.probe.sysfs import parse_resource as probe_view
from pvefix.verify.zipapp import probe_sources

regions = st.lists(
    st.tuples(st.integers(1, 2**48), st.integers(1, 2**40), st.integers(0, 2**21)),
    min_size=1, max_size=17,
).map(lambda raw: [Region(i, start, size, flags) for i, (start, size, flags) in enumerate(raw)])


@given(regions)
def test_host_and_probe_read_the_same_regions(written: list[Region]) -> None:
    text = resource_text(written, len(written))
    parsed = pci.parse_resource(text)
    assert parsed == written  # every region, SR-IOV BARs and bridge windows included
    bars, rom = host_view(text)
    assert [(b.index, b.start, b.size, b.flags) for b in bars] == [
        (r.index, r.start, r.size, r.flags) for r in written if r.index < pci.BAR_COUNT]
    assert (rom is None) == (len(written) <= pci.ROM_INDEX)
    assert [(b.index, b.size, b.prefetchable, b.is_64bit) for b in probe_view(text)] == [
        (r.index, r.size, r.prefetchable, r.is_64bit) for r in written]


def test_crlf_and_padding_are_read_and_blank_lines_keep_the_numbering() -> None:
    text = ("0x0000000090000000 0x0000000093ffffff 0x0000000000040200 \r\n"
            "\n"
            "  0x0000020000000000   0x0000021fffffffff 0x000000000014220c\n")
    assert [(r.index, r.size, r.is_64bit) for r in pci.parse_resource(text)] == [
        (0, 64 << 20, False), (2, 128 << 30, True)]


def test_the_probe_zipapp_ships_the_parser() -> None:
    assert "pvefix/pci.py" in probe_sources()
