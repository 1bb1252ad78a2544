"""The `machine` value: QEMU machine type plus vIOMMU and power-state sub-options."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from pvefix.errors import ValidationError
from pvefix.vmconfig.propstring import Field, PropertyString, check_format

Family = Literal["i440fx", "q35", "virt"]

_TYPE_PATTERN = (
    r"(pc|pc(-i440fx)?-\d+(\.\d+)+(\+pve\d+)?(\.pxe)?|q35|pc-q35-\d+(\.\d+)+(\+pve\d+)?(\.pxe)?"
    r"|virt(?:-\d+(\.\d+)+)?(\+pve\d+)?)"
)
MACHINE_FORMAT: dict[str, Field] = {
    "type": Field(default_key=True, pattern=_TYPE_PATTERN, max_length=40),
    "viommu": Field(enum=("intel", "virtio")),
    "aw-bits": Field(type="number", minimum=32, maximum=64),
    "enable-s3": Field(type="boolean"),
    "enable-s4": Field(type="boolean"),
}

_VERSIONED = re.compile(
    r"^(?P<base>pc-i440fx|pc|pc-q35|virt)-(?P<version>\d+(?:\.\d+)+)(?P<pve>\+pve\d+)?(?P<pxe>\.pxe)?$"
)


class Machine(BaseModel):
    """A parsed `machine:` value. Absent means `pc` (i440fx) on x86_64."""

    model_config = ConfigDict(frozen=True)

    raw: str
    type: str
    family: Family
    version: str | None = None  # "9.2" when pinned
    pve_revision: str | None = None  # "+pve1"
    pxe: bool = False
    viommu: str | None = None

    @classmethod
    def parse(cls, value: str | None, key: str = "machine") -> Machine:
        """Parse and validate like Proxmox; None or empty means the default `pc`."""
        if value is None or value.strip() == "":
            return cls(raw="", type="pc", family="i440fx")
        text = value.strip()
        values = check_format(key, text, MACHINE_FORMAT)
        mtype = values.get("type", "pc")
        viommu = values.get("viommu")
        family = _family(mtype)
        if viommu == "intel" and family != "q35":
            raise ValidationError(
                f"{key}: invalid value '{value}': to use Intel vIOMMU please set the machine"
                " type to q35"
            )
        aw_bits = values.get("aw-bits")
        if viommu == "intel" and aw_bits is not None and float(aw_bits) not in (39, 48):
            raise ValidationError(
                f"{key}: invalid value '{value}': Intel vIOMMU supports only 39 or 48 bits as"
                " address width"
            )
        if aw_bits is not None and not viommu:
            raise ValidationError(
                f"{key}: invalid value '{value}': cannot set aw-bits if no vIOMMU is configured"
            )
        m = _VERSIONED.match(mtype)
        return cls(
            raw=value,
            type=mtype,
            family=family,
            version=m.group("version") if m else None,
            pve_revision=m.group("pve") if m else None,
            pxe=bool(m and m.group("pxe")),
            viommu=viommu,
        )

    @property
    def is_q35(self) -> bool:
        return self.family == "q35"

    def to_q35(self) -> str:
        """The q35 value that keeps version, +pveN, .pxe and every sub-option as written.

        `pc` -> `q35`, `pc-i440fx-9.2+pve1` -> `pc-q35-9.2+pve1` (the GUI maps it the same way).
        """
        if self.family == "q35":
            return self.raw.strip() or "q35"
        if self.family != "i440fx":
            raise ValidationError(f"machine: '{self.raw}' is not an x86 i440fx machine")
        if self.version is None:
            new_type = "q35"
        else:
            new_type = f"pc-q35-{self.version}{self.pve_revision or ''}{'.pxe' if self.pxe else ''}"
        if not self.raw:
            return new_type
        ps = PropertyString.parse(self.raw.strip(), default_key="type")
        ps.set("type", new_type)
        return ps.render()


def _family(mtype: str) -> Family:
    if mtype == "q35" or mtype.startswith("pc-q35-"):
        return "q35"
    if mtype.startswith("virt"):
        return "virt"
    return "i440fx"


def same_family(a: str | None, b: str | None) -> bool:
    """True when two machine values name the same chipset family (`q35` ~ `pc-q35-9.2+pve0`)."""
    return Machine.parse(a).family == Machine.parse(b).family
