"""A bundle is data from anyone: reading it never leaves the tree, never blocks, never reads
without bound, and each refusal names the file (no traceback)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pvefix.errors import PvefixError
from pvefix.hosttree import resolve_scenario
from pvefix.sources.bundle import read_bundle


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    dest = tmp_path / "bundle"
    shutil.copytree(resolve_scenario("kpro6"), dest, symlinks=True)
    return dest


def _replace(path: Path) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()


def test_a_link_out_of_the_tree_is_refused_naming_the_file(bundle: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.write_text("root=/dev/sda1 boot=zfs\n")
    target = bundle / "etc/kernel/cmdline"
    _replace(target)
    target.symlink_to(outside)
    with pytest.raises(PvefixError, match="leads out of the host tree") as err:
        read_bundle(bundle, 100)
    assert "etc/kernel/cmdline" in str(err.value)


def test_a_device_is_never_read(bundle: Path) -> None:
    target = bundle / "etc/default/grub"
    _replace(target)
    target.symlink_to("/dev/zero")
    with pytest.raises(PvefixError, match=r"leads out of the host tree|not a regular file"):
        read_bundle(bundle, 100)


def test_a_fifo_is_never_opened_for_a_blocking_read(bundle: Path) -> None:
    target = bundle / "proc/cmdline"
    _replace(target)
    os.mkfifo(target)
    with pytest.raises(PvefixError, match="not a regular file") as err:
        read_bundle(bundle, 100)
    assert "proc/cmdline" in str(err.value)


def test_a_huge_file_is_refused_by_size(bundle: Path) -> None:
    target = bundle / "etc/kernel/cmdline"
    with target.open("wb") as fh:
        fh.truncate(17 << 20)
    with pytest.raises(PvefixError, match="larger than"):
        read_bundle(bundle, 100)


def test_non_utf8_bytes_in_a_host_file_are_kept_not_a_traceback(bundle: Path) -> None:
    target = bundle / "etc/kernel/cmdline"
    target.write_bytes(b"root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet \xff\xfe\n")
    state = read_bundle(bundle, 100)
    text = state.file("/etc/kernel/cmdline").text
    assert text is not None and text.encode("utf-8", "surrogateescape").endswith(b"\xff\xfe\n")


def _gpu_attribute(bundle: Path, name: str) -> Path:
    """A sysfs attribute of the first NVIDIA function (read beside its siblings: the fast
    path of hosttree.safe, which skips resolving links for files that are not links)."""
    vendor = next(p for p in sorted(bundle.glob("sys/devices/**/vendor"))
                  if p.read_text().strip() == "0x10de")
    return vendor.parent / name


@pytest.mark.parametrize("name", ["resource", "vendor"])
def test_a_sysfs_attribute_linked_out_of_its_device_is_refused(
    bundle: Path, tmp_path: Path, name: str
) -> None:
    outside = tmp_path / "elsewhere"
    outside.write_text("0x10de\n")
    target = _gpu_attribute(bundle, name)
    _replace(target)
    target.symlink_to(outside)
    with pytest.raises(PvefixError, match="leads out of the host tree") as err:
        read_bundle(bundle, 100)
    assert str(target) in str(err.value)


def test_a_sysfs_attribute_that_is_a_fifo_is_never_opened_for_a_blocking_read(
    bundle: Path,
) -> None:
    target = _gpu_attribute(bundle, "resource")
    _replace(target)
    os.mkfifo(target)
    with pytest.raises(PvefixError, match="not a regular file"):
        read_bundle(bundle, 100)
