"""The generated "cluster3" scenario: three nodes that differ where a remediation tool can go
wrong by reading or writing the wrong one.

    atlas     local node (the API), systemd-boot on ZFS, AMD, one L4 at 0000:01:00.0,
              `iommu=pt` already on its cmdline; VM 300 (stopped)
    borealis  plain GRUB (proxmox-boot-tool exit 2), Intel, one L4 at 0000:3b:00.0; VM 320
    cygnus    systemd-boot, AMD, two H100 NVL at 0000:41:00.0 and 0000:c1:00.0, no
              `iommu=pt`; VM 310 (running, i440fx, both H100s by raw host=, no onboot), VM 311
              (running, `lock: backup`), VM 312 (running, HA-managed, onboot, startup order=1),
              VM 313 (stopped, onboot, startup order=2, wants the H100 0000:41:00.0 too)

Each node's own files live under `nodes/NAME/` (see pvefix.hosttree.nodes).
"""

from __future__ import annotations

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

CLUSTER = "lab3"
NODES = ["atlas", "borealis", "cygnus"]
L4 = (0x10DE, 0x27B8, 0x10DE, 0x16CA)
H100_NVL = (0x10DE, 0x2321, 0x10DE, 0x1839)
SYSTEMD_BOOT = (
    "Re-executing '/usr/sbin/proxmox-boot-tool' in new private mount namespace..\n"
    "System currently booted with uefi\n"
    "{uuid} is configured with: uefi (versions: 6.14.11-4-pve, 6.17.2-1-pve)\n"
)
ZFS_ROOT = "root=ZFS=rpool/ROOT/pve-1 boot=zfs"
INITRD = "initrd=\\EFI\\proxmox\\6.17.2-1-pve\\initrd.img-6.17.2-1-pve"
GRUB_DEFAULT = """GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=`( . /etc/os-release && echo ${NAME} )`
GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on"
GRUB_CMDLINE_LINUX=""
"""


def _gpu(root: Path, bus: int, group: int, ids: tuple[int, int, int, int], bar1: int,
         numa: int, high: int) -> None:
    """One GPU behind its own root port on its own root complex."""
    complex_name = f"pci0000:{bus - 1:02x}"
    port = f"0000:{bus - 1:02x}:01.1"
    low = 0x90000000 + (bus << 20)
    write_function(root, Function(
        path=(complex_name, port), vendor=0x1022, device=0x14AB, class_code=0x060400,
        numa_node=numa, iommu_group=group - 1, driver="pcieport", bridge=True,
        regions=(Region(13, 0x1000, 0x1000, FLAGS_BRIDGE_IO),
                 Region(14, low, 32 * MIB, FLAGS_BRIDGE_MEM),
                 Region(15, high, 2 * bar1, FLAGS_BRIDGE_MEM64_PREFETCH))))
    write_function(root, Function(
        path=(complex_name, port, f"0000:{bus:02x}:00.0"), vendor=ids[0], device=ids[1],
        class_code=0x030200, subsystem_vendor=ids[2], subsystem_device=ids[3],
        numa_node=numa, iommu_group=group, driver="vfio-pci",
        regions=(Region(0, low, 16 * MIB, FLAGS_MEM32),
                 Region(1, high, bar1, FLAGS_MEM64_PREFETCH),
                 Region(3, high + bar1, 32 * MIB, FLAGS_MEM64_PREFETCH))))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _vm(dest: Path, node: str, vmid: int, keys: dict[str, str]) -> None:
    base = {
        "boot": "order=scsi0", "cores": "8", "memory": "16384", "name": f"vm{vmid}",
        "net0": f"virtio=BC:24:11:3A:{vmid // 100:02X}:{vmid % 100:02X},bridge=vmbr0",
        "ostype": "l26", "scsi0": f"local-zfs:vm-{vmid}-disk-0,size=64G",
        "scsihw": "virtio-scsi-single", "meta": "creation-qemu=10.1.2,ctime=1760000000",
    }
    base.update(keys)
    _write(dest / "etc" / "pve" / "nodes" / node / "qemu-server" / f"{vmid}.conf",
           render_vm_config(base))


