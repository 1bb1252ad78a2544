"""The simulated node's `tar -c -f -` of pmxcfs's VM configs: the bytes Python's TarFile would
write, every VM of the cluster once, and no file reached through a link out of the tree."""

from __future__ import annotations

import io
import shlex
import tarfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pvefix.hosttree import HostTree, load_tree
from pvefix.hosttree.scenarios import materialize_scenario
from pvefix.sim.commands import Shell
from pvefix.sim.state import NodeState
from pvefix.sources.pmxcfs import BULK_COMMAND, parse_bulk
from pvefix.target.result import CommandResult


def _shell(tree: HostTree, tmp: Path) -> Shell:
    keys: Any = SimpleNamespace(dir=tmp)
    return Shell(NodeState(tree, keys, faults=None))  # type: ignore[arg-type]


def _run(sh: Shell, argv: tuple[str, ...] | list[str]) -> CommandResult:
    done = sh.run(shlex.join(argv))
    return CommandResult(tuple(argv), done.code, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> HostTree:
    root = tmp_path_factory.mktemp("large") / "tree"
    materialize_scenario("large", root, vms=40)
    return load_tree(root)


def test_the_stream_is_what_tarfile_writes(large: HostTree, tmp_path: Path) -> None:
    result = _run(_shell(large, tmp_path), BULK_COMMAND)
    data = result.stdout.encode("utf-8", "surrogateescape")
    assert result.exit_code == 0 and len(data) % tarfile.RECORDSIZE == 0
    again = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data)) as src, \
            tarfile.open(fileobj=again, mode="w", format=tarfile.GNU_FORMAT) as dst:
        for member in src:
            dst.addfile(member, src.extractfile(member))
    assert again.getvalue() == data


def test_every_vm_of_the_cluster_once_with_its_exact_bytes(large: HostTree,
                                                           tmp_path: Path) -> None:
    configs = parse_bulk(_run(_shell(large, tmp_path), BULK_COMMAND))
    assert {vmid: c.node for vmid, c in configs.items()} == large.vms()
    for vmid, config in configs.items():
        assert config.text == large.read_vm_config(vmid)


def test_a_config_linked_out_of_the_tree_is_not_read(large: HostTree, tmp_path: Path) -> None:
    # The folder is checked once; each file is still lstat'ed and opened without following.
    secret = tmp_path / "secret.conf"
    secret.write_text("memory: 1\n# not the cluster's\n")
    node = next(iter(large.vms().values()))
    folder = large.root / "etc/pve/nodes" / node / "qemu-server"
    (folder / "999999.conf").symlink_to(secret)
    result = _run(_shell(large, tmp_path), BULK_COMMAND)
    assert result.exit_code == 2
    assert f"/etc/pve/nodes/{node}/qemu-server/999999.conf: Cannot stat" in result.stderr
    assert b"not the cluster's" not in result.stdout.encode("utf-8", "surrogateescape")
    (folder / "999999.conf").unlink()


@pytest.mark.parametrize(("name", "size", "mtime"), [
    ("etc/pve/nodes/node1/qemu-server/100.conf", 0, 0),
    ("etc/pve/nodes/node1/qemu-server/999999999.conf", 1024 * 1024, 1_796_356_798),
    ("etc/pve/nodes/n\u00e9ud/qemu-server/100.conf", 17, 1),  # non-ASCII: UTF-8 in the name
    ("etc/" + "x" * 96, 5, 5),  # 100 bytes: GNU's long-name member, from tobuf
    ("etc/a\udcff.conf", 3, 3),  # a byte that is not UTF-8 (surrogateescape)
    ("etc/big", 8 ** 11, 8 ** 11),  # past 11 octal digits: tobuf's own encodings
])
def test_each_header_is_the_one_tarinfo_writes(name: str, size: int, mtime: int) -> None:
    from pvefix.sim.commands_archive import _header, _info

    assert _header(name, size, mtime) == _info(name, size, mtime).tobuf(
        tarfile.GNU_FORMAT, "utf-8", "surrogateescape")


# -- the stream kept between requests ----------------------------------------------------------


