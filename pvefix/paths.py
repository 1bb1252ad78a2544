"""Every path pvefix reads or writes on a Proxmox node or in a guest, in one place.

Floor 0: no imports, so the readers, the executor, the simulator and the host tree all name a
file the same way. A guest is a Linux system like the node: its command line and GRUB defaults
live at the same paths (GRUB_DEFAULT, PROC_CMDLINE) as the node's.
"""

from __future__ import annotations

# The kernel command line, in the three places it lives (DOMAIN.md: which one the boot loader
# reads is decided by `proxmox-boot-tool status`).
KERNEL_CMDLINE = "/etc/kernel/cmdline"  # systemd-boot / proxmox-boot-tool (first line only)
GRUB_DEFAULT = "/etc/default/grub"  # update-grub: GRUB_CMDLINE_LINUX[_DEFAULT]
GRUB_D = "/etc/default/grub.d"  # update-grub sources *.cfg here after GRUB_DEFAULT
PROC_CMDLINE = "/proc/cmdline"  # what the running kernel booted with (read only)
# The cluster's custom CPU models (`cpu: custom-NAME`; qemu-server CPUConfig.pm).
CPU_MODELS = "/etc/pve/virtual-guest/cpu-models.conf"
HOST_FILES = (KERNEL_CMDLINE, GRUB_DEFAULT, PROC_CMDLINE, CPU_MODELS)


def kernel_config(kernel_version: str) -> str:
    """The build configuration of kernel `kernel_version` (`uname -r`): its CONFIG_* lines."""
    return f"/boot/config-{kernel_version}"

# Proxmox's cluster file system (pmxcfs): every node's VM configs, the PCI mappings.
NODES_DIR = "/etc/pve/nodes"
MAPPING_FILE = "/etc/pve/mapping/pci.cfg"
# The HA resources (ha-manager): a `vm: VMID` section per HA-managed VM, its requested state.
HA_RESOURCES = "/etc/pve/ha/resources.cfg"

# The kernel's view of PCI functions (one directory per function, by address).
SYSFS_PCI = "/sys/bus/pci/devices"


# Proxmox's VMIDs (pve-vmid in PVE::JSONSchema): 100..999999999, ASCII digits, no leading 0.
VMID_PATTERN = r"^[1-9][0-9]{2,8}$"
VMID_RANGE = "100..999999999"


def is_vmid(text: str) -> bool:
    """Is `text` a VMID as Proxmox accepts one (VMID_PATTERN)? ('²'.isdigit() is true too.)"""
    return text.isascii() and text.isdigit() and 3 <= len(text) <= 9 and text[0] != "0"


def vm_config(node: str, vmid: int) -> str:
    """A VM's config file, under the node that owns it (what /etc/pve/qemu-server/VMID.conf
    points to on that node)."""
    return f"{NODES_DIR}/{node}/qemu-server/{vmid}.conf"
