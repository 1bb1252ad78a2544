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
