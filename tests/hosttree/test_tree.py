"""HostTree: where VMs live, host paths, atomic writes."""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.errors import ParseError, PvefixError
from pvefix.hosttree import HostTree, load_tree


def test_a_vm_configured_twice_is_an_error_naming_both_places(kpro6: HostTree) -> None:
    nodes_dir = kpro6.root / "etc/pve/nodes/kpro6/qemu-server"
    nodes_dir.mkdir(parents=True)
    shutil.copy(kpro6.root / "etc/pve/qemu-server/100.conf", nodes_dir / "100.conf")
    with pytest.raises(ParseError, match="VM 100 is configured twice") as err:
        load_tree(kpro6.root)
    message = str(err.value)
    assert "etc/pve/qemu-server/100.conf" in message
    assert "etc/pve/nodes/kpro6/qemu-server/100.conf" in message


def test_a_linked_qemu_server_dir_lists_each_vm_once(kpro6: HostTree) -> None:
    pve = kpro6.root / "etc/pve"
    (pve / "nodes/kpro6").mkdir(parents=True)
    (pve / "qemu-server").rename(pve / "nodes/kpro6/qemu-server")
    (pve / "qemu-server").symlink_to("nodes/kpro6/qemu-server")
    assert load_tree(kpro6.root).vms() == {100: "kpro6", 101: "kpro6"}


def test_a_vm_on_a_node_outside_the_cluster_is_named(kpro6: HostTree) -> None:
    other = kpro6.root / "etc/pve/nodes/ghost/qemu-server"
    other.mkdir(parents=True)
    (other / "500.conf").write_text("memory: 512\n")
    with pytest.raises(ParseError, match="node 'ghost', which is not in cluster_nodes"):
        load_tree(kpro6.root)


def test_a_state_for_a_vm_without_config_is_named(kpro6: HostTree) -> None:
    (kpro6.root / "etc/pve/qemu-server/101.conf").unlink()
    with pytest.raises(ParseError, match=r"pvefix-host\.json: vms\.101: no config file"):
        load_tree(kpro6.root)


def test_only_vmid_conf_files_are_vms(kpro6: HostTree) -> None:
    qs = kpro6.root / "etc/pve/qemu-server"
    (qs / "100.conf.tmp.4242").write_text("x")
    (qs / "notes.txt").write_text("x")
    assert sorted(load_tree(kpro6.root).vms()) == [100, 101]


def test_an_unknown_vm_has_no_config_path(kpro6: HostTree) -> None:
    with pytest.raises(PvefixError, match="no VM 555"):
        kpro6.vm_config_path(555)


def test_read_text_maps_host_paths_and_misses_are_none(kpro6: HostTree) -> None:
    assert kpro6.read_text("/etc/kernel/cmdline") == "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"
    assert kpro6.read_text("/etc/modprobe.d/vfio.conf") is None


def test_pmxcfs_aliases_find_a_vm_in_the_nodes_directory(kpro6: HostTree) -> None:
    pve = kpro6.root / "etc/pve"
    (pve / "nodes/kpro6").mkdir(parents=True)
    (pve / "qemu-server").rename(pve / "nodes/kpro6/qemu-server")
    assert "hostpci0" in (kpro6.read_text("/etc/pve/qemu-server/100.conf") or "")
    assert "hostpci0" in (kpro6.read_text("/etc/pve/local/qemu-server/100.conf") or "")


@pytest.mark.parametrize("bad", ["etc/kernel/cmdline", "/etc/../../x", "/.pvefix-sim/key", "/"])
def test_paths_outside_the_host_are_refused(kpro6: HostTree, bad: str) -> None:
    with pytest.raises(PvefixError):
        kpro6.read_text(bad)


def test_write_text_replaces_atomically_and_keeps_the_mode(kpro6: HostTree) -> None:
    target = kpro6.root / "etc/kernel/cmdline"
    target.chmod(0o600)
    kpro6.write_text("/etc/kernel/cmdline", "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n")
    assert target.read_text() == "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["cmdline", "proxmox-boot-uuids"]


def test_write_text_creates_new_files_with_their_directories(kpro6: HostTree) -> None:
    kpro6.write_text("/etc/modprobe.d/vfio.conf", "options vfio-pci ids=10de:2bb5\n")
    assert kpro6.read_text("/etc/modprobe.d/vfio.conf") == "options vfio-pci ids=10de:2bb5\n"


def test_undecodable_bytes_survive_a_round_trip(kpro6: HostTree) -> None:
    path = kpro6.root / "etc/default/grub"
    path.write_bytes(b"# caf\xe9\n")
    kpro6.write_text("/etc/default/grub", kpro6.read_text("/etc/default/grub") or "")
    assert path.read_bytes() == b"# caf\xe9\n"


def test_config_paths_follow_a_vm_that_moved_or_vanished(kpro6: HostTree) -> None:
    assert kpro6.vm_config_path(101).parent.name == "qemu-server"
    kpro6.meta.cluster_nodes.append("kpro7")
    moved = kpro6.root / "etc/pve/nodes/kpro7/qemu-server"
    moved.mkdir(parents=True)
    (kpro6.root / "etc/pve/qemu-server/101.conf").rename(moved / "101.conf")
    assert kpro6.vm_config_path(101) == moved / "101.conf"
    assert kpro6.vms()[101] == "kpro7"
    (moved / "101.conf").unlink()
    with pytest.raises(PvefixError, match="no VM 101"):
        kpro6.vm_config_path(101)


# host_path splits components with strings (the simulator maps thousands per `tar`); it must
# split them as PurePosixPath does.
_COMPONENT = st.sampled_from(["etc", "pve", ".", "..", "", "a.conf", ".hidden", "x y", "-"])


@given(st.lists(_COMPONENT, max_size=6), st.booleans(),
       st.sampled_from(["/srv/tree", "/", "tree", "."]))
def test_host_path_splits_as_pure_posix_path(parts: list[str], absolute: bool,
                                             root: str) -> None:
    tree = HostTree.__new__(HostTree)
    tree.root = Path(root)
    text = ("/" if absolute else "") + "/".join(parts)
    pure = PurePosixPath(text)
    ok = pure.is_absolute() and ".." not in pure.parts and len(pure.parts) > 1 \
        and not pure.parts[1].startswith(".")
    if not ok:
        with pytest.raises(PvefixError):
            tree.host_path(text)
        return
    if pure.parts[1:3] == ("etc", "pve") and len(pure.parts) > 4:
        return  # the pmxcfs link mapping looks at the disk: tested with real trees
    assert tree.host_path(text) == tree.root.joinpath(*pure.parts[1:])
