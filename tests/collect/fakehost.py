"""A fake Proxmox host built from a scenario, for running the real collect script with `sh`.

The root mirrors a real host: VM configs under etc/pve/nodes/NODE/qemu-server with the
etc/pve/qemu-server link, sys/bus/pci/devices links to the physical paths, iommu_group and
driver as the kernel's symlinks, /proc/cpuinfo and /proc/meminfo, and a secret under
etc/pve/priv that must never travel. The fake tools print what the real ones print for the
scenario's pvefix-host.json.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from pvefix.hosttree import load_tree, resolve_scenario
from pvefix.hosttree.meta import HostMeta

SECRET = "-----BEGIN PRIVATE KEY-----\nnot-a-real-key-but-a-secret\n"
_ADDR = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


@dataclass
class FakeHost:
    root: Path
    bin: Path
    data: Path

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PVEFIX_ROOT"] = str(self.root)
        env["PATH"] = f"{self.bin}{os.pathsep}{env['PATH']}"
        env["TMPDIR"] = str(self.root.parent)
        return env


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _cpuinfo(meta: HostMeta) -> str:
    cores_per_socket = meta.cpu.cores // meta.cpu.sockets
    per_core = meta.cpu.threads // meta.cpu.cores
    blocks = []
    n = 0
    for _thread in range(per_core):
        for socket in range(meta.cpu.sockets):
            for core in range(cores_per_socket):
                blocks.append(
                    f"processor\t: {n}\nvendor_id\t: {meta.cpu.vendor}\ncpu family\t: 26\n"
                    f"model\t\t: 2\nmodel name\t: {meta.cpu.model}\nphysical id\t: {socket}\n"
                    f"siblings\t: {cores_per_socket * per_core}\ncore id\t\t: {core}\n"
                    f"cpu cores\t: {cores_per_socket}\n"
                    + (f"flags\t\t: {' '.join(meta.cpu.flags)}\n" if meta.cpu.flags else "")
                    + (f"address sizes\t: {meta.cpu.phys_bits} bits physical, 57 bits virtual\n"
                       if meta.cpu.phys_bits else "")
                )
                n += 1
    return "\n".join(blocks) + "\n"


def _qm_status(meta: HostMeta, vmid: int) -> str:
    state = meta.vm_state(vmid)
    lines = {"cpus": "8", "maxmem": "8589934592", "name": f"vm{vmid}", "vmid": str(vmid),
             "status": state.status, "uptime": str(state.uptime)}
    if state.status == "running":
        lines |= {"pid": "4242", "qmpstatus": state.qmpstatus or "running",
                  "running-machine": state.running_machine or "", "running-qemu": "10.1.2"}
    if state.lock:
        lines["lock"] = state.lock
    return "".join(f"{k}: {v}\n" for k, v in sorted(lines.items()))


def _lspci(meta: HostMeta, root: Path) -> str:
    tree = load_tree(root)
    out = ""
    for device in tree.pci_devices():
        out += f"{device.address} Class [{device.class_[2:6]}]: Device {device.device[2:]}\n"
        out += "\tControl: I/O- Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr-\n"
        if device.address in meta.acs:
            out += "\tCapabilities: [2a0 v1] Access Control Services\n"
            out += "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+\n"
            out += f"\t\tACSCtl:\t{meta.acs[device.address]}\n"
        if device.driver:
            out += f"\tKernel driver in use: {device.driver}\n"
        out += "\n"
    return out


def make_fake_host(base: Path, scenario: str = "kpro6") -> FakeHost:
    """Build the fake root, tools and their outputs under `base`."""
    source = resolve_scenario(scenario)
    meta = load_tree(source).meta
    root = base / "host"
    # nodes/NAME/ of a cluster tree holds the other nodes' own files: not on this host.
    shutil.copytree(source, root, ignore=lambda d, names: [
        n for n in names if n == "pvefix-host.json" or n.startswith(".")
        or (Path(d) == source and n == "nodes")])
    data = base / "tool-data"
    data.mkdir()
    bin_dir = base / "bin"
    bin_dir.mkdir()

    # VM configs live in pmxcfs under nodes/NODE; etc/pve/qemu-server links to the local one.
    local = root / "etc/pve/qemu-server"
    node_dir = root / f"etc/pve/nodes/{meta.node}/qemu-server"
    node_dir.parent.mkdir(parents=True, exist_ok=True)
    if node_dir.is_dir():  # a cluster tree: pmxcfs's layout already
        if local.is_dir():
            for conf in local.iterdir():
                conf.rename(node_dir / conf.name)
            local.rmdir()
    else:
        local.rename(node_dir)
    local.symlink_to(f"nodes/{meta.node}/qemu-server")
    (root / "etc/pve/priv").mkdir()
    (root / "etc/pve/priv/authkey.key").write_text(SECRET)

    # sysfs: bus links to physical paths; iommu_group and driver become the kernel's links.
    bus = root / "sys/bus/pci/devices"
    bus.mkdir(parents=True)
    for dirpath, dirnames, _files in os.walk(root / "sys/devices"):
        for name in dirnames:
            if not _ADDR.match(name):
                continue
            device = Path(dirpath) / name
            rel = os.path.relpath(device, bus)
            (bus / name).symlink_to(rel)
            group = device / "iommu_group"
            if group.is_file():
                number = group.read_text().strip()
                group.unlink()
                group.symlink_to(f"../../../../kernel/iommu_groups/{number}")
            driver = device / "driver"
            if driver.is_file():
                name_ = driver.read_text().strip()
                driver.unlink()
                driver.symlink_to(f"../../../../bus/pci/drivers/{name_}")
    if meta.boot.mode == "efi":
        (root / "sys/firmware/efi").mkdir(parents=True)
    (root / "proc/cpuinfo").write_text(_cpuinfo(meta))
    (root / "proc/meminfo").write_text(
        f"MemTotal:       {meta.memory_bytes // 1024} kB\nMemFree:        123456 kB\n"
    )
    (root / "root").mkdir()
    managed = {vmid: s.ha_state for vmid, s in meta.vms.items() if s.ha_state}
    if managed:  # ha-manager's resources file: a section per HA-managed VM
        (root / "etc/pve/ha").mkdir(parents=True, exist_ok=True)
        (root / "etc/pve/ha/resources.cfg").write_text("".join(
            f"vm: {vmid}\n\tstate {state}\n\tmax_restart 1\n\n"
            for vmid, state in managed.items()))

    boot = meta.proxmox_boot_tool
    (data / "pbt.out").write_text(boot.output)
    (data / "pbt.err").write_text(boot.stderr)
    (data / "lspci").write_text(_lspci(meta, source))
    for vmid in load_tree(source).vms():
        (data / f"qm-{vmid}").write_text(_qm_status(meta, vmid))
    d = str(data)
    qemu = meta.versions.qemu or "10.1.2"
    _tool(bin_dir, "hostname", f"echo {meta.node}\n")
    _tool(bin_dir, "uname", f'[ "$1" = -r ] && echo {meta.versions.kernel} || echo Linux\n')
    _tool(bin_dir, "nproc", f"echo {meta.cpu.threads}\n")
    _tool(
        bin_dir, "pveversion",
        f"echo 'proxmox-ve: 9.1.0 (running kernel: {meta.versions.kernel})'\n"
        f"echo 'pve-manager: {meta.versions.pve} (running version: {meta.versions.pve}/42db4a6c)'\n"
        f"echo 'proxmox-kernel-helper: 9.0.4'\necho 'pve-qemu-kvm: {qemu}-1'\n"
        "echo 'qemu-server: 9.0.30'\n",
    )
    secure = "enabled" if meta.boot.secureboot else "disabled"
    _tool(bin_dir, "mokutil", f"echo 'SecureBoot {secure}'\n")
    _tool(
        bin_dir, "proxmox-boot-tool",
        f'cat "{d}/pbt.out"; cat "{d}/pbt.err" >&2; exit {boot.exit_code}\n',
    )
    _tool(
        bin_dir, "pvecm",
        "echo \"Error: Corosync config '/etc/pve/corosync.conf' does not exist - is this node "
        "part of a cluster?\" >&2\nexit 2\n",
    )
    _tool(
        bin_dir, "qm",
        f'[ -f "{d}/qm-$2" ] || {{ echo "Configuration file does not exist" >&2; exit 2; }}\n'
        f'cat "{d}/qm-$2"\n',
    )
    _tool(bin_dir, "lspci", f'cat "{d}/lspci"\n')
    return FakeHost(root=root, bin=bin_dir, data=data)
