"""The state dir is trusted only as OpenSSH trusts ~/.ssh: it and everything in it owned by the
effective user and writable by nobody else, no symlink followed, or pvefix refuses naming the
chown / chmod / rm to run (a state dir another local user pre-made under a shared folder)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.errors import EXIT_ERROR, PvefixError
from pvefix.store.statedir import (
    check_state_tree,
    ensure_private_dir,
    open_state_dir,
    read_private,
)
from tests.executor.conftest import Captured, Node
from tests.executor.test_local_backend import _cli, _on_the_node

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


def _state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    ensure_private_dir(state / "desired")
    (state / "desired" / "100.toml").write_text("# ours\n")
    os.chmod(state / "desired" / "100.toml", 0o600)
    return state


def _refusal(path: Path) -> str:
    with pytest.raises(PvefixError) as caught:
        check_state_tree(path)
    return str(caught.value)


def test_a_private_state_dir_of_ours_passes(tmp_path: Path) -> None:
    state = _state(tmp_path)
    check_state_tree(state)
    assert open_state_dir(state) == state
    check_state_tree(tmp_path / "not-yet")  # made later, 0700, by pvefix itself


def test_a_planted_desired_symlink_is_refused_and_never_written_through(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    ensure_private_dir(state)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (state / "desired").symlink_to(elsewhere)
    said = _refusal(state)
    assert f"rm {state / 'desired'}" in said
    with pytest.raises(PvefixError, match="symlink"):
        ensure_private_dir(state / "desired")
    assert list(elsewhere.iterdir()) == []


def test_a_file_symlink_in_a_snapshot_is_never_read(tmp_path: Path) -> None:
    state = _state(tmp_path)
    secret = tmp_path / "shadow"
    secret.write_text("root:x\n")
    link = state / "desired" / "200.toml"
    link.symlink_to(secret)
    assert f"rm {link}" in _refusal(state)
    with pytest.raises(PvefixError, match="symlink"):
        read_private(link)


def test_a_group_writable_file_is_refused_naming_the_chmod(tmp_path: Path) -> None:
    state = _state(tmp_path)
    os.chmod(state / "desired" / "100.toml", 0o620)
    assert f"chmod go-w {state / 'desired' / '100.toml'}" in _refusal(state)
    with pytest.raises(PvefixError, match="chmod go-w"):
        read_private(state / "desired" / "100.toml")


@as_root
def test_a_folder_of_another_uid_is_refused_naming_the_chown(tmp_path: Path) -> None:
    state = _state(tmp_path)
    os.chown(state / "desired", NOBODY, NOBODY)
    said = _refusal(state)
    assert f"chown {os.geteuid()}:{os.getegid()} {state / 'desired'}" in said
    with pytest.raises(PvefixError, match="chown"):
        ensure_private_dir(state / "desired")


@as_root
def test_a_state_dir_under_another_users_folder_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "runner-tmp"
    shared.mkdir(mode=0o755)
    os.chown(shared, NOBODY, NOBODY)
    state = shared / "pvefix"
    ensure_private_dir(state)
    assert f"chown {os.geteuid()}:{os.getegid()} {shared}" in _refusal(state)


def test_a_sticky_world_writable_folder_above_is_fine_a_plain_one_is_not(
    tmp_path: Path,
) -> None:
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)  # noqa: S103 (a /tmp of its own)
    check_state_tree(sticky / "pvefix")
    plain = tmp_path / "open"
    plain.mkdir()
    os.chmod(plain, 0o777)  # noqa: S103 (the folder refused)
    assert f"chmod go-w {plain}" in _refusal(plain / "pvefix")


@as_root
def test_apply_refuses_a_planted_state_dir_before_writing_anything(
    node: Callable[..., Node], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    n = node("kpro6")
    _on_the_node(n, tmp_path, monkeypatch)
    ensure_private_dir(n.state_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (n.state_dir / "desired").symlink_to(elsewhere)
    before = n.conf(100)
    assert _cli(n, "apply", "100", "--phase", "1", "--yes") == EXIT_ERROR
    assert "a symlink" in capsys.readouterr().err
    assert n.conf(100) == before, "nothing written to the VM"
    assert list(elsewhere.iterdir()) == []
    (n.state_dir / "desired").unlink()
    (n.state_dir / "desired").mkdir(mode=0o700)
    os.chown(n.state_dir / "desired", NOBODY, NOBODY)  # the other user's own folder
    with pytest.raises(PvefixError, match="chown"):
        n.apply(100, 1, captured=Captured())
    assert n.conf(100) == before


@as_root
def test_rollback_never_restores_a_snapshot_another_user_put_in_place(
    node: Callable[..., Node], tmp_path: Path,
) -> None:
    n = node("kpro6")
    n.apply(100, 1)
    applied = n.conf(100)
    snap = next(n.state_dir.glob("snapshots/**/vm.conf"))
    snap.write_text(snap.read_text() + "args: -fw_cfg name=opt/x,file=/etc/shadow\n")
    os.chown(snap, NOBODY, NOBODY)
    with pytest.raises(PvefixError, match="chown"):
        n.rollback(100)
    assert n.conf(100) == applied