def generate_cluster3(dest: Path, seed: int = 0) -> None:
    """Write the cluster3 scenario into `dest` (pvefix-host.json last)."""
    dest.mkdir(parents=True, exist_ok=True)
    # atlas (the tree root): systemd-boot, iommu=pt already there, one L4.
    _write(dest / "etc" / "kernel" / "cmdline", f"{ZFS_ROOT} iommu=pt\n")
    _write(dest / "proc" / "cmdline", f"{INITRD} {ZFS_ROOT} iommu=pt\n")
    _gpu(dest, 0x01, 20, L4, 32 * GIB, 0, 0x18000000000)
    # borealis: plain GRUB, Intel, one L4.
    bor = dest / "nodes" / "borealis"
    _write(bor / "etc" / "default" / "grub", GRUB_DEFAULT)
    _write(bor / "proc" / "cmdline",
           "BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve root=/dev/mapper/pve-root ro quiet "
           "intel_iommu=on\n")
    _gpu(bor, 0x3B, 33, L4, 32 * GIB, 0, 0x20000000000)
    # cygnus: systemd-boot without iommu=pt, two H100 NVL.
    cyg = dest / "nodes" / "cygnus"
    _write(cyg / "etc" / "kernel" / "cmdline", f"{ZFS_ROOT}\n")
    _write(cyg / "proc" / "cmdline", f"{INITRD} {ZFS_ROOT}\n")
    _gpu(cyg, 0x41, 51, H100_NVL, 128 * GIB, 0, 0x28000000000)
    _gpu(cyg, 0xC1, 91, H100_NVL, 128 * GIB, 1, 0x30000000000)
    for node in NODES:
        (dest / "etc" / "pve" / "nodes" / node / "qemu-server").mkdir(parents=True,
                                                                      exist_ok=True)
    _vm(dest, "atlas", 300, {})
    _vm(dest, "borealis", 320, {"hostpci0": "0000:3b:00.0"})
    _vm(dest, "cygnus", 310, {"hostpci0": "0000:41:00.0", "hostpci1": "0000:c1:00.0",
                              "cores": "32", "memory": "262144", "cpu": "host"})
    _vm(dest, "cygnus", 311, {"lock": "backup"})
    _vm(dest, "cygnus", 312, {"onboot": "1", "startup": "order=1,up=5"})
    _vm(dest, "cygnus", 313, {"onboot": "1", "startup": "order=2", "hostpci0": "0000:41:00.0"})
    running = {"status": "running", "running_machine": "pc-i440fx-10.1+pve0",
               "qmpstatus": "running", "uptime": 86400}
    meta = HostMeta.model_validate({
        "schema": "pvefix.host/v1",
        "node": "atlas",
        "cluster_nodes": NODES,
        "cluster_name": CLUSTER,
        "nodes": {
            "borealis": {
                "versions": {"pve": "9.1.1", "kernel": "6.17.2-1-pve", "qemu": "10.1.2"},
                "cpu": {"vendor": "GenuineIntel", "model": "Intel(R) Xeon(R) Gold 6430",
                        "sockets": 2, "cores": 64, "threads": 128},
                "proxmox_boot_tool": {
                    "exit_code": 2, "output": "",
                    "stderr": "E: /etc/kernel/proxmox-boot-uuids does not exist.\n"},
            },
            "cygnus": {
                "memory_bytes": 1099511627776,
                "proxmox_boot_tool": {"exit_code": 0,
                                      "output": SYSTEMD_BOOT.format(uuid="7C1D-42AA")},
            },
        },
        "versions": {"pve": "9.1.1", "kernel": "6.17.2-1-pve", "qemu": "10.1.2"},
        "cpu": {"vendor": "AuthenticAMD", "model": "AMD EPYC 9355 32-Core Processor",
                "sockets": 2, "cores": 64, "threads": 128},
        "memory_bytes": 549755813888,
        "boot": {"mode": "efi", "secureboot": False},
        "proxmox_boot_tool": {"exit_code": 0, "output": SYSTEMD_BOOT.format(uuid="2C41-7E0B")},
        "vms": {
            "310": running,
            "311": running,
            "312": {**running, "ha_state": "started"},
        },
        "users": ["root@pam"],
        "tokens": [{"id": "root@pam!pvefix", "privsep": False}],
        "reboot_seconds": 1,
    })
    (dest / META_FILE).write_text(meta.to_json(), encoding="utf-8")
