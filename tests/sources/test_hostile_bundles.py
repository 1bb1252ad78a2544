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
