"""read_bundle: every built-in scenario reads into a HostState that matches its files."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from pvefix.errors import ParseError, PvefixError
from pvefix.hosttree import list_scenarios, load_tree, resolve_scenario
from pvefix.hosttree.nodes import node_tree
from pvefix.paths import HOST_FILES
from pvefix.sim.vmview import api_pending
from pvefix.sources.bundle import read_bundle
from pvefix.sources.common import pending_from_api
from pvefix.vmconfig.config import VMConfig


def _cases() -> list[tuple[str, int]]:
    cases = []
    for info in list_scenarios():
        vms = sorted(load_tree(resolve_scenario(info.name)).vms())
        cases += [(info.name, vmid) for vmid in vms[:3]]  # "large" has a thousand
    return cases


@pytest.mark.parametrize(("scenario", "vmid"), _cases())
def test_every_scenario_reads_into_a_state_that_matches_its_files(
    scenario: str, vmid: int
) -> None:
    root = resolve_scenario(scenario)
    cluster = load_tree(root)
    node = cluster.vms()[vmid]
    # The VM's own node's files and facts, when the tree holds them (nodes/NAME/).
    tree = node_tree(cluster, node) if (root / "nodes" / node).is_dir() else cluster
    state = read_bundle(root, vmid)

    raw = tree.read_vm_config(vmid)
    assert state.vm.config_text == raw
    assert state.vm.config_source == "file"
    assert state.vm.digest == hashlib.sha1(raw.encode()).hexdigest()
    assert state.vm.node == tree.vms()[vmid]
    run = tree.vm_state(vmid)
    assert (state.vm.status, state.vm.running_machine) == (run.status, run.running_machine)
    for path in HOST_FILES:
        text = tree.read_text(path)
        fact = state.file(path)
        assert fact.text == text
        want = None if text is None else hashlib.sha256(text.encode()).hexdigest()
        assert fact.sha256 == want
    assert state.boot_tool.exit_code == tree.meta.proxmox_boot_tool.exit_code
    assert state.boot_tool.output == tree.meta.proxmox_boot_tool.output
    assert state.pci_devices == tree.pci_devices()
    assert state.acs == tree.meta.acs
    assert state.node.name == tree.meta.node
    assert state.node.kernel_version == tree.meta.versions.kernel
    assert state.access.method == "bundle"


@pytest.mark.parametrize(("scenario", "vmid"), _cases())
def test_pending_rows_are_the_ones_the_api_would_answer(scenario: str, vmid: int) -> None:
    root = resolve_scenario(scenario)
    state = read_bundle(root, vmid)
    cfg = VMConfig.parse(state.vm.config_text)
    # The simulator's GET .../pending is written from Proxmox's code, independently of ours.
    assert state.vm.pending == pending_from_api(api_pending(cfg, state.vm.digest))


def test_a_pending_change_shows_as_a_pending_row() -> None:
    state = read_bundle(resolve_scenario("intel-grub"), 200)
    changed = [p for p in state.vm.pending if p.pending is not None]
    assert [(p.key, p.value, p.pending) for p in changed] == [
        ("hostpci0", "0000:17:00", "0000:17:00,pcie=1")
    ]


def test_kpro6_has_its_eight_gpus_mapping_and_systemd_boot() -> None:
    state = read_bundle(resolve_scenario("kpro6"), 100)
    assert state.boot_tool.loader == "systemd-boot"
    assert [m.id for m in state.mappings] == ["pro6000"]
    gpus = [d for d in state.pci_devices if d.vendor == "0x10de" and d.is_display]
    assert len(gpus) == 8


def test_a_directory_without_metadata_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ParseError) as err:
        read_bundle(tmp_path, 100)
    assert str(tmp_path) in str(err.value)
    assert "pvefix-host.json" in str(err.value)


def test_an_unknown_vm_is_refused_listing_the_vms_there() -> None:
    with pytest.raises(PvefixError, match=r"no VM 999 .*100, 101"):
        read_bundle(resolve_scenario("kpro6"), 999)


def test_a_bad_metadata_field_is_named_with_its_file(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    shutil.copytree(resolve_scenario("kpro6"), tree)
    meta_path = tree / "pvefix-host.json"
    meta = json.loads(meta_path.read_text())
    meta["boot"]["mode"] = "bios"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ParseError) as err:
        read_bundle(tree, 100)
    assert str(meta_path) in str(err.value)
    assert "boot.mode" in str(err.value)


def test_a_missing_kernel_cmdline_is_absent_not_an_error(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    shutil.copytree(resolve_scenario("kpro6"), tree)
    (tree / "etc" / "kernel" / "cmdline").unlink()
    state = read_bundle(tree, 100)
    fact = state.file("/etc/kernel/cmdline")
    assert (fact.exists, fact.sha256) == (False, None)


def test_several_vms_of_a_bundle_read_as_each_alone() -> None:
    from pvefix.sources.bundle import read_bundle_many

    root = resolve_scenario("cluster3")
    vmids = sorted(load_tree(root).vms())
    assert len(vmids) > 2
    many = read_bundle_many(root, vmids)
    assert [s.model_dump() for s in many] == [read_bundle(root, v).model_dump() for v in vmids]
    with pytest.raises(PvefixError, match="no VM 999"):
        read_bundle_many(root, [vmids[0], 999])
