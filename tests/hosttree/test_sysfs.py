"""The sysfs reader: `resource` lines, device files, parent paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.errors import ParseError
from pvefix.hosttree import HostTree, load_tree, parse_resource
from pvefix.hosttree.synth import Function, resource_text, write_function
from pvefix.pci import Region

ZERO = "0x0000000000000000 0x0000000000000000 0x0000000000000000"
GPU = Path("sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0")


def test_a_64bit_prefetchable_bar_and_the_rom_are_read() -> None:
    text = "\n".join([
        "0x0000000090000000 0x0000000093ffffff 0x0000000000040200",
        "0x0000020000000000 0x0000021fffffffff 0x000000000014220c",
        ZERO, ZERO, ZERO, ZERO,
        "0x0000000094000000 0x000000009407ffff 0x0000000000046200",
        ZERO,
    ]) + "\n"
    bars, rom = parse_resource(text)
    assert [(b.index, b.size, b.is_64bit, b.prefetchable) for b in bars] == [
        (0, 64 << 20, False, False),
        (1, 128 << 30, True, True),
    ]
    assert rom is not None and (rom.index, rom.size) == (6, 512 << 10)


def test_an_empty_resource_file_has_no_bars() -> None:
    assert parse_resource("") == ([], None)


def test_a_bad_resource_line_names_the_file_and_line(kpro6: HostTree) -> None:
    resource = kpro6.root / GPU / "resource"
    lines = resource.read_text().splitlines()
    lines[2] = "0x0 0xzz 0x0"
    resource.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError) as err:
        load_tree(kpro6.root)
    assert err.value.source == str(resource)
    assert err.value.line == 3
    assert str(err.value).startswith(f"{resource}:3: resource line 3")


def test_a_region_ending_before_it_starts_is_refused() -> None:
    with pytest.raises(ParseError, match="below start"):
        parse_resource("0x0000000000002000 0x0000000000001000 0x0000000000040200\n")


@given(st.text(max_size=300))
def test_arbitrary_text_raises_nothing_but_parse_error(text: str) -> None:
    try:
        parse_resource(text, "resource")
    except ParseError:
        pass


@given(st.lists(
    st.tuples(st.integers(1, 2**48), st.integers(1, 2**40), st.integers(0, 2**21)),
    min_size=7, max_size=13,
))
def test_written_regions_read_back_with_their_sizes(raw: list[tuple[int, int, int]]) -> None:
    regions = [Region(i, start, size, flags) for i, (start, size, flags) in enumerate(raw)]
    bars, rom = parse_resource(resource_text(regions, len(regions)))
    assert [(b.index, b.start, b.size, b.flags) for b in bars] == [
        (r.index, r.start, r.size, r.flags) for r in regions[:6]
    ]
    assert rom is not None and rom.size == regions[6].size


def test_iommu_group_may_be_a_real_symlink(kpro6: HostTree) -> None:
    group_file = kpro6.root / GPU / "iommu_group"
    group_file.unlink()
    os.symlink("../../../../kernel/iommu_groups/28", group_file)
    gpu = next(d for d in load_tree(kpro6.root).pci_devices() if d.address == "0000:41:00.0")
    assert gpu.iommu_group == 28


def test_a_device_missing_its_class_file_is_named(kpro6: HostTree) -> None:
    (kpro6.root / GPU / "class").unlink()
    with pytest.raises(ParseError, match=r"0000:41:00\.0/class: device has no 'class' file"):
        load_tree(kpro6.root)


def test_a_bad_id_file_is_named(kpro6: HostTree) -> None:
    (kpro6.root / GPU / "vendor").write_text("nvidia\n")
    with pytest.raises(ParseError, match=r"0000:41:00\.0/vendor: expected a hex id"):
        load_tree(kpro6.root)


def test_directories_without_id_files_are_path_components_only(tmp_path: Path) -> None:
    write_function(tmp_path, Function(
        path=("pci0000:00", "0000:00:03.1", "0000:05:00.0", "0000:06:00.0"),
        vendor=0x10DE, device=0x2330, class_code=0x030200, numa_node=-1,
    ))
    from pvefix.hosttree.sysfs import scan_pci_devices

    (device,) = scan_pci_devices(tmp_path)
    assert device.parent_path == ["pci0000:00", "0000:00:03.1", "0000:05:00.0"]
    assert device.numa_node is None and device.iommu_group is None
    assert device.sysfs_path == "sys/devices/pci0000:00/0000:00:03.1/0000:05:00.0/0000:06:00.0"
