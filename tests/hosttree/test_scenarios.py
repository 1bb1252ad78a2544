"""The built-in scenarios load, validate, and say what their READMEs promise."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvefix.errors import PvefixError
from pvefix.hosttree import (
    PciDevice,
    list_scenarios,
    load_tree,
    materialize_scenario,
    resolve_scenario,
)
from pvefix.hosttree.large import generate_large

SHIPPED = [
    "genoa-l40s-pool", "grub-dropin", "intel-grub", "kpro6", "sapphire-2s", "windows-igd",
    "xeon-seabios-h200",
]
GIB = 1024**3
MIB = 1024**2


def test_the_builtins_are_listed_with_a_summary() -> None:
    infos = {info.name: info for info in list_scenarios()}
    assert sorted(infos) == sorted([*SHIPPED, "large", "cluster3"])
    assert all(info.summary and not info.summary.startswith("#") for info in infos.values())
    assert infos["large"].generated and not infos["kpro6"].generated
    assert infos["cluster3"].generated


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_scenario_loads_and_validates(name: str) -> None:
    tree = load_tree(resolve_scenario(name))
    assert tree.vms(), f"{name} has no VMs"
    assert tree.pci_devices(), f"{name} has no PCI devices"
    for vmid in tree.vms():
        assert tree.read_vm_config(vmid).endswith("\n")


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenarios_hold_no_symlinks(name: str) -> None:
    root = resolve_scenario(name)
    links = [p for p in root.rglob("*") if p.is_symlink()]
    assert links == []


def _gpus(devices: list[PciDevice]) -> list[PciDevice]:
    return [d for d in devices if d.vendor == "0x10de" and d.is_display]


def test_kpro6_has_eight_pro6000_in_the_story_iommu_groups() -> None:
    gpus = _gpus(load_tree(resolve_scenario("kpro6")).pci_devices())
    assert [g.iommu_group for g in gpus] == [42, 61, 28, 10, 101, 117, 90, 72]
    assert {g.id_pair for g in gpus} == {"10de:2bb5"}
    assert {g.class_ for g in gpus} == {"0x030200"}
    assert [g.numa_node for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_kpro6_gpu_bars_are_64mib_128gib_and_32mib() -> None:
    for gpu in _gpus(load_tree(resolve_scenario("kpro6")).pci_devices()):
        bar0, bar1, bar3 = gpu.bar(0), gpu.bar(1), gpu.bar(3)
        assert bar0 is not None and bar1 is not None and bar3 is not None
        assert (bar0.size, bar0.is_64bit, bar0.prefetchable) == (64 * MIB, False, False)
        assert (bar1.size, bar1.is_64bit, bar1.prefetchable) == (128 * GIB, True, True)
        assert (bar3.size, bar3.is_64bit, bar3.prefetchable) == (32 * MIB, True, True)
        assert [b.index for b in gpu.bars] == [0, 1, 3]


def test_kpro6_each_gpu_sits_behind_its_own_root_port_on_its_own_root_complex() -> None:
    gpus = _gpus(load_tree(resolve_scenario("kpro6")).pci_devices())
    paths = [g.parent_path for g in gpus]
    assert paths[0] == ["pci0000:00", "0000:00:01.1"]
    assert [p[0] for p in paths] == [f"pci0000:{rc}" for rc in
                                     ("00", "20", "40", "60", "80", "a0", "c0", "e0")]
    assert all(len(p) == 2 for p in paths)
    assert len({p[1] for p in paths}) == 8


def test_kpro6_mapping_matches_the_sysfs_facts() -> None:
    tree = load_tree(resolve_scenario("kpro6"))
    mappings = tree.pci_mappings()
    assert mappings is not None
    entries = mappings.mappings["pro6000"].for_node("kpro6")
    by_address = {d.address: d for d in tree.pci_devices()}
    assert len(entries) == 8
    for entry in entries:
        device = by_address[entry.path]
        assert (entry.id, entry.iommugroup, entry.subsystem_id) == (
            device.id_pair, device.iommu_group, device.subsystem_pair)


def test_kpro6_boots_systemd_boot_with_a_cmdline_lacking_iommu_pt() -> None:
    tree = load_tree(resolve_scenario("kpro6"))
    assert tree.read_text("/etc/kernel/cmdline") == "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"
    proc = tree.read_text("/proc/cmdline") or ""
    assert proc.startswith("initrd=\\EFI\\proxmox\\6.17.2-1-pve\\")
    assert "iommu=pt" not in proc
    assert tree.meta.proxmox_boot_tool.exit_code == 0
    assert "configured with: uefi" in tree.meta.proxmox_boot_tool.output
    assert tree.meta.cpu.vendor == "AuthenticAMD"
    assert tree.meta.versions.kernel.startswith("6.17.")


def test_kpro6_vm100_runs_on_i440fx_with_eight_mapped_gpus_and_vm101_is_stopped() -> None:
    tree = load_tree(resolve_scenario("kpro6"))
    text = tree.read_vm_config(100)
    assert "machine:" not in text
    assert [line for line in text.splitlines() if line.startswith("hostpci")] == [
        f"hostpci{i}: mapping=pro6000" for i in range(8)
    ]
    assert "cpu: x86-64-v2-AES\n" in text
    assert tree.vm_state(100).running_machine == "pc-i440fx-10.1+pve0"
    assert tree.vm_state(101).status == "stopped"
    assert "hostpci" not in tree.read_vm_config(101)


def test_intel_grub_has_plain_grub_and_a_shared_iommu_group() -> None:
    tree = load_tree(resolve_scenario("intel-grub"))
    assert tree.meta.proxmox_boot_tool.exit_code == 2
    assert tree.read_text("/etc/kernel/cmdline") is None
    grub = tree.read_text("/etc/default/grub") or ""
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on"' in grub
    groups = [g.iommu_group for g in _gpus(tree.pci_devices())]
    assert len(groups) == 4 and groups.count(72) == 2
    config = tree.read_vm_config(200)
    assert "machine: pc-i440fx-8.1\n" in config and "x-vga=1" in config
    assert "hostpci0: 0000:17:00\n" in config  # no function: all functions


def test_sapphire_2s_has_two_gpus_with_audio_on_each_socket_and_a_mapping_per_socket() -> None:
    tree = load_tree(resolve_scenario("sapphire-2s"))
    assert tree.meta.cpu.vendor == "GenuineIntel" and tree.meta.cpu.sockets == 2
    gpus = _gpus(tree.pci_devices())
    assert [(g.address, g.numa_node, g.class_) for g in gpus] == [
        ("0000:16:00.0", 0, "0x030000"), ("0000:38:00.0", 0, "0x030000"),
        ("0000:98:00.0", 1, "0x030000"), ("0000:b8:00.0", 1, "0x030000")]
    audio = {d.address: d.iommu_group for d in tree.pci_devices() if d.class_ == "0x040300"}
    assert audio == {g.address[:-1] + "1": g.iommu_group for g in gpus}  # same group as its GPU
    assert len({tuple(g.parent_path) for g in gpus}) == 4  # each behind its own root port
    mappings = tree.pci_mappings()
    assert mappings is not None
    numa = {g.address: g.numa_node for g in gpus}
    for name, node in (("ada-s0", 0), ("ada-s1", 1)):
        paths = [e.path for e in mappings.mappings[name].for_node("spr2")]
        assert len(paths) == 2 and {numa[p] for p in paths} == {node}
    assert "iommu=pt" in (tree.read_text("/proc/cmdline") or "")
    vm500, vm501 = tree.read_vm_config(500), tree.read_vm_config(501)
    assert "args: -set device.net0.rombar=0\n" in vm500 and "mapping=ada-s1" in vm500
    assert "hostpci0: 0000:16:00,pcie=1\n" in vm501  # no function: GPU and audio
    assert tree.vm_state(500).running_machine == "pc-q35-10.1+pve0"


def test_windows_igd_has_a_pinned_windows_vm_and_a_legacy_igd_vm() -> None:
    tree = load_tree(resolve_scenario("windows-igd"))
    assert "configured with: grub" in tree.meta.proxmox_boot_tool.output
    win = tree.read_vm_config(300)
    assert "ostype: win11\n" in win and "machine: pc-i440fx-9.2+pve1\n" in win
    assert win.count("mapping=rtx4090") == 2
    assert "hostpci0: 0000:00:02.0,legacy-igd=1\n" in tree.read_vm_config(301)


def test_materialize_copies_once_and_then_keeps_state(tmp_path: Path) -> None:
    dest = tmp_path / "work"
    tree = materialize_scenario("kpro6", dest)
    assert not (dest / "README.md").exists()
    tree.write_text("/etc/kernel/cmdline", "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n")
    tree.meta.vms["100"].uptime = 7
    tree.save_meta()
    again = materialize_scenario("kpro6", dest)
    assert again.read_text("/etc/kernel/cmdline") == "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n"
    assert again.vm_state(100).uptime == 7
    pristine = load_tree(resolve_scenario("kpro6"))
    assert "iommu=pt" not in (pristine.read_text("/etc/kernel/cmdline") or "")


def test_materialize_leaves_dot_entries_alone_and_refuses_foreign_files(tmp_path: Path) -> None:
    dest = tmp_path / "sim"
    (dest / ".pvefix-sim").mkdir(parents=True)
    (dest / ".pvefix-sim" / "key").write_text("x")
    materialize_scenario("windows-igd", dest)
    assert (dest / ".pvefix-sim" / "key").read_text() == "x"
    other = tmp_path / "home"
    other.mkdir()
    (other / "thesis.tex").write_text("precious")
    with pytest.raises(PvefixError, match=r"thesis\.tex"):
        materialize_scenario("kpro6", other)


def test_resolve_accepts_a_path_and_names_the_builtins_when_lost(tmp_path: Path) -> None:
    tree = materialize_scenario("kpro6", tmp_path / "copy")
    assert resolve_scenario(tmp_path / "copy") == tree.root
    with pytest.raises(PvefixError, match="kpro6"):
        resolve_scenario("no-such-scenario")


def test_large_generates_1000_vms_on_8_nodes(tmp_path: Path) -> None:
    tree = materialize_scenario("large", tmp_path / "large")
    vms = tree.vms()
    assert len(vms) == 1000
    assert sorted(set(vms.values())) == [f"node{i}" for i in range(1, 9)]
    gpu_vms = [v for v in vms if "hostpci0:" in tree.read_vm_config(v)]
    assert 60 <= len(gpu_vms) <= 140, len(gpu_vms)
    machines = {tree.read_vm_config(v).count("machine: q35") > 0 for v in vms}
    assert machines == {True, False}


def test_large_is_deterministic(tmp_path: Path) -> None:
    generate_large(tmp_path / "a")
    generate_large(tmp_path / "b")
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*"))
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*"))
    assert files_a == files_b
    for rel in files_a:
        if (tmp_path / "a" / rel).is_file():
            assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_resolving_large_generates_into_the_cache_once() -> None:
    first = resolve_scenario("large")
    assert len(load_tree(first).vms()) == 1000
    assert resolve_scenario("large") == first
