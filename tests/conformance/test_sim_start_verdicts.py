"""The simulator decides VM starts as Proxmox's own code does: cross-checked with the oracle.

Each config is written as VM 101's raw file on a kpro6 simulator (over SFTP, as an admin's edit
would be), started through the API, and the task's verdict compared with qemu-server's
config_to_command for the same config, the tree's PCI mapping and devices. Reservations (a device
held by another running VM) need running VMs, which the oracle does not model; that check is
against the message in qemu-server's PCI.pm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pvefix.hosttree import resolve_scenario
from pvefix.sources.bundle import read_bundle
from tests.conformance.harness import ask, inputs_of
from tests.sim.conftest import own  # noqa: F401  (the fixture)
from tests.simkit import ssh, wait_task

pytestmark = pytest.mark.conformance

BASE = (
    "boot: order=scsi0\ncores: 4\nmemory: 8192\nostype: l26\n"
    "scsi0: local-zfs:vm-101-disk-0,size=32G\n"
)
CASES = {
    "pcie-on-i440fx": "hostpci0: 0000:01:00.0,pcie=1\n",
    "pcie-on-q35": "machine: q35\nhostpci0: 0000:01:00.0,pcie=1\n",
    "legacy-igd-on-q35": "machine: q35\nvga: none\nhostpci0: 0000:01:00.0,legacy-igd=1\n",
    "legacy-igd-without-vga-none": "hostpci0: 0000:01:00.0,legacy-igd=1\n",
    "legacy-igd-with-x-vga": "vga: none\nhostpci0: 0000:01:00.0,legacy-igd=1,x-vga=1\n",
    "mapping-not-found": "machine: q35\nhostpci0: mapping=nosuch,pcie=1\n",
    "mapping-found": "machine: q35\nhostpci0: mapping=pro6000,pcie=1\n",
    "x-vga-on-q35": "machine: q35\nhostpci0: 0000:01:00.0,pcie=1,x-vga=1\n",
    "both-host-and-mapping-absent": "machine: q35\nhostpci0: pcie=1\n",
    "two-legacy-igd": "vga: none\nhostpci0: 0000:00:02.0,legacy-igd=1\n"
    "hostpci1: 0000:00:03.0,legacy-igd=1\n",
    "machine-newer-than-qemu": "machine: pc-q35-11.0\n",
    "unknown-pve-revision": "machine: pc-q35-9.2+pve5\n",
    "known-pve-revision": "machine: pc-q35-9.2+pve1\n",
    "viommu-intel-on-i440fx": "machine: pc,viommu=intel\n",
    "windows-pinned-old": "ostype: win11\nmachine: pc-i440fx-5.1\n",
    "bad-hostpci-in-file": "hostpci0: zz:00.0\n",
    # Memory hotplug (Memory.pm): 8192 MiB is 1024 static and fourteen 512 MiB DIMMs; 65536
    # is not a whole number of DIMMs (the last 2048 MiB one passes it); no NUMA, no hotplug.
    "memory-hotplug-aligned": "hotplug: disk,network,usb,memory\nnuma: 1\n",
    "memory-hotplug-not-aligned": "memory: 65536\nhotplug: memory\nnuma: 1\n",
    "memory-hotplug-without-numa": "hotplug: memory\n",
    # PCI.pm parse_hostpci: an mdev entry whose alternative is more than one function dies
    "mdev-on-two-ids": "machine: q35\nhostpci0: 0000:01:00.0;0000:21:00.0,mdev=nvidia-1135,"
    "pcie=1\n",
    "legacy-igd-not-on-02.0": "vga: none\nhostpci0: 0000:01:00.0,legacy-igd=1\n",
    "legacy-igd-with-mdev": "vga: none\nhostpci0: 0000:01:00.0,legacy-igd=1,mdev=i915-GVTg_V5_4\n",
    "legacy-igd-rombar-0": "vga: none\nhostpci0: 0000:01:00.0,legacy-igd=1,rombar=0\n",
    "mdev-on-one-id": "machine: q35\nhostpci0: 0000:01:00.0,mdev=nvidia-1135,pcie=1\n",
}


def _config(name: str) -> str:
    """BASE with the case's lines; a case's own `memory:` replaces BASE's."""
    case = CASES[name]
    base = BASE if not case.startswith("memory:") else BASE.replace("memory: 8192\n", "")
    return base + case


def _start(info: Any, token: Any, text: str) -> dict[str, Any]:
    client = ssh(info)
    with client.open_sftp() as sftp, sftp.open("/etc/pve/qemu-server/101.conf", "w") as fh:
        fh.write(text)
    client.close()
    return wait_task(token, token.nodes(info.node).qemu(101).status.start.post())


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_simulator_starts_what_proxmox_starts(
    oracle: Any, own: Callable[..., Any], name: str  # noqa: F811
) -> None:
    text = _config(name)
    tree = resolve_scenario("kpro6")
    state = read_bundle(tree, 100)
    want = ask(oracle, text, inputs_of(state, tree), 101)
    info, token, _ = own()
    # VM 100 runs and holds the pool's devices; stop it so only the config decides.
    wait_task(token, token.nodes(info.node).qemu(100).status.stop.post())
    got = _start(info, token, text)
    sim_ok = got["exitstatus"] == "OK"
    assert sim_ok == want.ok, f"{name}: simulator {got['exitstatus']!r}, Proxmox {want.error!r}"
    if not want.ok:
        assert want.error is not None
        assert got["exitstatus"].startswith(want.error.rstrip(".")), (got, want.error)


def test_a_device_held_by_a_running_vm_is_refused_as_pci_pm_says(
    own: Callable[..., Any],  # noqa: F811
) -> None:
    info, token, _ = own()  # VM 100 runs with 8 entries of the 8-device pool: it holds them all
    got = _start(info, token, BASE + "machine: q35\nhostpci0: 0000:21:00.0,pcie=1\n")
    assert got["exitstatus"] == "PCI device '0000:21:00.0' already in use by VMID '100'"
    got = _start(info, token, BASE + "machine: q35\nhostpci0: mapping=pro6000,pcie=1\n")
    assert got["exitstatus"] == "could not find a free device for 'hostpci0'"
