"""The PCI mapping file parser: strict, lossless, errors name file and line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.errors import ParseError
from pvefix.hosttree import PciMappingFile

TEXT = (
    "# GPUs of the cluster\n"
    "pro6000\n"
    "\tdescription eight GPUs\n"
    "\tmap id=10de:2bb5,iommugroup=42,node=kpro6,path=0000:01:00.0,subsystem-id=10de:204b\n"
    "\tmap id=10de:2bb5,iommugroup=61,node=kpro7,path=0000:21:00.0\n"
    "\n"
    "nic\n"
    "\tmap id=8086:1592,node=kpro6,path=0000:c1:00;0000:c2:00,description=\"left, right\"\n"
    "\tmdev 0\n"
    "\tlive-migration-capable yes\n"
)


def test_the_sections_maps_and_flags_are_read() -> None:
    parsed = PciMappingFile.parse(TEXT, "pci.cfg")
    pro = parsed.mappings["pro6000"]
    assert pro.description == "eight GPUs" and pro.line == 2
    (entry,) = pro.for_node("kpro6")
    assert (entry.id, entry.iommugroup, entry.path, entry.subsystem_id, entry.line) == (
        "10de:2bb5", 42, "0000:01:00.0", "10de:204b", 4)
    assert not entry.multifunction
    nic = parsed.mappings["nic"]
    assert nic.maps[0].paths == ["0000:c1:00", "0000:c2:00"] and nic.maps[0].multifunction
    assert nic.maps[0].description == "left, right"
    assert (nic.mdev, nic.live_migration_capable) == (False, True)


def test_render_gives_the_text_back_unchanged() -> None:
    assert PciMappingFile.parse(TEXT).render() == TEXT


def test_the_generic_section_config_header_is_accepted() -> None:
    text = "pci: gpu\n\tmap id=10de:2bb5,node=n1,path=0000:01:00.0\n"
    assert list(PciMappingFile.parse(text).mappings) == ["gpu"]


@pytest.mark.parametrize(
    ("text", "line", "wanted"),
    [
        ("gpu\n\tmap id=10de:2bb5,node=n,path=0000:01:00.0,color=red\n", 2, "unknown key 'color'"),
        ("gpu\n\tmap id=10de:2bb5,node=n\n", 2, "missing 'path'"),
        ("gpu\n\tmap id=10de2bb5,node=n,path=0000:01:00.0\n", 2, "invalid id"),
        ("gpu\n\tmap id=10de:2bb5,node=n,path=01:00.0\n", 2, "invalid path"),
        ("gpu\n\tmap id=10de:2bb5,node=n,path=0000:01:00.0,iommugroup=x\n", 2, "iommugroup"),
        ("gpu\n\tmap id=10de:2bb5,node=n,path=0000:01:00.0\n\ngpu\n", 4, "duplicate mapping"),
        ("\tmap id=10de:2bb5,node=n,path=0000:01:00.0\n", 1, "outside a mapping"),
        ("gpu\n\tcolor red\n", 2, "unknown key 'color'"),
        ("gpu\n\tmdev maybe\n", 2, "not a boolean"),
        ("gpu\n\tdescription a\n", 1, "has no map line"),
        ("gpu extra words\n", 1, "invalid section header"),
    ],
)
def test_problems_name_file_and_line(text: str, line: int, wanted: str) -> None:
    with pytest.raises(ParseError, match=wanted) as err:
        PciMappingFile.parse(text, "/etc/pve/mapping/pci.cfg")
    assert (err.value.source, err.value.line) == ("/etc/pve/mapping/pci.cfg", line)


@given(st.text(max_size=400))
def test_arbitrary_text_raises_nothing_but_parse_error(text: str) -> None:
    try:
        PciMappingFile.parse(text, "pci.cfg")
    except ParseError:
        pass


_ids = st.from_regex(r"\A[0-9a-f]{4}:[0-9a-f]{4}\Z")
_paths = st.from_regex(r"\A[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}(\.[0-7])?\Z")
_names = st.from_regex(r"\A[a-z][a-z0-9_-]{1,10}\Z")
_nodes = st.from_regex(r"\A[a-z][a-z0-9]{0,8}\Z")


@given(st.dictionaries(
    _names,
    st.lists(st.tuples(_ids, _nodes, _paths, st.none() | st.integers(0, 300)), min_size=1,
             max_size=4),
    min_size=1, max_size=4,
))
def test_any_valid_file_parses_to_what_was_written(
    spec: dict[str, list[tuple[str, str, str, int | None]]],
) -> None:
    chunks = []
    for name, maps in spec.items():
        lines = [name]
        for dev_id, node, path, group in maps:
            group_part = f",iommugroup={group}" if group is not None else ""
            lines.append(f"\tmap id={dev_id},node={node},path={path}{group_part}")
        chunks.append("\n".join(lines) + "\n")
    text = "\n".join(chunks)
    parsed = PciMappingFile.parse(text)
    assert parsed.render() == text
    for name, maps in spec.items():
        got = [(m.id, m.node, m.path, m.iommugroup) for m in parsed.mappings[name].maps]
        assert got == maps
