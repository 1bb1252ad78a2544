"""The generated "large" scenario: an 8-node cluster with 1,000 VMs.

Made by code rather than shipped, so the package stays small: a seeded generator writes the same
tree every time (deterministic), in well under a second. Node `node1` is the local node and has
the sysfs facts (four L40S GPUs, each behind its own root port); nodes 2..8 have their own kernel
cmdline files under `nodes/NAME/` and no sysfs (their devices are unknown here); every node has a
`map` entry in the cluster mapping `l40s`. About 10% of the VMs pass GPUs through, some by
mapping and some by raw `host=`, on i440fx or q35.
"""

from __future__ import annotations

import random
from pathlib import Path

from pvefix.hosttree.meta import META_FILE, HostMeta
from pvefix.hosttree.synth import (
    EPYC,
    GIB,
    INITRD,
    VERSIONS,
    ZFS_ROOT,
    render_vm_config,
    systemd_boot_status,
    write_gpu,
    write_text,
)

NODES = [f"node{i}" for i in range(1, 9)]
VM_COUNT = 1000
FIRST_VMID = 100
SEED = 20251
GPU_BUSES = (0x01, 0x21, 0x41, 0x61)  # one root complex per GPU, like the kpro6 host
GPU_GROUPS = (13, 27, 41, 55)
L40S = (0x10DE, 0x26B9, 0x10DE, 0x1851)


def _gpus(root: Path) -> None:
    for slot, (bus, group) in enumerate(zip(GPU_BUSES, GPU_GROUPS, strict=True)):
        write_gpu(root, bus, group, L40S, bar1=64 * GIB, numa=0 if slot < 2 else 1,
                  high=0x20000000000 + slot * 0x2000000000, low=0xA0000000 + slot * 0x4000000,
                  io=0x1000 * (slot + 1))


def _mapping_text() -> str:
    lines = ["l40s", "\tdescription L40S pool (4 per node)"]
    for node in NODES:
        for bus, group in zip(GPU_BUSES, GPU_GROUPS, strict=True):
            lines.append(
                f"\tmap id=10de:26b9,iommugroup={group},node={node},"
                f"path=0000:{bus:02x}:00.0,subsystem-id=10de:1851"
            )
    return "\n".join(lines) + "\n\n"


def _vm(rng: random.Random, vmid: int) -> tuple[dict[str, str], str, bool]:
    """One VM config (keys), its description, and whether it has GPUs."""
    ostype = rng.choice(["l26"] * 6 + ["win11", "win10", "other"])
    windows = ostype.startswith("win")
    cores = rng.choice([1, 2, 4, 8, 16])
    mac = ":".join(f"{b:02X}" for b in (0xBC, 0x24, 0x11, rng.randrange(256),
                                        rng.randrange(256), rng.randrange(256)))
    cfg: dict[str, str] = {
        "boot": "order=scsi0;net0",
        "cores": str(cores),
        "memory": str(rng.choice([2048, 4096, 8192, 16384, 32768])),
        "name": f"vm-{vmid}",
        "net0": f"virtio={mac},bridge=vmbr0" + (",firewall=1" if rng.random() < 0.5 else ""),
        "ostype": ostype,
        "scsi0": f"local-zfs:vm-{vmid}-disk-0,size={rng.choice([16, 32, 64, 128])}G",
        "scsihw": "virtio-scsi-single",
        "smbios1": f"uuid={rng.getrandbits(128):032x}",
        "vmgenid": f"{rng.getrandbits(128):032x}",
        "meta": f"creation-qemu=9.0.2,ctime={1700000000 + vmid * 97}"}
    for key in ("smbios1", "vmgenid"):
        raw = cfg[key].removeprefix("uuid=")
        dashed = f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}"
        cfg[key] = f"uuid={dashed}" if key == "smbios1" else dashed
    if rng.random() < 0.3:
        cfg["cpu"] = rng.choice(["host", "x86-64-v2-AES", "x86-64-v3"])
    if rng.random() < 0.5:
        cfg["agent"] = "1"
    if windows or rng.random() < 0.3:
        cfg["bios"] = "ovmf"
        cfg["efidisk0"] = f"local-zfs:vm-{vmid}-disk-1,efitype=4m,size=1M"
    if windows:
        cfg["machine"] = rng.choice(["pc-i440fx-8.1", "pc-q35-8.1", "pc-q35-9.0+pve0"])
    elif rng.random() < 0.3:
        cfg["machine"] = "q35"
    gpus = rng.random() < 0.1
    if gpus:
        q35 = "q35" in cfg.get("machine", "")
        for index in range(rng.choice([1, 1, 2, 4])):
            if rng.random() < 0.7:
                value = "mapping=l40s"
            else:
                value = f"0000:{GPU_BUSES[index % 4]:02x}:00.0"
            if q35 and rng.random() < 0.7:
                value += ",pcie=1"
            cfg[f"hostpci{index}"] = value
    description = "GPU worker" if gpus else ("" if rng.random() < 0.8 else f"service {vmid}")
    return cfg, description, gpus


