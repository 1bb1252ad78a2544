"""sysfs reading: BAR sizes from `resource`, link and NUMA facts, NVIDIA display devices only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pvefix.errors import ParseError
from pvefix.probe import sysfs

GiB = 1 << 30
MiB = 1 << 20


def build_tree_from_dump(dump: str, root: Path) -> Path:
    """Turn the shared '== ADDR class=.. vendor=..' dump into a sysfs tree under `root`."""
    devices = root / "bus" / "pci" / "devices"
    dev: Path | None = None
    in_resource = False
    for line in dump.splitlines():
        head = re.match(r"== (\S+) class=(\S+) vendor=(\S+) device=(\S+) numa=(\S+)", line)
        if head:
            dev = devices / head.group(1)
            dev.mkdir(parents=True)
            for name, value in zip(("class", "vendor", "device", "numa_node"), head.groups()[1:],
                                   strict=True):
                (dev / name).write_text(value + "\n")
            in_resource = False
            continue
        if dev is None:
            continue
        if line == "-- resource":
            in_resource = True
        elif line.startswith("-- link "):
            m = re.match(r"-- link (.+ PCIe) x(\d+) max (.+ PCIe) x(\d+)", line)
            assert m, line
            for name, value in zip(("current_link_speed", "current_link_width",
                                    "max_link_speed", "max_link_width"), m.groups(), strict=True):
                (dev / name).write_text(value + "\n")
        elif line.startswith("--"):
            in_resource = False
        elif in_resource:
            with (dev / "resource").open("a") as f:
                f.write(line + "\n")
    return root


def test_the_h200_resource_file_gives_16_mib_256_gib_and_32_mib(h200):
    text = (h200 / "sys/bus/pci/devices/0000:00:06.0/resource").read_text()
    bars = sysfs.parse_resource(text)
    assert [(b.index, b.size) for b in bars] == [(0, 16 * MiB), (2, 256 * GiB), (4, 32 * MiB)]
    assert all(b.prefetchable and b.is_64bit for b in bars)
    assert bars[1].start == 0x100000000000


def test_find_gpus_on_the_shared_dump_keeps_only_the_nvidia_gpu(shared_guest, tmp_path):
    dump = shared_guest("sysfs_pci.txt")["sys pci devices"]
    root = build_tree_from_dump(dump, tmp_path)
    (gpu,) = sysfs.find_gpus(root)
    assert gpu.pci_address == "0000:00:06.0"
    assert gpu.device_id == "0x2335"
    assert gpu.numa_node is None  # numa_node -1: the guest has no NUMA information
    assert [b.size for b in gpu.bars] == [16 * MiB, 256 * GiB, 32 * MiB]
    assert gpu.link is not None
    assert (gpu.link.current_speed, gpu.link.current_width) == ("32.0 GT/s PCIe", 16)


def test_find_gpus_on_our_capture_reads_driver_link_and_bars(h200):
    (gpu,) = sysfs.find_gpus(h200 / "sys")
    assert gpu.driver == "nvidia"
    assert gpu.link is not None and gpu.link.max_width == 16
    assert sum(b.size for b in gpu.bars) == 256 * GiB + 48 * MiB


def test_a_machine_without_pci_devices_has_no_gpus(tmp_path):
    assert sysfs.find_gpus(tmp_path) == ()


def test_an_nvidia_audio_function_is_not_a_gpu(tmp_path):
    dev = tmp_path / "bus/pci/devices/0000:01:00.1"
    dev.mkdir(parents=True)
    (dev / "vendor").write_text("0x10de\n")
    (dev / "class").write_text("0x040300\n")
    assert sysfs.find_gpus(tmp_path) == ()


@pytest.mark.parametrize(
    "text",
    ["0x0 0x1\n", "zz 0x1 0x2\n", "0x0000000000002000 0x0000000000001000 0x0\n"],
)
def test_a_broken_resource_file_is_a_parse_error_with_its_line(text):
    with pytest.raises(ParseError, match=r"resource:1"):
        sysfs.parse_resource(text)
