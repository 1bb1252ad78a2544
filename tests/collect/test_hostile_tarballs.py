"""An imported bundle is untrusted: simulator state is never taken from it, extraction is
bounded, devices and FIFOs are refused, and each refusal names the member."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from pvefix.collect import importer
from pvefix.collect.importer import import_bundle
from pvefix.errors import PvefixError, RefusedError


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_planted_simulator_folder_is_refused(tmp_path: Path) -> None:
    bundle = _tar(tmp_path / "b.tar.gz", {"./.pvefix-sim/secrets.json": b'{"password": "x"}'})
    with pytest.raises(RefusedError, match=r"\.pvefix-sim.*dot-entry"):
        import_bundle(bundle, tmp_path / "tree")
    assert not (tmp_path / "tree").exists()


def test_too_many_bytes_stop_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importer, "MAX_TOTAL", 1000)
    bundle = _tar(tmp_path / "b.tar.gz", {f"etc/f{i}": b"x" * 400 for i in range(5)})
    with pytest.raises(RefusedError, match="not a collect bundle"):
        import_bundle(bundle, tmp_path / "tree")
    assert not (tmp_path / "tree").exists()


def test_an_unpacked_bundle_with_a_fifo_is_refused_not_read(tmp_path: Path) -> None:
    folder = tmp_path / "unpacked"
    (folder / "proc").mkdir(parents=True)
    os.mkfifo(folder / "proc" / "cmdline")
    with pytest.raises(PvefixError, match="not a file or folder") as err:
        import_bundle(folder, tmp_path / "tree")
    assert "proc/cmdline" in str(err.value)


def test_an_unpacked_bundle_never_brings_simulator_state(tmp_path: Path) -> None:
    folder = tmp_path / "unpacked"
    (folder / ".pvefix-sim").mkdir(parents=True)
    (folder / ".pvefix-sim" / "secrets.json").write_text("{}")
    with pytest.raises(PvefixError):  # no facts: not a bundle; but nothing planted either
        import_bundle(folder, tmp_path / "tree")
    assert not (tmp_path / "tree" / ".pvefix-sim").exists()


def test_no_owner_mode_or_set_uid_bit_is_taken_from_the_tarball(tmp_path: Path) -> None:
    """pvefix writes each file itself (on every Python 3.11: tarfile's filters came in 3.11.4,
    Debian 12 has 3.11.2): the tarball's owner, set-uid bit and world-writable folder stay
    out."""
    bundle = tmp_path / "b.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        folder = tarfile.TarInfo("etc")
        folder.type, folder.mode, folder.uid = tarfile.DIRTYPE, 0o777, 4242
        tar.addfile(folder)
        for name, mode in (("etc/tool", 0o4755), ("etc/file", 0o666)):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid = 2, mode, 4242, 4242
            tar.addfile(info, io.BytesIO(b"hi"))
    dest = tmp_path / "out"
    dest.mkdir()
    importer._unpack_tarball(bundle, dest)
    modes = {p.name: (p.stat().st_mode & 0o7777, p.stat().st_uid)
             for p in (dest / "etc", dest / "etc" / "tool", dest / "etc" / "file")}
    assert modes == {"etc": (0o755 & ~_umask(), os.getuid()),
                     "tool": (0o755 & ~_umask(), os.getuid()),
                     "file": (0o644 & ~_umask(), os.getuid())}
    assert (dest / "etc" / "tool").read_bytes() == b"hi"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
