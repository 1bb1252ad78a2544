"""HostState: everything the planner knows about a host and one VM, and nothing else.

Sources (a bundle, the API + SSH, the local host) build it; the planner only reads it. It is a
frozen pydantic value: no raw dict leaves a source, and the same state always gives the same plan.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pvefix.hostfacts import BootLoader, BootToolFacts, FileFact
from pvefix.hostfacts import Frozen as _Frozen
from pvefix.hosttree.mapping import PciMapping
from pvefix.hosttree.sysfs import PciDevice

__all__ = ["AccessFacts", "BootLoader", "BootToolFacts", "FileFact", "GuestFacts", "HostState",
           "NodeFacts", "PendingItem", "VmFacts"]


class NodeFacts(_Frozen):
    """The node: what /nodes/{node}/status, pveversion and the CPU say."""

    name: str
    pve_version: str | None = None
    kernel_version: str | None = None  # `uname -r`, e.g. 6.17.2-1-pve
    qemu_version: str | None = None
    # pve-edk2-firmware(-ovmf), the OVMF build VMs start with (`pveversion -v`/dpkg-query)
    edk2_version: str | None = None
    cpu_vendor: str | None = None  # AuthenticAMD | GenuineIntel
    cpu_model: str | None = None
    cpu_phys_bits: int | None = None  # /proc/cpuinfo "address sizes: N bits physical"
    cpu_flags: frozenset[str] | None = None  # /proc/cpuinfo flags (GET .../status cpuinfo.flags)
    boot_mode: Literal["efi", "legacy-bios"] | None = None
    secureboot: bool | None = None
    memory_bytes: int | None = None
    # The CONFIG_* lines of /boot/config-<kernel_version> (`uname -r`): name -> value as
    # written (y, m, "text"); None: not read. Declared in pvefix/facts/node.py.
    kernel_config: dict[str, str] | None = None
    # /sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts as it runs: "Y" or "N";
    # None: not read, or the module not loaded. Declared in pvefix/facts/node.py.
    unsafe_interrupts: str | None = None




class PendingItem(_Frozen):
    """One row of GET .../pending: the current value, the pending one, or a pending delete."""

    key: str
    value: str | None = None
    pending: str | None = None
    delete: bool = False


class VmFacts(_Frozen):
    """The VM: its config exactly as stored, its digest, run state and what is really running."""

    vmid: int
    node: str
    config_text: str = Field(description="the raw config file (all sections)")
    config_source: Literal["file", "api"] = Field(
        description="file: read as raw text (SSH, bundle, local); api: rebuilt from the API view"
    )
    digest: str
    pending: list[PendingItem] = Field(default_factory=list)
    status: Literal["running", "stopped"]
    running_machine: str | None = None
    lock: str | None = None
    ha_state: str | None = Field(
        default=None,
        description="the HA resource's state (started, stopped, ignored, ...) when the VM is an"
        " HA resource; None when HA does not manage it")


class AccessFacts(_Frozen):
    """How pvefix reached the target, which decides what it may change and how."""

    method: Literal["bundle", "api", "local"]
    user: str | None = None  # root@pam, root@pam!pvefix, ...
    auth: Literal["ticket", "token", "none"] = "none"
    ssh: bool = False  # an SSH session as root to the host is available
    guest: Literal["ssh", "agent"] | None = None  # a way into the guest, if configured

    @property
    def is_root_pam_ticket(self) -> bool:
        """Only root@pam with a password ticket may set raw hostpci, romfile and args."""
        return self.auth == "ticket" and self.user == "root@pam"


class GuestFacts(_Frozen):
    """What was read inside the guest, if there is a way in (or a probe report)."""

    cmdline: str | None = None
    bar_errors: list[str] = Field(default_factory=list)
    phys_bits: int | None = None
    files: dict[str, FileFact] = Field(
        default_factory=dict, description="guest files read (/etc/default/grub, /proc/cmdline)"
    )
    where: str | None = None  # how they were read: "QEMU guest agent of VM 100 on kpro6", ...


class HostState(_Frozen):
    """Everything the planner reads: node, boot loader, host files, PCI facts, mappings, VM."""

    node: NodeFacts
    boot_tool: BootToolFacts
    files: dict[str, FileFact] = Field(default_factory=dict)
    pci_devices: list[PciDevice] = Field(default_factory=list)
    acs: dict[str, str] = Field(default_factory=dict)  # port address -> ACSCtl line
    mappings: list[PciMapping] = Field(default_factory=list)
    vm: VmFacts
    access: AccessFacts
    guest: GuestFacts | None = None
    notes: list[str] = Field(
        default_factory=list,
        description="what the source could not read or had to infer, said plainly")

    @property
    def host_files_read(self) -> bool:
        """Were the node's files read? Not through the API alone (it has no file reads): then a
        file's `text` None means "not read", never "absent"."""
        return not (self.access.method == "api" and not self.access.ssh)

    def file(self, path: str) -> FileFact:
        return self.files.get(path) or FileFact(path=path)

    def device(self, address: str) -> PciDevice | None:
        return next((d for d in self.pci_devices if d.address == address), None)

    def mapping(self, mapping_id: str) -> PciMapping | None:
        return next((m for m in self.mappings if m.id == mapping_id), None)
