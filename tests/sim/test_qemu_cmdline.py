"""The simulator's running QEMU command line: built as qemu-server builds it (checked against
Proxmox's own code) and served as /proc/PID/cmdline over real SSH, PID from status/current."""

from __future__ import annotations

import itertools
import shlex
from collections.abc import Callable
from typing import Any

import pytest

from pvefix.hosttree import load_tree, resolve_scenario
from pvefix.sim import qemu_cmdline
from pvefix.sim.serve import ReadyInfo
from pvefix.vmconfig import VMConfig
from tests.oracle import devices_json_of
from tests.simkit import api, run, ssh, wait_task

BASE = "machine: q35\nbios: ovmf\nmemory: 4096\ncpu: host\n"
CONFIGS = {
    "clique": BASE + "hostpci0: 0000:9a:00.0,pcie=1\nhostpci1: 0000:9b:00.0,pcie=1\n"
    "args: -set device.hostpci0.x-nv-gpudirect-clique=0 -set device.hostpci1."
    "x-nv-gpudirect-clique=0\n",
    "hidden": BASE.replace("cpu: host", "cpu: host,hidden=1")
    + "hostpci0: 0000:9a:00.0,pcie=1\n",
    "x-vga": BASE + "hostpci0: 0000:31:00.0,pcie=1,x-vga=1\nhostpci1: 0000:9a:00.0,pcie=1\n",
    "multifunction": BASE + "hostpci0: 0000:17:00,pcie=1\nhostpci1: 0000:9a:00.0;0000:9b:00.0\n"
    "args: -fw_cfg 'name=opt/x,string=1' -set device.hostpci0.x-nv-gpudirect-clique=2\n",
    "kvm64": "machine: q35\nhostpci0: 0000:17:00.0,pcie=1\n",
}


def _parts(words: list[str]) -> tuple[bool, set[tuple[str, str]], list[str]]:
    """kvm=off on -cpu; (host, id) of each vfio-pci device; the -set values."""
    cpu = words[words.index("-cpu") + 1]
    devices = set()
    sets = []
    for w, v in itertools.pairwise(words):
        if w == "-device" and v.startswith("vfio-pci,"):
            opts = dict(p.split("=", 1) for p in v.split(",")[1:] if "=" in p)
            devices.add((opts["host"], opts["id"]))
        if w == "-set":
            sets.append(v)
    return "kvm=off" in cpu.split(","), devices, sets


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_cpu_devices_and_args_are_what_proxmox_builds(name: str, oracle: Any) -> None:
    tree = load_tree(resolve_scenario("intel-grub"))
    devices = tree.pci_devices()
    cfg = VMConfig.parse(CONFIGS[name])
    ours = qemu_cmdline.build(200, cfg, devices, {}, "pc-q35-10.1+pve0")
    res = oracle.cmd(CONFIGS[name], devices=devices_json_of(devices),
                     cpu_vendor="GenuineIntel", vmid=200)
    assert res.ok, res.error
    assert _parts(ours) == _parts(shlex.split(res.cmdline or "")), name


def test_hidden_and_x_vga_mean_kvm_off() -> None:
    for name, hidden in (("hidden", True), ("x-vga", True), ("clique", False)):
        assert qemu_cmdline.kvm_hidden(VMConfig.parse(CONFIGS[name])) is hidden, name


def test_proc_pid_cmdline_over_ssh_holds_the_running_config(
    fresh_sim: Callable[..., ReadyInfo],
) -> None:
    info = fresh_sim("kpro6")
    prox = api(info, "ticket")
    vm = prox.nodes(info.node).qemu(100)
    args = "-set device.hostpci0.x-nv-gpudirect-clique=0"
    vm.config.post(args=args)  # the VM runs: it waits in [PENDING]
    pid = vm.status.current.get()["pid"]
    client = ssh(info)
    code, out, _ = run(client, f"cat /proc/{pid}/cmdline")
    assert code == 0 and out.endswith("\0")
    assert args.split()[1] not in out.split("\0")  # not running yet
    wait_task(prox, vm.status.stop.post())
    wait_task(prox, vm.status.start.post())
    pid = vm.status.current.get()["pid"]
    code, out, _ = run(client, f"cat /proc/{pid}/cmdline")
    words = out.split("\0")[:-1]
    assert words[-2:] == ["-set", "device.hostpci0.x-nv-gpudirect-clique=0"]
    assert any(w.startswith("vfio-pci,host=0000:01:00.0,id=hostpci0") for w in words)
    wait_task(prox, vm.status.stop.post())
    code, _, err = run(client, f"cat /proc/{pid}/cmdline")
    assert code == 1 and "No such file" in err
