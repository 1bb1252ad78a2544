"""The simulator where truth depends on it (issue 26): the ESP refresh's root= check, a host
booted without an IOMMU, the root-only options a token may not set. Each message and status is
Proxmox's own (proxmox-kernel-helper zz-proxmox-boot, qemu-server PCI.pm and API2/Qemu.pm)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from proxmoxer.core import ResourceException

from pvefix.sim.serve import ReadyInfo
from tests.planner.loader import build_tree
from tests.simkit import api, run, ssh, wait_task

KPRO6_PROC = (
    "initrd=\\EFI\\proxmox\\6.17.2-1-pve\\initrd.img-6.17.2-1-pve"
    " root=ZFS=rpool/ROOT/pve-1 boot=zfs"
)


def _tree(tmp_path: Path, scenario: str, **spec: Any) -> str:
    return str(build_tree({"scenario": scenario, "tree": spec}, tmp_path))


@pytest.mark.parametrize("scenario", ["windows-igd", "kpro6"])  # GRUB on ESPs, systemd-boot
def test_refresh_aborts_without_root_in_kernel_cmdline(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path, scenario: str
) -> None:
    tree = _tree(tmp_path, scenario, write={"/etc/kernel/cmdline": "quiet iommu=pt\n"})
    client = ssh(fresh_sim(tree))
    try:
        code, out, err = run(client, "proxmox-boot-tool refresh")
        assert (code, err) == (1, "No root= parameter in /etc/kernel/cmdline found!\n")
        assert out.endswith("in new private mount namespace..\n")  # stops before any ESP
        assert "Copying" not in out
    finally:
        client.close()


def test_refresh_on_plain_grub_never_reads_kernel_cmdline(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path
) -> None:
    tree = _tree(tmp_path, "intel-grub", write={"/etc/kernel/cmdline": "quiet\n"})
    client = ssh(fresh_sim(tree))
    try:
        code, out, _ = run(client, "proxmox-boot-tool refresh")
        assert code == 0
        assert "skipping ESP sync" in out
    finally:
        client.close()


NOT_PRESENT = "cannot prepare PCI pass-through, IOMMU not present"
# PVE::Mapping::PCI::assert_valid, inside parse_hostpci: before prepare_pci_device's check
MAPPING_GROUP = ("PCI device mapping invalid (hardware probably changed): unexpected property"
                 " 'iommugroup' configured for device '0000:01:00.0' ")


@pytest.mark.parametrize(
    ("scenario", "vmid", "spec", "message"),
    [
        ("kpro6", 100, {"write": {"/proc/cmdline": KPRO6_PROC + " amd_iommu=off\n"}},
         NOT_PRESENT),
        # the generic iommu=off: no_iommu, and a later iommu=pt does not clear it
        # (arch/x86/kernel/pci-dma.c iommu_setup; fw-lab --guest: no IOMMU unit)
        ("kpro6", 100, {"write": {"/proc/cmdline": KPRO6_PROC + " iommu=off iommu=pt\n"}},
         NOT_PRESENT),
        ("intel-grub", 201,
         {"write": {"/proc/cmdline": "root=/dev/mapper/pve-root ro iommu=off\n"}}, NOT_PRESENT),
        ("kpro6", 100, {"write": {"/sys/class/iommu/.keep": ""}}, NOT_PRESENT),
        ("kpro6", 100, {"remove": ["/sys/devices/**/iommu_group"]}, MAPPING_GROUP),
        ("intel-grub", 201, {"remove": ["/sys/devices/**/iommu_group"]}, NOT_PRESENT),
    ],
    ids=["amd_iommu=off-booted", "iommu=off-iommu=pt-booted", "intel-iommu=off-booted",
         "empty-sys-class-iommu", "mapped-no-groups", "raw-no-groups"],
)
def test_a_host_without_an_iommu_refuses_passthrough_starts(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path, scenario: str, vmid: int,
    spec: dict[str, Any], message: str,
) -> None:
    """The messages as Proxmox's own daemons gave them (../shared/pve-api, /sys/class/iommu
    emptied in the node): a raw device gets prepare_pci_device's, a mapped one whose map line
    names an IOMMU group the host no longer has fails the mapping check first."""
    info = fresh_sim(_tree(tmp_path, scenario, **spec))
    ticket = api(info, "ticket")
    for other in ticket.nodes(info.node).qemu.get():  # nothing else holds the devices
        if other["status"] == "running":
            wait_task(ticket, ticket.nodes(info.node).qemu(other["vmid"]).status.stop.post())
    vm = ticket.nodes(info.node).qemu(vmid)
    status = wait_task(ticket, vm.status.start.post())
    assert status["exitstatus"] == message
    assert vm.status.current.get()["status"] == "stopped"


def test_a_host_with_an_iommu_starts_them(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path
) -> None:
    info = fresh_sim(_tree(tmp_path, "kpro6", write={"/sys/class/iommu/ivhd0/.keep": ""}))
    ticket = api(info, "ticket")
    vm = ticket.nodes(info.node).qemu(100)
    vm.status.stop.post()
    assert wait_task(ticket, vm.status.start.post())["exitstatus"] == "OK"


def test_a_token_may_not_touch_a_romfile_on_a_mapped_entry(
    own: Callable[..., Any],
) -> None:
    info, token, ticket = own()
    vm101 = ticket.nodes(info.node).qemu(101).config
    with pytest.raises(ResourceException) as err:  # adding it
        token.nodes(info.node).qemu(101).config.put(hostpci0="mapping=pro6000,romfile=a.rom")
    assert err.value.status_code == 400
    assert err.value.errors == {"hostpci0": "only root@pam can set 'romfile' option"}
    vm101.put(hostpci0="mapping=pro6000,romfile=a.rom")  # root@pam may
    for value in ("mapping=pro6000,romfile=a.rom,pcie=1", "mapping=pro6000,pcie=1"):
        with pytest.raises(ResourceException) as err:  # keeping it, or dropping it: old value
            token.nodes(info.node).qemu(101).config.put(hostpci0=value)
        assert err.value.errors == {"hostpci0": "only root@pam can set 'romfile' option"}
    with pytest.raises(ResourceException) as err:  # deleting the entry
        token.nodes(info.node).qemu(101).config.put(delete="hostpci0")
    assert err.value.errors == {"hostpci0": "only root@pam can set 'romfile' option"}
    assert vm101.get()["hostpci0"] == "mapping=pro6000,romfile=a.rom"


@pytest.mark.parametrize("key,value", [("affinity", "0-3"), ("hugepages", "1024")])
def test_a_token_may_not_set_the_other_root_only_options(
    own: Callable[..., Any], key: str, value: str
) -> None:
    info, token, ticket = own()
    with pytest.raises(ResourceException) as err:
        token.nodes(info.node).qemu(101).config.put(**{key: value})
    assert (err.value.status_code, err.value.content) == (500, f"only root can set '{key}' config")
    ticket.nodes(info.node).qemu(101).config.put(**{key: value})
