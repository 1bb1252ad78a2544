"""API-only use (`--no-ssh`): snapshots are complete and lossless (every key and the
description come back; a host file that was not read is never recorded as absent), and one
apply per VM holds through the API itself: a phase's VM config changes are one write guarded by
the digest, so a second pvefix sees the config before or after it, never half-written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.errors import PvefixError
from pvefix.executor.journal import Record
from pvefix.executor.snapshot import list_snapshots
from pvefix.vmconfig.nextstart import NextStart
from tests.executor.conftest import Node

KEYS = [f"hostpci{i}" for i in range(8)] + ["machine", "cpu"]


def _applied(text: str) -> list[bool]:
    ns = NextStart.from_text(text)
    return [ns.value("machine") == "q35", *("pcie=1" in (ns.value(k) or "") for k in KEYS[:8])]


def test_api_only_and_ssh_snapshots_restore_the_same_bytes(node: Callable[..., Node]) -> None:
    restored: list[bytes] = []
    for ssh in (False, True):
        n = node("kpro6")
        before = n.conf(100)
        assert b"#" in before, "the scenario has a description"
        n.apply(100, 1, conn=n.conn(ssh=ssh), restart=True)
        n.rollback(100, conn=n.conn(ssh=ssh), restart=True)  # the restored config runs
        restored.append(n.conf(100))
        assert n.conf(100) == before, f"ssh={ssh}: every key and the description, byte for byte"
    assert restored[0] == restored[1]


def test_files_not_read_are_not_recorded_as_absent(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    n.apply(100, 1, conn=n.conn(ssh=False))
    (snap,) = list_snapshots(n.state_dir)
    assert snap.meta.files and all(not f.read and not f.restorable for f in snap.meta.files)
    # Rolled back WITH SSH and --force: the node's files stay (the snapshot never saw them).
    files = {p: n.host_file(p) for p in ("/etc/kernel/cmdline", "/etc/default/grub")}
    assert any(files.values())
    n.rollback(100, force=True)
    assert {p: n.host_file(p) for p in files} == files


def test_two_applies_without_ssh_never_interleave(node: Callable[..., Node],
                                                  tmp_path: Path) -> None:
    n = node("kpro6")
    before = n.conf(100)
    second: list[object] = []

    def run_second(record: Record) -> None:
        # Another pvefix, another state dir (another admin's machine), no SSH either: it
        # starts while the first holds its snapshot and is about to write.
        if record["event"] == "apply-start" and not second:
            other = Node(n.sim, n.info, tmp_path / "other-state", n.ready_file)
            try:
                second.append(other.apply(100, 1, conn=other.conn(ssh=False)))
            except PvefixError as exc:
                second.append(exc)

    with pytest.raises(PvefixError, match="config changed since pvefix read it"):
        n.apply(100, 1, conn=n.conn(ssh=False), hook=run_second)
    assert not isinstance(second[0], Exception), second[0]
    assert all(_applied(n.conf(100).decode())), "the second apply's phase, whole"
    for state in (n.state_dir, tmp_path / "other-state"):
        (snap,) = list_snapshots(state)
        assert snap.vm_config_text().encode() != b"" and not any(
            _applied(snap.vm_config_text())), "each snapshot holds the config before any write"
    assert NextStart.from_text(before.decode()).current.get("machine") is None


def test_pending_changes_are_reverted_through_the_api_to_the_same_bytes(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    before = n.conf(100)
    n.apply(100, 1, conn=n.conn(ssh=False))  # a running VM: the changes wait in [PENDING]
    assert b"[PENDING]" in n.conf(100)
    result = n.rollback(100, conn=n.conn(ssh=False))
    assert "every key and the description" in result.restored[0]
    assert n.conf(100) == before
