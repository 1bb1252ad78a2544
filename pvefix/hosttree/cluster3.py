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

CLUSTER = "lab3"
NODES = ["atlas", "borealis", "cygnus"]
L4 = (0x10DE, 0x27B8, 0x10DE, 0x16CA)
H100_NVL = (0x10DE, 0x2321, 0x10DE, 0x1839)
GRUB_DEFAULT = """GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=`( . /etc/os-release && echo ${NAME} )`
GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on"
GRUB_CMDLINE_LINUX=""
"""


def _gpu(root: Path, bus: int, group: int, ids: tuple[int, int, int, int], bar1: int,
         numa: int, high: int) -> None:
    write_gpu(root, bus, group, ids, bar1=bar1, numa=numa, high=high,
              low=0x90000000 + (bus << 20))


def _vm(dest: Path, node: str, vmid: int, keys: dict[str, str]) -> None:
    base = {
        "boot": "order=scsi0", "cores": "8", "memory": "16384", "name": f"vm{vmid}",
        "net0": f"virtio=BC:24:11:3A:{vmid // 100:02X}:{vmid % 100:02X},bridge=vmbr0",
        "ostype": "l26", "scsi0": f"local-zfs:vm-{vmid}-disk-0,size=64G",
        "scsihw": "virtio-scsi-single", "meta": "creation-qemu=10.1.2,ctime=1760000000"}
    base.update(keys)
    write_text(dest / "etc" / "pve" / "nodes" / node / "qemu-server" / f"{vmid}.conf",
               render_vm_config(base))


def _node_files(dest: Path) -> None:
    """Each node's own files: cmdline, boot loader, GPUs."""
    # atlas (the tree root): systemd-boot, iommu=pt already there, one L4.
    write_text(dest / "etc" / "kernel" / "cmdline", f"{ZFS_ROOT} iommu=pt\n")
    write_text(dest / "proc" / "cmdline", f"{INITRD} {ZFS_ROOT} iommu=pt\n")
    _gpu(dest, 0x01, 20, L4, 32 * GIB, 0, 0x18000000000)
    # borealis: plain GRUB, Intel, one L4.
    bor = dest / "nodes" / "borealis"
    write_text(bor / "etc" / "default" / "grub", GRUB_DEFAULT)
    write_text(bor / "proc" / "cmdline",
               "BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve root=/dev/mapper/pve-root ro quiet "
               "intel_iommu=on\n")
    _gpu(bor, 0x3B, 33, L4, 32 * GIB, 0, 0x20000000000)
    # cygnus: systemd-boot without iommu=pt, two H100 NVL.
    cyg = dest / "nodes" / "cygnus"
    write_text(cyg / "etc" / "kernel" / "cmdline", f"{ZFS_ROOT}\n")
    write_text(cyg / "proc" / "cmdline", f"{INITRD} {ZFS_ROOT}\n")
    _gpu(cyg, 0x41, 51, H100_NVL, 128 * GIB, 0, 0x28000000000)
    _gpu(cyg, 0xC1, 91, H100_NVL, 128 * GIB, 1, 0x30000000000)


def _vms(dest: Path) -> None:
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


def _meta() -> HostMeta:
    running = {"status": "running", "running_machine": "pc-i440fx-10.1+pve0",
               "qmpstatus": "running", "uptime": 86400}
    return HostMeta.model_validate({
        "schema": "pvefix.host/v1",
        "node": "atlas",
        "cluster_nodes": NODES,
        "cluster_name": CLUSTER,
        "nodes": {
            "borealis": {
                "versions": VERSIONS,
                "cpu": {"vendor": "GenuineIntel", "model": "Intel(R) Xeon(R) Gold 6430",
                        "sockets": 2, "cores": 64, "threads": 128},
                "proxmox_boot_tool": {
                    "exit_code": 2, "output": "",
                    "stderr": "E: /etc/kernel/proxmox-boot-uuids does not exist.\n"}},
            "cygnus": {
                "memory_bytes": 1099511627776,
                "proxmox_boot_tool": {"exit_code": 0,
                                      "output": systemd_boot_status("7C1D-42AA")}}},
        "versions": VERSIONS,
        "cpu": EPYC,
        "memory_bytes": 549755813888,
        "boot": {"mode": "efi", "secureboot": False},
        "proxmox_boot_tool": {"exit_code": 0, "output": systemd_boot_status("2C41-7E0B")},
        "vms": {
            "310": running,
            "311": running,
            "312": {**running, "ha_state": "started"}},
        "users": ["root@pam"],
        "tokens": [{"id": "root@pam!pvefix", "privsep": False}],
        "reboot_seconds": 1})


def generate_cluster3(dest: Path, seed: int = 0) -> None:
    """Write the cluster3 scenario into `dest` (pvefix-host.json last)."""
    dest.mkdir(parents=True, exist_ok=True)
    _node_files(dest)
    _vms(dest)
    (dest / META_FILE).write_text(_meta().to_json(), encoding="utf-8")
