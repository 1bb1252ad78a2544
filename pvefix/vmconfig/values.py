"""Validate one `key: value` the way Proxmox's config parser checks it."""

from __future__ import annotations

import re

from pvefix.errors import ValidationError
from pvefix.vmconfig.hostpci import HOSTPCI_KEY, HostPci
from pvefix.vmconfig.machine import Machine
from pvefix.vmconfig.schema import ENUMS, key_type, parse_bool

# pve-common's `dns-name` format (JSONSchema.pm pve_verify_dns_name), used by the `name` key.
_DNS_LABEL = r"([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)"
DNS_NAME = re.compile(rf"({_DNS_LABEL}\.)*{_DNS_LABEL}")


def validate(key: str, value: str, *, api: bool = True) -> None:
    """Raise ValidationError (naming key, value and Proxmox's reason) if Proxmox rejects it.

    With `api=True` (what `qm set` and the API accept) enumerations are checked too; the config
    file parser itself (`api=False`) only checks types and formats.
    """
    if key == "snapstate":  # written by Proxmox while a snapshot is being taken or removed
        if value not in ("prepare", "delete"):
            raise ValidationError(f"{key}: unknown setting '{key}' (value '{value}')")
        return
    kind = key_type(key)
    if kind is None:
        raise ValidationError(f"{key}: unknown setting '{key}'")
    if key == "description":
        # The API stores a multi-line description as '#' lines (qemu-server confdesc:
        # maxLength 8 KiB); only the file form cannot hold a line feed in one value.
        if len(value.encode("utf-8", "surrogateescape")) > 8192:
            raise ValidationError(f"{key}: value may only be 8192 characters long")
        return
    if "\n" in value or "\r" in value:
        raise ValidationError(f"{key}: property contains a line feed")
    if kind == "string" and key not in _CHECKED_STRINGS and not key.startswith("hostpci"):
        return
    if kind == "boolean":
        if parse_bool(value) is None:
            raise ValidationError(f"{key}: type check ('boolean') failed - got '{value}'")
    elif kind == "integer":
        if not re.fullmatch(r"\d+", value):
            raise ValidationError(f"{key}: type check ('integer') failed - got '{value}'")
        low, high = RANGES.get(key, (None, None))
        if api and low is not None and int(value) < low:
            raise ValidationError(f"{key}: value must have a minimum value of {low}")
        if api and high is not None and int(value) > high:
            raise ValidationError(f"{key}: value must have a maximum value of {high}")
    elif kind == "number":
        if not re.fullmatch(r"\d+(\.\d+)?", value):
            raise ValidationError(f"{key}: type check ('number') failed - got '{value}'")
    elif api and key in ENUMS and value not in ENUMS[key]:
        raise ValidationError(
            f"{key}: value '{value}' does not have a value in the enumeration"
            f" '{', '.join(ENUMS[key])}'"
        )
    elif HOSTPCI_KEY.match(key):
        HostPci.parse(value, key)
    elif key in ("machine", "runningmachine"):
        # Stricter than Proxmox's file parser, on purpose: the vIOMMU and aw-bits rules are
        # checked at `qm set` and at start (config_to_command), so a file that breaks them is
        # reported as a problem here rather than at the next start.
        Machine.parse(value, key)
    elif key == "name" and not DNS_NAME.fullmatch(value):
        raise ValidationError(f"{key}: value does not look like a valid DNS name")


# Integer ranges of qemu-server's confdesc (src/PVE/QemuServer.pm), checked by the API (qm set),
# not by the config file parser.
RANGES: dict[str, tuple[int | None, int | None]] = {
    "sockets": (1, None),
    "cores": (1, None),
    "vcpus": (1, None),
    "smp": (1, None),
    "cpuunits": (1, 262144),
    "shares": (0, 50000),
    "balloon": (0, None),
    "migrate_speed": (0, None),
}

_CHECKED_STRINGS = frozenset([*ENUMS, "machine", "runningmachine", "name"])


def normalize(key: str, value: str) -> str:
    """The value as Proxmox's writer stores it (booleans as 0/1, integers without sign)."""
    kind = key_type(key)
    if kind == "boolean":
        parsed = parse_bool(value)
        if parsed is not None:
            return "1" if parsed else "0"
    if kind == "integer" and re.fullmatch(r"\d+", value):
        return str(int(value))
    if kind == "string" and key_type(key) and not HOSTPCI_KEY.match(key):
        m = re.fullmatch(r'"(.*)"', value, re.DOTALL)
        if m and key in _PLAIN_STRINGS:
            return m.group(1)
    return value


# String keys without a format: Proxmox strips one pair of surrounding double quotes.
_PLAIN_STRINGS = frozenset(
    "lock memory keyboard scsihw description ostype hugepages agent vga startdate args"
    " runningcpu running-nets-host-mtu bios vmgenid ivshmem audio0 spice_enhancements meta"
    " citype ciuser cipassword searchdomain nameserver sshkeys".split()
)
