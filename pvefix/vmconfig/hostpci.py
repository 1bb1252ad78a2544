"""`hostpciN` values: one PCI passthrough entry of a VM (qemu-server PCI.pm's format)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from pvefix.errors import ValidationError
from pvefix.vmconfig.propstring import Field, PropertyString, check_format
from pvefix.vmconfig.schema import parse_bool

MAX_HOSTPCI = 16
HOSTPCI_KEY = re.compile(r"^hostpci(\d+)$")

# Lowercase hex only, as Proxmox: [domain:]bus:slot[.function]; several joined by ';'.
PCI_ID = r"(?:[a-f0-9]{4,}:)?[a-f0-9]{2}:[a-f0-9]{2}(?:\.[a-f0-9])?"
_CONFIG_ID = re.compile(r"^[a-z][a-z0-9_-]+$", re.IGNORECASE)


_ADDR_RE = re.compile(r"^(?:([0-9a-f]{4,}):)?([0-9a-f]{2}):([0-9a-f]{2})(?:\.([0-7]))?$")


def normalize_address(text: str) -> str | None:
    """`01:00.0` -> `0000:01:00.0`; `0000:01:00` (a whole slot) -> `0000:01:00`; else None."""
    match = _ADDR_RE.match(text.strip().lower())
    if match is None:
        return None
    domain, bus, slot, function = match.groups()
    base = f"{(domain or '0000')[-4:]:0>4}:{bus}:{slot}"
    return base if function is None else f"{base}.{function}"


def _check_config_id(value: str) -> str | None:
    if not _CONFIG_ID.match(value):
        return f"invalid format - invalid configuration ID '{value}'"
    return None


_HEX_ID = r"0x[0-9a-fA-F]{4}"

HOSTPCI_FORMAT: dict[str, Field] = {
    "host": Field(default_key=True, pattern=f"{PCI_ID}(;{PCI_ID})*"),
    "mapping": Field(check=_check_config_id),
    "rombar": Field(type="boolean"),
    "romfile": Field(pattern=r"[^,;]+"),
    "pcie": Field(type="boolean"),
    "x-vga": Field(type="boolean"),
    "legacy-igd": Field(type="boolean"),
    "mdev": Field(pattern=r"[^/\.:]+"),
    "vendor-id": Field(pattern=_HEX_ID),
    "device-id": Field(pattern=_HEX_ID),
    "sub-vendor-id": Field(pattern=_HEX_ID),
    "sub-device-id": Field(pattern=_HEX_ID),
    "driver": Field(enum=("vfio", "keep")),
}


def _flag(values: dict[str, str], key: str, default: bool) -> bool:
    raw = values.get(key)
    if raw is None:
        return default
    parsed = parse_bool(raw)
    return default if parsed is None else parsed


class HostPci(BaseModel):
    """A validated hostpciN entry. `raw` is the value exactly as stored."""

    model_config = ConfigDict(frozen=True)

    key: str
    raw: str
    hosts: tuple[str, ...] = ()
    mapping: str | None = None
    pcie: bool = False
    x_vga: bool = False
    legacy_igd: bool = False
    rombar: bool = True
    romfile: str | None = None
    mdev: str | None = None
    driver: str = "vfio"
    vendor_id: str | None = None
    device_id: str | None = None
    sub_vendor_id: str | None = None
    sub_device_id: str | None = None

    @classmethod
    def parse(cls, value: str, key: str = "hostpci0") -> HostPci:
        """Parse and validate like `qm set` does; raises ValidationError with Proxmox's reason."""
        m = HOSTPCI_KEY.match(key)
        if not m or int(m.group(1)) >= MAX_HOSTPCI or m.group(1) != str(int(m.group(1))):
            raise ValidationError(f"{key}: not a hostpci key (hostpci0..hostpci15)")
        values = check_format(key, value, HOSTPCI_FORMAT)
        host = values.get("host")
        return cls(
            key=key,
            raw=value,
            hosts=tuple(host.split(";")) if host else (),
            mapping=values.get("mapping"),
            pcie=_flag(values, "pcie", False),
            x_vga=_flag(values, "x-vga", False),
            legacy_igd=_flag(values, "legacy-igd", False),
            rombar=_flag(values, "rombar", True),
            romfile=values.get("romfile"),
            mdev=values.get("mdev"),
            driver=values.get("driver", "vfio"),
            vendor_id=values.get("vendor-id"),
            device_id=values.get("device-id"),
            sub_vendor_id=values.get("sub-vendor-id"),
            sub_device_id=values.get("sub-device-id"),
        )

    @property
    def index(self) -> int:
        return int(self.key[len("hostpci") :])

    @property
    def root_pam_only(self) -> bool:
        """Only root@pam may write this value, or replace or delete it: a raw `host=` device
        or a `romfile` (also on a `mapping=` entry). qemu-server API2/Qemu.pm
        check_hostpci_perm, called with the old value and the new one (update_vm_api)."""
        return bool(self.hosts) or self.romfile is not None

    @property
    def is_raw(self) -> bool:
        """Raw `host=` passthrough: only root@pam may set it (mappings need Mapping.Use)."""
        return bool(self.hosts)

    @property
    def multifunction(self) -> bool:
        """`host=01:00` (no function) passes every function of the device."""
        return len(self.hosts) == 1 and "." not in self.hosts[0].rsplit(":", 1)[-1]

    def start_errors(self) -> list[str]:
        """Problems Proxmox accepts in the config but that make the VM start fail."""
        errors = []
        if self.hosts and self.mapping:
            errors.append("Cannot set both 'host' and 'mapping'.")
        if not self.hosts and not self.mapping:
            errors.append("Either 'host' or 'mapping' must be set.")
        return errors

    def with_option(self, option: str, value: str) -> str:
        """The stored value with one sub-option set; every other part kept as written."""
        ps = PropertyString.parse(self.raw, default_key="host")
        ps.set(option, value)
        return ps.render()


def hostpci_change_needs_root(key: str, before: str | None, after: str | None) -> bool:
    """Whether Proxmox keeps this change of `key` (set, rewrite or delete) to root@pam: the
    old value or the new one is root@pam's (`HostPci.root_pam_only`). A value that does not
    parse counts as root@pam's unless it is plainly a mapping without romfile."""
    return bool(hostpci_root_reasons(key, before, after))


def hostpci_root_reasons(key: str, before: str | None, after: str | None) -> list[str]:
    """Why a change of `key` is root@pam's: "raw device" and/or "romfile" (old or new value);
    empty when a token with the mapping's privileges may make it."""
    reasons: list[str] = []
    for value in (before, after):
        if value is None:
            continue
        try:
            entry = HostPci.parse(value, key)
            raw, rom = bool(entry.hosts), entry.romfile is not None
        except ValidationError:
            raw, rom = "mapping=" not in value, "romfile" in value
        for reason, hit in (("raw device", raw), ("romfile", rom)):
            if hit and reason not in reasons:
                reasons.append(reason)
    return reasons
