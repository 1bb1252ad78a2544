"""The node script as a guest on a production node (no QEMU needed): one rehearsal at a time
(the second waits, then is refused saying why), stale run folders swept, and the job from a
plan file carrying no `file=` fw_cfg."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pvefix.rehearse import node_script
from pvefix.rehearse.command import args_of


def test_a_second_rehearsal_waits_then_is_refused_with_the_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_script.os, "access", lambda *_: False)  # no /run/lock: temp dir
    monkeypatch.setattr(node_script.tempfile, "gettempdir", lambda: str(tmp_path))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl,os,sys,time; fd=os.open(sys.argv[1], "
         "os.O_RDWR|os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, b'4711'); "
         "print('held', flush=True); time.sleep(30)", str(tmp_path / node_script.LOCK_NAME)],
        stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        t0 = time.monotonic()
        fd, why = node_script.take_lock(1.0)
        assert fd is None and time.monotonic() - t0 >= 1.0
        assert "another rehearsal runs on this node (pid 4711" in why
    finally:
        holder.kill()
        holder.wait()
    fd, path = node_script.take_lock(1.0)  # free again
    assert fd is not None and path.endswith(node_script.LOCK_NAME)
    os.close(fd)


def test_stale_folders_are_swept_live_and_foreign_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{node_script.PREFIX}100-aaaa"
    live = tmp_path / f"{node_script.PREFIX}101-bbbb"
    young = tmp_path / f"{node_script.PREFIX}102-cccc"
    old = tmp_path / f"{node_script.PREFIX}103-dddd"
    other = tmp_path / "someone-else"
    for d in (stale, live, young, old, other):
        d.mkdir()
    (stale / "owner").write_text(str(dead.pid))
    (stale / "ram").write_bytes(b"")
    (live / "owner").write_text(str(os.getpid()))
    then = time.time() - node_script.ORPHAN_AGE - 60
    os.utime(old, (then, then))
    removed = node_script.sweep(str(tmp_path))
    assert sorted(removed) == sorted([stale.name, old.name])
    assert live.is_dir() and young.is_dir() and other.is_dir() and not stale.exists()


def test_only_pvefixs_own_string_fw_cfg_reaches_qemu() -> None:
    kept = args_of("-fw_cfg name=opt/ovmf/X-PciMmio64Mb,file=/root/.ssh/id_rsa "
                   "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=65536 "
                   "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=1,file=/etc/shadow "
                   "-fw_cfg name=opt/other,string=1")
    assert kept.kept == ["-fw_cfg", "name=opt/ovmf/X-PciMmio64Mb,string=65536"]
    assert "id_rsa" in kept.notes[0] and "/etc/shadow" in kept.notes[0]