@pytest.fixture
def fresh(tmp_path: Path) -> HostTree:
    """A small cluster of its own: these tests change its configs."""
    root = tmp_path / "tree"
    materialize_scenario("large", root, vms=12)
    return load_tree(root)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Each stream built from the files (not the kept one), by its operands."""
    from pvefix.sim import commands_archive

    built: list[list[str]] = []
    real = commands_archive._archive

    def counting(sh: Shell, operands: list[str]) -> Any:
        built.append(operands)
        return real(sh, operands)

    monkeypatch.setattr(commands_archive, "_archive", counting)
    return built


def _settled_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file counts as settled (a test cannot wait for the window)."""
    monkeypatch.setattr("pvefix.sim.commands_archive.SETTLED_NS", -10 ** 12)


def _rewrite(path: Path, text: str) -> None:
    """Write in place, a tick of the file clock after the last stamp (so it can be seen)."""
    before = path.stat().st_ctime_ns
    while True:
        time.sleep(0.02)
        with path.open("r+", encoding="utf-8") as f:
            f.truncate(0)
            f.write(text)
        if path.stat().st_ctime_ns != before:
            return


def test_unchanged_configs_give_the_kept_stream(fresh: HostTree, tmp_path: Path,
                                                builds: list[list[str]],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _settled_now(monkeypatch)
    sh = _shell(fresh, tmp_path)
    first, second = _run(sh, BULK_COMMAND), _run(sh, BULK_COMMAND)
    assert len(builds) == 1
    assert (second.stdout, second.stderr, second.exit_code) == (
        first.stdout, first.stderr, first.exit_code)


def test_a_config_changed_in_place_to_the_same_size_is_read_again(
    fresh: HostTree, tmp_path: Path, builds: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _settled_now(monkeypatch)
    sh = _shell(fresh, tmp_path)
    vmid, node = next(iter(fresh.vms().items()))
    path = fresh.root / f"etc/pve/nodes/{node}/qemu-server/{vmid}.conf"
    old = path.read_text(encoding="utf-8")
    _run(sh, BULK_COMMAND)
    changed = old.replace("memory: ", "memorx: ", 1) if "memory: " in old else "x" + old[1:]
    assert len(changed) == len(old) and changed != old
    _rewrite(path, changed)
    got = parse_bulk(_run(sh, BULK_COMMAND))
    assert got[vmid].text == changed
    assert len(builds) == 2


def test_an_added_and_a_removed_config_are_seen(fresh: HostTree, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _settled_now(monkeypatch)
    sh = _shell(fresh, tmp_path)
    vmid, node = next(iter(fresh.vms().items()))
    folder = fresh.root / f"etc/pve/nodes/{node}/qemu-server"
    assert vmid in parse_bulk(_run(sh, BULK_COMMAND))
    (folder / "4242.conf").write_text("memory: 512\n", encoding="utf-8")
    (folder / f"{vmid}.conf").unlink()
    got = parse_bulk(_run(sh, BULK_COMMAND))
    assert got[4242].text == "memory: 512\n" and vmid not in got


def test_a_config_changed_within_the_window_is_never_kept(
    fresh: HostTree, tmp_path: Path, builds: list[list[str]],
) -> None:
    # The tree was just written: its files are too new to trust to their stamps.
    sh = _shell(fresh, tmp_path)
    _run(sh, BULK_COMMAND)
    _run(sh, BULK_COMMAND)
    assert len(builds) == 2


def test_a_link_among_the_configs_is_never_kept(fresh: HostTree, tmp_path: Path,
                                               builds: list[list[str]],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _settled_now(monkeypatch)
    target = tmp_path / "elsewhere.conf"
    target.write_text("memory: 1\n", encoding="utf-8")
    node = next(iter(fresh.vms().values()))
    (fresh.root / f"etc/pve/nodes/{node}/qemu-server/999999.conf").symlink_to(target)
    sh = _shell(fresh, tmp_path)
    first, second = _run(sh, BULK_COMMAND), _run(sh, BULK_COMMAND)
    assert len(builds) == 2 and first.stderr == second.stderr
    assert "999999.conf: Cannot stat" in second.stderr
