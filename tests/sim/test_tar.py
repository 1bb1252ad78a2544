"""The simulated node's `tar -c -f -` of pmxcfs's VM configs: the bytes Python's TarFile would
write, every VM of the cluster once, and no file reached through a link out of the tree."""

from __future__ import annotations

import io
import shlex
import tarfile
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
