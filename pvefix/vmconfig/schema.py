"""Which keys a Proxmox VM config knows, and their value types.

Learned from qemu-server's config description (9.2): enough to validate values the way
Proxmox's parser does (booleans, integers, numbers, enums) and to know which keys exist.
Property-string keys with their own formats (hostpciN, machine) are checked in values.py.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

ValueType = Literal["boolean", "integer", "number", "string"]

_BOOLEAN = (
    "onboot autostart reboot numa keephugepages acpi kvm tdf localtime freeze template tablet"
    " protection allow-ksm ciupgrade"
).split()
_INTEGER = "cpuunits balloon shares smp sockets cores vcpus migrate_speed snaptime".split()
_NUMBER = "cpulimit migrate_downtime".split()
_STRING = (
    "hotplug lock memory amd-sev intel-tdx keyboard name scsihw description ostype boot bootdisk"
    " hugepages agent vga watchdog startdate startup args cdrom cpu parent vmstate vmstatestorage"
    " runningmachine runningcpu running-nets-host-mtu machine arch smbios1 bios vmgenid hookscript"
    " ivshmem audio0 spice_enhancements tags rng0 meta affinity citype ciuser cipassword cicustom"
    " searchdomain nameserver sshkeys efidisk0 tpmstate0"
).split()

ENUMS: dict[str, tuple[str, ...]] = {
    "lock": tuple(
        "backup clone create migrate rollback snapshot snapshot-delete suspending suspended".split()
    ),
    "scsihw": ("lsi", "lsi53c810", "virtio-scsi-pci", "virtio-scsi-single", "megasas", "pvscsi"),
    "ostype": tuple(
        "other wxp w2k w2k3 w2k8 wvista win7 win8 win10 win11 l24 l26 solaris".split()
    ),
    "hugepages": ("any", "2", "1024"),
    "bios": ("seabios", "ovmf"),
    "citype": ("configdrive2", "nocloud", "opennebula"),
}

# Indexed keys: prefix -> number of slots (key is valid for index < count).
INDEXED: dict[str, int] = {
    "ide": 4,
    "scsi": 31,
    "virtio": 16,
    "sata": 6,
    "unused": 256,
    "net": 32,
    "ipconfig": 32,
    "numa": 8,
    "virtiofs": 10,
    "parallel": 3,
    "serial": 4,
    "hostpci": 16,
    "usb": 14,
}

WINDOWS_OSTYPES = frozenset("wxp w2k w2k3 w2k8 wvista win7 win8 win10 win11".split())

_TYPES: dict[str, ValueType] = {}
for _k in _BOOLEAN:
    _TYPES[_k] = "boolean"
for _k in _INTEGER:
    _TYPES[_k] = "integer"
for _k in _NUMBER:
    _TYPES[_k] = "number"
for _k in _STRING:
    _TYPES[_k] = "string"

_INDEXED_RE = re.compile(r"^([a-z]+)(\d+)$")


@lru_cache(maxsize=4096)  # keys come from a small, fixed vocabulary
def key_type(key: str) -> ValueType | None:
    """The value type of a known key, or None when Proxmox does not know the key."""
    if key in _TYPES:
        return _TYPES[key]
    m = _INDEXED_RE.match(key)
    if m and m.group(1) in INDEXED:
        prefix, index = m.group(1), m.group(2)
        if index == str(int(index)) and int(index) < INDEXED[prefix]:
            return "string"
    return None


def is_known_key(key: str) -> bool:
    return key_type(key) is not None


BOOL_TRUE = re.compile(r"^(1|on|yes|true)$", re.IGNORECASE)
BOOL_FALSE = re.compile(r"^(0|off|no|false)$", re.IGNORECASE)


def parse_bool(value: str) -> bool | None:
    """Proxmox's boolean reading: 1/on/yes/true and 0/off/no/false, any case."""
    if BOOL_TRUE.match(value):
        return True
    if BOOL_FALSE.match(value):
        return False
    return None