def _running_machine(machine: str | None) -> str:
    """What QEMU 10.1 runs for a config's `machine:` (a pinned version stays pinned)."""
    if machine is None or machine in ("pc", "q35"):
        family = "q35" if machine == "q35" else "i440fx"
        return f"pc-{family}-10.1+pve0"
    return machine if "+pve" in machine else f"{machine}+pve0"


def _host_files(dest: Path) -> None:
    """The local node's GPUs, the cluster mapping, and every node's cmdline files (the other
    nodes have the same install and GPUs, and no sysfs here)."""
    _gpus(dest)
    write_text(dest / "etc" / "pve" / "mapping" / "pci.cfg", _mapping_text())
    for node in NODES:
        (dest / "etc" / "pve" / "nodes" / node / "qemu-server").mkdir(parents=True, exist_ok=True)
    for own in [dest] + [dest / "nodes" / node for node in NODES[1:]]:
        write_text(own / "etc" / "kernel" / "cmdline", f"{ZFS_ROOT}\n")
        write_text(own / "proc" / "cmdline", f"{INITRD} {ZFS_ROOT}\n")


def _vm_files(dest: Path, rng: random.Random, vms: int) -> dict[str, dict[str, object]]:
    """Write `vms` VM configs on random nodes; returns the run states of those that run."""
    states: dict[str, dict[str, object]] = {}
    for vmid in range(FIRST_VMID, FIRST_VMID + vms):
        node = NODES[rng.randrange(len(NODES))]
        cfg, description, gpus = _vm(rng, vmid)
        path = dest / "etc" / "pve" / "nodes" / node / "qemu-server" / f"{vmid}.conf"
        path.write_text(render_vm_config(cfg, description), encoding="utf-8")
        if rng.random() < (0.2 if gpus else 0.6):
            states[str(vmid)] = {
                "status": "running",
                "running_machine": _running_machine(cfg.get("machine")),
                "uptime": rng.randrange(60, 90 * 86400),
                "qmpstatus": "running"}
    return states


def generate_large(dest: Path, seed: int = SEED, vms: int = VM_COUNT) -> None:
    """Write the large scenario into `dest` (pvefix-host.json last, so a half tree is no tree);
    `vms` VMs (1,000 unless asked: `pvefix sim serve --scenario large --vms 10000`)."""
    rng = random.Random(seed)  # noqa: S311 -- reproducible test data, not secrets
    dest.mkdir(parents=True, exist_ok=True)
    _host_files(dest)
    meta = HostMeta.model_validate({
        "schema": "pvefix.host/v1",
        "node": NODES[0],
        "cluster_nodes": NODES,
        "cluster_name": "large8",
        "versions": VERSIONS,
        "cpu": EPYC,
        "memory_bytes": 1546188226560,
        "boot": {"mode": "efi", "secureboot": False},
        "proxmox_boot_tool": {"exit_code": 0, "output": systemd_boot_status("2C41-7E0B")},
        "vms": _vm_files(dest, rng, vms),
        "users": ["root@pam"],
        "tokens": [{"id": "root@pam!pvefix", "privsep": False}]})
    (dest / META_FILE).write_text(meta.to_json(), encoding="utf-8")
