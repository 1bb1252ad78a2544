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
    FLAGS_BRIDGE_IO,
    FLAGS_BRIDGE_MEM,
    FLAGS_BRIDGE_MEM64_PREFETCH,
    FLAGS_MEM32,
    FLAGS_MEM64_PREFETCH,
    GIB,
    MIB,
    Function,
    render_vm_config,
    write_function,
)
from pvefix.pci import Region

NODES = [f"node{i}" for i in range(1, 9)]
VM_COUNT = 1000
FIRST_VMID = 100
SEED = 20251
GPU_BUSES = (0x01, 0x21, 0x41, 0x61)  # one root complex per GPU, like the kpro6 host
GPU_GROUPS = (13, 27, 41, 55)
L40S = (0x10DE, 0x26B9, 0x10DE, 0x1851)


def _gpus(root: Path) -> None:
    for slot, (bus, group) in enumerate(zip(GPU_BUSES, GPU_GROUPS, strict=True)):
        complex_name = f"pci0000:{bus - 1:02x}"
        port = f"0000:{bus - 1:02x}:01.1"
        gpu = f"0000:{bus:02x}:00.0"
        numa = 0 if slot < 2 else 1
        high = 0x20000000000 + slot * 0x2000000000
        low = 0xA0000000 + slot * 0x4000000
        write_function(
            root,
            Function(
                path=(complex_name, port), vendor=0x1022, device=0x14AB, class_code=0x060400,
                numa_node=numa, iommu_group=group - 1, driver="pcieport", bridge=True,
                regions=(
                    Region(13, 0x1000 * (slot + 1), 0x1000, FLAGS_BRIDGE_IO),
                    Region(14, low, 32 * MIB, FLAGS_BRIDGE_MEM),
                    Region(15, high, 128 * GIB, FLAGS_BRIDGE_MEM64_PREFETCH),
                ),
            ),
        )
        write_function(
            root,
            Function(
                path=(complex_name, port, gpu), vendor=L40S[0], device=L40S[1],
                class_code=0x030200, subsystem_vendor=L40S[2], subsystem_device=L40S[3],
                numa_node=numa, iommu_group=group, driver="vfio-pci",
                regions=(
                    Region(0, low, 16 * MIB, FLAGS_MEM32),
                    Region(1, high, 64 * GIB, FLAGS_MEM64_PREFETCH),
                    Region(3, high + 64 * GIB, 32 * MIB, FLAGS_MEM64_PREFETCH),
                ),
            ),
        )


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
        "meta": f"creation-qemu=9.0.2,ctime={1700000000 + vmid * 97}",
    }
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


def generate_large(dest: Path, seed: int = SEED, vms: int = VM_COUNT) -> None:
    """Write the large scenario into `dest` (pvefix-host.json last, so a half tree is no tree);
    `vms` VMs (1,000 unless asked: `pvefix sim serve --scenario large --vms 10000`)."""
    rng = random.Random(seed)  # noqa: S311 -- reproducible test data, not secrets
    dest.mkdir(parents=True, exist_ok=True)
    _gpus(dest)
    mapping = dest / "etc" / "pve" / "mapping" / "pci.cfg"
    mapping.parent.mkdir(parents=True, exist_ok=True)
    mapping.write_text(_mapping_text(), encoding="utf-8")
    for node in NODES:
        (dest / "etc" / "pve" / "nodes" / node / "qemu-server").mkdir(parents=True, exist_ok=True)
    (dest / "etc" / "kernel").mkdir(parents=True, exist_ok=True)
    (dest / "etc" / "kernel" / "cmdline").write_text(
        "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n", encoding="utf-8"
    )
    (dest / "proc").mkdir(exist_ok=True)
    (dest / "proc" / "cmdline").write_text(
        "initrd=\\EFI\\proxmox\\6.17.2-1-pve\\initrd.img-6.17.2-1-pve "
        "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n",
        encoding="utf-8",
    )
    for node in NODES[1:]:  # each other node's own host files (same install, same GPUs)
        own = dest / "nodes" / node
        (own / "etc" / "kernel").mkdir(parents=True, exist_ok=True)
        (own / "proc").mkdir(parents=True, exist_ok=True)
        for name in ("etc/kernel/cmdline", "proc/cmdline"):
            (own / name).write_text((dest / name).read_text(encoding="utf-8"), encoding="utf-8")
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
                "qmpstatus": "running",
            }
    meta = HostMeta.model_validate(
        {
            "schema": "pvefix.host/v1",
            "node": NODES[0],
            "cluster_nodes": NODES,
            "cluster_name": "large8",
            "versions": {"pve": "9.1.1", "kernel": "6.17.2-1-pve", "qemu": "10.1.2"},
            "cpu": {"vendor": "AuthenticAMD", "model": "AMD EPYC 9355 32-Core Processor",
                    "sockets": 2, "cores": 64, "threads": 128},
            "memory_bytes": 1546188226560,
            "boot": {"mode": "efi", "secureboot": False},
            "proxmox_boot_tool": {
                "exit_code": 0,
                "output": "Re-executing '/usr/sbin/proxmox-boot-tool' in new private mount "
                "namespace..\nSystem currently booted with uefi\n"
                "2C41-7E0B is configured with: uefi (versions: 6.14.11-4-pve, 6.17.2-1-pve)\n",
            },
            "vms": states,
            "users": ["root@pam"],
            "tokens": [{"id": "root@pam!pvefix", "privsep": False}],
        }
    )
    (dest / META_FILE).write_text(meta.to_json(), encoding="utf-8")
